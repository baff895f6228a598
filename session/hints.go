package session

import (
	"bytes"
	"io"
	"path"
	"strings"
	"sync"

	sbxsync "github.com/sbx-sh/sbx/sync"
)

// Hints for what a newcomer meets in the sandbox that the sandbox alone
// cannot fix: each says why, and what to do on the host. A hint is a note
// (Notices), given once per session.

// identityHint is the note for git's "Author identity unknown".
const identityHint = "git has no author identity in the sandbox: sbx gives the sandbox's git the user.name and user.email " +
	"of your host's git config, and the host sets none. Set them on the host (git config --global user.name \"Your Name\"; " +
	"git config --global user.email you@example.com); the next command's sandbox has them"

// venvHint is the note for a virtualenv's interpreter link refused by the
// pull-back.
const venvHint = "a Python virtualenv in a code dir links its interpreter to the sandbox's own Python (an absolute link, " +
	"which is never brought back: on the host it would point into the host's file system). Make the venv outside " +
	"the code dirs (python3 -m venv ~/.venvs/NAME; it persists with --keep), or list it in .sbxignore so that it " +
	"stays in the sandbox"

// gitIdentityMarks are what git prints when it has no identity (git's
// ident.c: "Author identity unknown" then "*** Please tell me who you are.").
var gitIdentityMarks = [][]byte{[]byte("Please tell me who you are"), []byte("Author identity unknown"), []byte("Committer identity unknown")}

// identityWatch passes output on and notes whether git's identity message
// went by. It keeps only the tail of the last write that could start a mark,
// so it costs nothing for output of any size.
type identityWatch struct {
	w    io.Writer
	mu   sync.Mutex // guards tail and seen: the backends may write stdout and stderr from two goroutines
	tail []byte
	seen bool
}

func (iw *identityWatch) Write(p []byte) (int, error) {
	iw.mu.Lock()
	if !iw.seen {
		// A mark lies within p, or across the last write's kept tail and
		// p's first bytes: neither copies p (output of any size).
		const keep = 32 // longer than the longest mark
		joint := append(iw.tail, p[:min(len(p), keep)]...)
		for _, m := range gitIdentityMarks {
			if bytes.Contains(joint, m) || bytes.Contains(p, m) {
				iw.seen = true
				break
			}
		}
		if len(p) >= keep {
			joint = p
		}
		iw.tail = append(iw.tail[:0], joint[max(0, len(joint)-keep):]...)
	}
	iw.mu.Unlock()
	return iw.w.Write(p)
}

func (iw *identityWatch) saw() bool {
	if iw == nil {
		return false
	}
	iw.mu.Lock()
	defer iw.mu.Unlock()
	return iw.seen
}

// watchIdentity wraps the command's output writers; one writer given as
// both stays one (the backends merge stderr into stdout by identity).
func watchIdentity(stdout, stderr io.Writer) (io.Writer, io.Writer, []*identityWatch) {
	var ws []*identityWatch
	wrap := func(w io.Writer) io.Writer {
		if w == nil {
			return nil
		}
		iw := &identityWatch{w: w}
		ws = append(ws, iw)
		return iw
	}
	if stdout != nil && stdout == stderr {
		w := wrap(stdout)
		return w, w, ws
	}
	return wrap(stdout), wrap(stderr), ws
}

// isVenvInterpreter reports whether a refusal is a virtualenv's
// interpreter link (bin/python*, with the venv's own absolute target).
func isVenvInterpreter(r sbxsync.Refusal) bool {
	base, dir := path.Base(r.Path), path.Base(path.Dir(r.Path))
	return (dir == "bin" || dir == "Scripts") && strings.HasPrefix(base, "python") && strings.Contains(r.Reason, "symlink")
}

// hint notes h once per session. Called with mu held.
func (s *Session) hint(key, h string) {
	if s.hinted == nil {
		s.hinted = map[string]bool{}
	}
	if s.hinted[key] {
		return
	}
	s.hinted[key] = true
	s.notices = append(s.notices, h)
}

// giveHints notes what the command met that the host must fix. Called with
// mu held.
func (s *Session) giveHints(watches []*identityWatch, rep sbxsync.Report) {
	for _, w := range watches {
		if w.saw() {
			s.hint("git-identity", identityHint)
			break
		}
	}
	for _, r := range rep.Refused {
		if isVenvInterpreter(r) {
			s.hint("venv", venvHint)
			break
		}
	}
}
