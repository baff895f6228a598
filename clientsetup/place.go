package clientsetup

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// ErrLink: a file sbx setup would write in a project is reached through a
// symbolic link.
var ErrLink = errors.New("symbolic link")

// place is the file sbx setup reads and writes for path.
//
// A project's files (below project, the directory sbx setup runs in) must
// be the project's own: a repository the user cloned may hold symbolic
// links (git checks them out as links), and one at .cursor/mcp.json naming
// a JSON file of the user's would have its content copied into the project
// (where the agent reads it and a commit takes it), one at .cursor naming
// ~/.cursor would make a project setup change the user-level config. So no
// component of path below project may be a link, and the file, if there,
// must be a regular file.
//
// A user-level file (project == "") may be the user's own link, into a
// dotfiles repository say: it is written where it leads, so that it stays
// a link (replacing it by a file would cut the dotfiles off).
//
// The check is not atomic with the write: it guards against what a
// repository holds, not against a process racing sbx setup (the sandbox
// cannot write these names: sync quarantines .claude/ and .cursor/).
func place(project, path string) (string, error) {
	if project == "" {
		fi, err := os.Lstat(path)
		if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			return path, nil
		}
		real, err := filepath.EvalSymlinks(path)
		if err != nil {
			return "", fmt.Errorf("%s is a %w that leads nowhere sbx setup can write (%v): make it lead to a file, or remove it", path, ErrLink, err)
		}
		return real, nil
	}
	rel, err := filepath.Rel(project, path)
	if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", fmt.Errorf("%s is not inside the project %s", path, project)
	}
	cur := project
	parts := strings.Split(rel, string(filepath.Separator))
	for i, part := range parts {
		cur = filepath.Join(cur, part)
		fi, err := os.Lstat(cur)
		if errors.Is(err, fs.ErrNotExist) {
			return path, nil // sbx setup creates the rest
		}
		if err != nil {
			return "", fmt.Errorf("check %s: %w", cur, err)
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			to, _ := os.Readlink(cur)
			return "", fmt.Errorf("%s is a %w (to %q): sbx setup writes a project's own files, never through a link the repository may have planted; remove the link (or replace it by the file itself) and run sbx setup again", cur, ErrLink, to)
		}
		last := i == len(parts)-1
		if !last && !fi.IsDir() {
			return "", fmt.Errorf("%s is not a directory: move it aside and run sbx setup again", cur)
		}
		if last && !fi.Mode().IsRegular() {
			return "", fmt.Errorf("%s is not a regular file (%s): move it aside and run sbx setup again", cur, fi.Mode().Type())
		}
	}
	return path, nil
}

// projectOf is the project directory whose files place checks for a
// setup of scope (a record's Scope: the project's directory, or "global").
func projectOf(scope string) string {
	if scope == "global" {
		return ""
	}
	return scope
}
