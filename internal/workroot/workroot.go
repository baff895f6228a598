// Package workroot names where a local session keeps its workspaces in
// memory: the state dir's record of the directory (File), and the one shape
// such a directory may have, .../sbx-<this uid>/<16 hex digits> (Valid).
// The session writes and removes them; internal/testenv ends what a test
// left. Only a path of that shape is ever removed as workspaces.
package workroot

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// File, in a session's state dir, names the directory in memory that holds
// its workspaces; without it they are in the state dir's work.
const File = "workroot"

// Valid checks that p has the shape of a session's directory in memory.
func Valid(p string) bool {
	if !filepath.IsAbs(p) || filepath.Clean(p) != p {
		return false
	}
	name, parent := filepath.Base(p), filepath.Base(filepath.Dir(p))
	if len(name) != 16 || strings.Trim(name, "0123456789abcdef") != "" {
		return false
	}
	return parent == "sbx-"+strconv.Itoa(os.Geteuid())
}

// Of reads the directory in memory recorded in the state dir dir, if one
// is and it has that shape.
func Of(dir string) (string, bool) {
	b, err := os.ReadFile(filepath.Join(dir, File))
	if err != nil {
		return "", false
	}
	p := strings.TrimSpace(string(b))
	if !Valid(p) {
		return "", false
	}
	return p, true
}
