package session

import (
	"fmt"
	"strings"

	"github.com/sbx-sh/sbx/internal/escape"
	sbxsync "github.com/sbx-sh/sbx/sync"
)

// ConflictNote says, in one line, what a conflict of a sync report did:
// aside is the path the report lists, the copy of the losing side
// (NAME.sbx-conflict or NAME.sbx-conflict-N), and the note names both it
// and the file it is a copy of. The CLI and the MCP tools both print it, so
// they name the same, existing files.
func ConflictNote(aside string) string {
	orig := ConflictOriginal(aside)
	return fmt.Sprintf("%s changed on the host and in the sandbox; the host's version stays, the sandbox's is in %s", escape.Name(orig), escape.Name(aside))
}

// ConflictOriginal is the path a conflict copy was made of: aside without
// its .sbx-conflict or .sbx-conflict-N suffix (aside itself when it has
// none).
func ConflictOriginal(aside string) string {
	i := strings.LastIndex(aside, sbxsync.ConflictSuffix)
	if i <= 0 {
		return aside
	}
	rest := aside[i+len(sbxsync.ConflictSuffix):]
	if rest != "" {
		n := strings.TrimPrefix(rest, "-")
		if n == rest || n == "" || strings.Trim(n, "0123456789") != "" {
			return aside
		}
	}
	return aside[:i]
}
