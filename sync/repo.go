package sync

import (
	"bytes"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
)

// A directory git on the host takes for a repository runs what its config
// says (core.fsmonitor, core.sshCommand, hooks) as soon as a shell prompt
// runs git status there: git's setup.c (is_git_directory) takes any
// directory with a valid HEAD (a "ref: refs/..." line, an object id, or a
// symlink into refs/), an objects/ and a refs/ directory (or a commondir
// file naming another directory that has them) for a bare repository, under
// any name ("evil", "x.git"). So, outside the top-level .git (which has its
// own rules, CheckPullBack), two kinds of change wait in quarantine:
//   - a HEAD, in any spelling a case-insensitive host takes for it, whose
//     content is a git HEAD (or any symlink named so): without it, no
//     directory the sandbox shapes becomes a repository on the host;
//   - what makes a repository run or read something (config, hooks/,
//     commondir, info/, worktrees/, modules/, objects/info/) inside a
//     directory that is one: its HEAD on the host is a git HEAD (a bare
//     fixture the project keeps), or this patch brings such a HEAD.

// repoControl are the folded names, directly inside a git directory, that
// make git run a program or read another repository.
var repoControl = map[string]bool{
	"config": true, "config.worktree": true, "commondir": true, "gitdir": true, "hooks": true,
	"info": true, "worktrees": true, "modules": true, "branches": true, "remotes": true,
}

// gitHeadShaped reports whether b, the start of a file named HEAD, is what
// git's validate_headref accepts, read generously (leading white space
// allowed, "ref:" with anything after it, 40 or more hex digits).
func gitHeadShaped(b []byte) bool {
	b = bytes.TrimLeft(b, " \t\r\n")
	if bytes.HasPrefix(b, []byte("ref:")) {
		return true
	}
	if len(b) < 40 {
		return false
	}
	for _, c := range b[:40] {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}

// headRead is how much of a HEAD is read (git reads 255 bytes).
const headRead = 256

// inTopGit reports whether p is the top-level .git or below it.
func inTopGit(p string) bool { return p == ".git" || strings.HasPrefix(p, ".git/") }

// noteHead records in heads the directory of a patch item that is a git
// HEAD (reading its body; the first pass discards bodies anyway).
func noteHead(heads map[string]bool, it *Item) {
	if it.Deleted || inTopGit(it.Path) || foldName(path.Base(it.Path)) != "head" {
		return
	}
	switch {
	case it.Entry.isLink():
		heads[path.Dir(it.Path)] = true
	case it.Entry.Mode.IsRegular():
		b, _ := io.ReadAll(io.LimitReader(it.Body, headRead))
		if gitHeadShaped(b) {
			heads[path.Dir(it.Path)] = true
		}
	}
}

// repoState decides, for one code dir's pull-back, which changes would
// plant or change a git directory.
type repoState struct {
	heads map[string]bool // directories given a git HEAD by this patch
	host  map[string]bool // directories whose HEAD on the host is a git HEAD
}

// plants reports whether the change to p must wait in quarantine as one
// that makes or changes a git directory (root is the code dir's).
func (rs *repoState) plants(root *os.Root, p string, deleted bool) bool {
	if inTopGit(p) {
		return false
	}
	els := strings.Split(p, "/")
	last := len(els) - 1
	if !deleted && rs.heads[path.Dir(p)] && foldName(els[last]) == "head" {
		return true
	}
	for k := 0; k <= last; k++ {
		c := foldName(els[k])
		if !repoControl[c] && !(c == "objects" && k < last && foldName(els[k+1]) == "info") {
			continue
		}
		dir := "."
		if k > 0 {
			dir = strings.Join(els[:k], "/")
		}
		if rs.heads[dir] || rs.hostRepo(root, dir) {
			return true
		}
	}
	return false
}

// hostRepo reports whether dir on the host holds a git HEAD (cached).
func (rs *repoState) hostRepo(root *os.Root, dir string) bool {
	if dir == ".git" || strings.HasPrefix(dir, ".git/") {
		return false
	}
	if v, ok := rs.host[dir]; ok {
		return v
	}
	v := false
	head := path.Join(dir, "HEAD")
	if fi, err := root.Lstat(head); err == nil {
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			v = true
		case fi.Mode().IsRegular():
			if f, err := root.OpenFile(head, os.O_RDONLY|noFollow|noWait, 0); err == nil {
				b, _ := io.ReadAll(io.LimitReader(f, headRead))
				f.Close()
				v = gitHeadShaped(b)
			}
		}
	}
	if rs.host == nil {
		rs.host = map[string]bool{}
	}
	rs.host[dir] = v
	return v
}
