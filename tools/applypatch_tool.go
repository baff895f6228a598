package tools

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sbx-sh/sbx/session"
	sbxsync "github.com/sbx-sh/sbx/sync"
)

// ApplyPatchInput is the apply_patch tool's arguments: Codex's own.
type ApplyPatchInput struct {
	Input string `json:"input" jsonschema:"The entire contents of the apply_patch command: a patch from '*** Begin Patch' to '*** End Patch'."`
}

// ApplyPatchTool applies a patch in Codex's grammar in the sandbox.
func ApplyPatchTool(p *Sessions) ServerTool {
	return newTool(&mcp.Tool{
		Name: "apply_patch",
		Description: `Applies a patch to files in this session's sandbox (Codex's apply_patch format). Inside the code directories the changes reach the host before the call returns.

The patch is a stripped-down, file-oriented diff:

*** Begin Patch
*** Add File: path/to/new.txt
+each line of the new file, prefixed with +
*** Delete File: path/to/old.txt
*** Update File: path/to/file.py
*** Move to: path/to/renamed.py   (optional)
@@ def some_function():           (optional: a line before the change, to place it)
 context line (a space, then the line)
-removed line
+added line
*** End of File                   (optional: the chunk ends the file)
*** End Patch

- Paths are relative to the working directory (as the bash tool's) or absolute.
- Give about 3 lines of context above and below each change; use @@ lines to tell apart repeated code.
- Every chunk must match before anything is written: on a mismatch nothing changes and the error says which chunk of which file did not match.`,
		Annotations: &mcp.ToolAnnotations{Title: "Apply a patch in the sandbox", DestructiveHint: ptr(true), OpenWorldHint: ptr(false)},
	}, p.applyPatch)
}

// planned is a file as the patch leaves it.
type planned struct {
	path    string
	had     bool   // existed before the patch
	hash    string // SHA-256 of what was read, when had
	orig    string
	exists  bool
	content string
}

