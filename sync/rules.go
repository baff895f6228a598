package sync

import (
	"fmt"
	"path"
	"strings"
)

// gitAllowed lists what may come back into a code dir's .git: what git writes
// to record work. Everything else there (config, hooks, info, modules,
// worktrees, commondir, alternates) can make the host run a program or read
// another repository, so it stays in the sandbox.
var gitAllowedFiles = map[string]bool{
	"HEAD": true, "ORIG_HEAD": true, "FETCH_HEAD": true, "MERGE_HEAD": true, "MERGE_MSG": true,
	"MERGE_MODE": true, "MERGE_RR": true, "CHERRY_PICK_HEAD": true, "REVERT_HEAD": true,
	"REBASE_HEAD": true, "AUTO_MERGE": true, "BISECT_LOG": true, "index": true,
	"packed-refs": true, "COMMIT_EDITMSG": true, "TAG_EDITMSG": true, "SQUASH_MSG": true,
	"description": true, "shallow": true,
}

var gitAllowedDirs = []string{"objects", "refs", "logs", "rebase-merge", "rebase-apply", "sequencer", "rr-cache"}

// Refusal says why a change from the sandbox is not applied to the host.
type Refusal struct {
	Path   string
	Reason string
}

func (r Refusal) Error() string { return fmt.Sprintf("%s: %s", r.Path, r.Reason) }

// CheckPullBack decides whether a change the sandbox made to p (an entry of
// type e, or a deletion) may be applied to the host's code dir. It returns
// nil when it may.
func CheckPullBack(p string, e Entry, deleted bool) *Refusal {
	if err := CheckPath(p); err != nil {
		return &Refusal{p, err.Error()}
	}
	els := strings.Split(p, "/")
	for i, el := range els {
		if el == ".git" && i > 0 {
			return &Refusal{p, "a nested .git is never brought back to the host (it could carry a config that runs programs)"}
		}
	}
	if els[0] != ".git" {
		if !deleted && e.isLink() {
			if !linkStaysInside(p, e.Link) {
				return &Refusal{p, fmt.Sprintf("symlink to %q points outside the code directory", e.Link)}
			}
		}
		return nil
	}
	if len(els) == 1 {
		if deleted || !e.Mode.IsDir() {
			return &Refusal{p, "the top-level .git is never removed or replaced by a file or symlink from the sandbox"}
		}
		return nil
	}
	if !deleted && e.isLink() {
		return &Refusal{p, "symlinks inside .git are never brought back"}
	}
	rest := strings.Join(els[1:], "/")
	if len(els) == 2 && gitAllowedFiles[els[1]] {
		return nil
	}
	for _, d := range gitAllowedDirs {
		if rest == d || strings.HasPrefix(rest, d+"/") {
			if d == "objects" && (rest == "objects/info/alternates" || rest == "objects/info/http-alternates") {
				return &Refusal{p, "object alternates are never brought back (they point git at other repositories)"}
			}
			return nil
		}
	}
	return &Refusal{p, "only objects, refs, logs, HEAD, index and other git state come back into .git, never config, hooks or info"}
}

// linkStaysInside reports whether a symlink at p with target t resolves, by
// its text alone, inside the tree that holds p. Absolute targets never do.
func linkStaysInside(p, t string) bool {
	if t == "" || strings.HasPrefix(t, "/") || strings.ContainsRune(t, 0) {
		return false
	}
	j := path.Join(path.Dir(p), t)
	return j != ".." && !strings.HasPrefix(j, "../")
}
