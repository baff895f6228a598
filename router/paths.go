package router

import (
	"errors"
	"io/fs"
	"os"
	"path"
	"strings"
)

// location is a directory inside a code dir: the code dir (root, as the user
// gave it) and the components below it, each checked to be a real directory
// (not a symlink) when it was added. Because every component is a real
// directory, ".." can be applied lexically; it may never climb above root.
type location struct {
	root string
	rel  []string
}

func (l location) abs() string {
	return path.Join(append([]string{l.root}, l.rel...)...)
}

type pathMode int

const (
	// mustBeDir: every component exists and is a real directory.
	mustBeDir pathMode = iota
	// mayBeNew: the same, except that the last component may not exist yet
	// (the directory git clone creates).
	mayBeNew
)

// locate places an absolute path inside the code dir that contains it.
func (w *walker) locate(p, what string) (location, *refusal) {
	if !strings.HasPrefix(p, "/") {
		return location{}, refuse("%s %s is not an absolute path", what, quote(p))
	}
	return w.resolve(location{}, p, mustBeDir, what)
}

// resolve resolves p against base (or on its own if absolute). The result is
// inside a code dir and no component below the code dir is a symlink or a
// .git directory. The only I/O is Lstat (and Stat of the code dir itself,
// which the user may have placed behind a symlink).
func (w *walker) resolve(base location, p string, mode pathMode, what ...string) (location, *refusal) {
	shown := p
	if len(what) > 0 {
		shown = what[0] + " " + quote(p)
	} else {
		shown = "path " + quote(p)
	}
	if p == "" {
		return location{}, refuse("%s is empty", shown)
	}
	var comps []string
	loc := base
	if strings.HasPrefix(p, "/") {
		for _, c := range strings.Split(p, "/") {
			if c == ".." {
				return location{}, refuse("%s: an absolute path with \"..\" is never used on the host", shown)
			}
		}
		clean := path.Clean(p)
		root := ""
		for _, d := range w.codeDirs {
			if (clean == d || strings.HasPrefix(clean, d+"/")) && len(d) > len(root) {
				root = d
			}
		}
		if root == "" {
			return location{}, refuse("%s is outside the code dirs", shown)
		}
		if fi, err := os.Stat(root); err != nil || !fi.IsDir() {
			return location{}, refuse("code dir %s is not a directory", quote(root))
		}
		loc = location{root: root}
		comps = strings.Split(strings.TrimPrefix(clean, root), "/")
	} else {
		if loc.root == "" {
			return location{}, refuse("%s is relative to nothing", shown)
		}
		comps = strings.Split(p, "/")
	}
	last := -1
	for i, c := range comps {
		if c != "" && c != "." {
			last = i
		}
	}
	rel := append([]string(nil), loc.rel...)
	for i, c := range comps {
		switch c {
		case "", ".":
			continue
		case "..":
			if len(rel) == 0 {
				return location{}, refuse("%s leaves the code dir", shown)
			}
			rel = rel[:len(rel)-1]
			continue
		}
		if isGitName(c) {
			return location{}, refuse("%s enters a .git directory", shown)
		}
		rel = append(rel, c)
		fi, err := os.Lstat(location{loc.root, rel}.abs())
		switch {
		case err != nil && errors.Is(err, fs.ErrNotExist) && mode == mayBeNew && i == last:
		case err != nil:
			return location{}, refuse("%s is not an existing directory in the code dir", shown)
		case fi.Mode()&fs.ModeSymlink != 0:
			return location{}, refuse("%s passes through a symlink", shown)
		case !fi.IsDir():
			return location{}, refuse("%s is not a directory", shown)
		}
	}
	return location{root: loc.root, rel: rel}, nil
}

// isGitName reports whether a path component names a git directory, in every
// spelling a case-insensitive or Windows-like file system would accept.
func isGitName(c string) bool {
	l := strings.ToLower(strings.TrimRight(c, ". "))
	return l == ".git" || strings.HasPrefix(l, "git~")
}

// nestedRepo refuses a directory below the code dir root that holds its own
// .git: host git must only ever use the code dir's own repository.
func nestedRepo(l location) *refusal {
	for k := 1; k <= len(l.rel); k++ {
		p := location{l.root, l.rel[:k]}.abs()
		if _, err := os.Lstat(p + "/.git"); err == nil || !errors.Is(err, fs.ErrNotExist) {
			return refuse("%s holds its own .git; host git only uses the code dir's own repository", quote(p))
		}
	}
	return nil
}

// quote shows a string in a reason.
func quote(s string) string {
	const max = 80
	if len(s) > max {
		s = s[:max] + "..."
	}
	return `"` + reasonQuoter.Replace(s) + `"`
}

// reasonQuoter is made once: a Replacer builds its tables on first use, and
// every decision quotes (about 26 KB per command when made per call).
var reasonQuoter = strings.NewReplacer(`\`, `\\`, `"`, `\"`)