func (p *Sessions) applyPatch(ctx context.Context, req *mcp.CallToolRequest, in ApplyPatchInput) (*mcp.CallToolResult, any, error) {
	if len(in.Input) > MaxContentBytes {
		return nil, nil, fmt.Errorf("the patch is %d bytes, over the limit of %d", len(in.Input), MaxContentBytes)
	}
	ops, err := ParsePatch(in.Input)
	if err != nil {
		return nil, nil, err
	}
	c, err := p.acquire(ctx, req)
	if err != nil {
		return nil, nil, err
	}
	defer c.done()
	cwd := c.cwd()
	resolve := func(rel string, line int) (string, error) {
		if !filepath.IsAbs(rel) {
			rel = filepath.Join(cwd, rel)
		}
		path, err := checkPath(rel)
		if err != nil {
			return "", fmt.Errorf("patch line %d: %w", line, err)
		}
		return path, nil
	}
	files := map[string]*planned{}
	var order []string
	load := func(path string) (*planned, error) {
		if f := files[path]; f != nil {
			return f, nil
		}
		var stdout, stderr bytes.Buffer
		lim := &limited{w: &stdout, n: MaxEditBytes}
		res, err := c.sess.Exec(ctx, session.Run{Argv: []string{"/bin/sh", "-c", readScript, "sbx", path}, Dir: "/", Stdout: lim, Stderr: &stderr})
		if err != nil {
			return nil, c.failed(err)
		}
		f := &planned{path: path}
		switch {
		case res.ExitCode == exitMissing:
		case res.ExitCode != 0:
			return nil, fileError(path, res.ExitCode, stderr.String())
		case lim.over:
			return nil, fmt.Errorf("%s is over %d bytes, too large for apply_patch: use bash (sed, patch) for it", path, MaxEditBytes)
		default:
			f.had, f.exists = true, true
			f.orig, f.content = stdout.String(), stdout.String()
			f.hash = hex.EncodeToString(sha(f.orig))
		}
		files[path] = f
		order = append(order, path)
		return f, nil
	}
	// Every operation is worked out before anything is written.
	for _, op := range ops {
		path, err := resolve(op.Path, op.Line)
		if err != nil {
			return nil, nil, err
		}
		f, err := load(path)
		if err != nil {
			return nil, nil, err
		}
		switch op.Kind {
		case PatchAddFile:
			f.exists, f.content = true, op.Content
		case PatchDeleteFile:
			if !f.exists {
				return nil, nil, fmt.Errorf("patch line %d: failed to delete %s: the file does not exist; nothing was changed", op.Line, path)
			}
			f.exists = false
		case PatchUpdateFile:
			if !f.exists {
				return nil, nil, fmt.Errorf("patch line %d: failed to read file to update %s: the file does not exist; nothing was changed", op.Line, path)
			}
			updated, err := ApplyChunks(path, f.content, op.Chunks)
			if err != nil {
				//lint:ignore ST1005 the agent reads this as the tool's result: the chunk's own error, then a sentence of its own
				return nil, nil, fmt.Errorf("%w\nNothing was changed.", err)
			}
			if op.MoveTo == "" {
				f.content = updated
				continue
			}
			to, err := resolve(op.MoveTo, op.Line)
			if err != nil {
				return nil, nil, err
			}
			dst, err := load(to)
			if err != nil {
				return nil, nil, err
			}
			f.exists = false
			dst.exists, dst.content = true, updated
		}
	}
	var done []string
	var rep sbxsync.Report
	var notes strings.Builder
	for _, path := range order {
		f := files[path]
		guard := "-"
		if f.had {
			guard = f.hash
		}
		var mark string
		var r sbxsync.Report
		switch {
		case f.exists && (!f.had || f.content != f.orig):
			mark = "M"
			if !f.had {
				mark = "A"
			}
			_, r, err = writeFile(ctx, c, path, f.content, guard)
		case !f.exists && f.had:
			mark = "D"
			r, err = deleteFile(ctx, c, path, guard)
		default:
			continue
		}
		mergeReport(&rep, r)
		if err != nil {
			msg := fmt.Sprintf("%s: %v", path, err)
			if len(done) > 0 {
				msg += "\nAlready applied: " + strings.Join(done, ", ") + "; the rest was not."
			} else {
				msg += "\nNothing was changed."
			}
			return nil, nil, errors.New(msg)
		}
		done = append(done, mark+" "+path)
		notes.WriteString(c.sandboxOnly(path, "the file", "it"))
	}
	text := "Success. Updated the following files:\n" + strings.Join(done, "\n")
	if len(done) == 0 {
		text = "Success. The patch changed nothing."
	}
	return textResult(text + notes.String() + syncText(rep) + notesText(c.notes)), nil, nil
}

// deleteScript removes a file only when its SHA-256 is $2 (or $2 is "any").
const deleteScript = `p=$1
[ -d "$p" ] && exit 10
[ -e "$p" ] || [ -L "$p" ] || exit 11
if [ "$2" != any ]; then
	h=$(sha256sum < "$p") || exit 14
	[ "${h%% *}" = "$2" ] || exit 18
fi
rm -f -- "$p" 2>&1 >&2 || exit 16
`

func deleteFile(ctx context.Context, c *call, path, guard string) (sbxsync.Report, error) {
	var stderr bytes.Buffer
	res, err := c.sess.Exec(ctx, session.Run{Argv: []string{"/bin/sh", "-c", deleteScript, "sbx", path, guard}, Dir: "/", Stderr: &stderr})
	if err != nil {
		return res.Sync, c.failed(err)
	}
	if res.ExitCode != 0 {
		return res.Sync, fileError(path, res.ExitCode, stderr.String())
	}
	st := &c.e.files
	st.mu.Lock()
	delete(c.state().read, path)
	st.mu.Unlock()
	return res.Sync, nil
}

// mergeReport adds what one round trip did not simply apply to the report
// of the whole patch.
func mergeReport(to *sbxsync.Report, r sbxsync.Report) {
	to.Refused = append(to.Refused, r.Refused...)
	to.Conflicts = append(to.Conflicts, r.Conflicts...)
	to.Quarantined = append(to.Quarantined, r.Quarantined...)
}
