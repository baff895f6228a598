package router

import (
	"errors"
	"io/fs"
	"os"
	"path"
	"strings"
	"syscall"
)

// A listed host command other than git (gh pr create, say) runs with the
// user's credentials and reads whatever files its arguments name: `gh pr
// create --body-file /etc/passwd` would upload a host file. The router knows
// no options of such commands, so it judges every argument by its shape:
// whatever in it may be a path must name a place inside the code dirs,
// reached without a symlink and outside .git, or the command runs in the
// sandbox (where it is a stub that says how to run it).

// checkPathArgs refuses the first argument after the listed prefix that is,
// or carries, a path leading outside the code dirs.
func (w *walker) checkPathArgs(dir location, args []string) *refusal {
	for _, a := range args {
		for _, p := range pathCandidates(a) {
			if why := w.argPath(dir, p); why != "" {
				return refuse("argument %s of a listed host command names %s %s; such arguments run in the sandbox", quote(a), quote(p), why)
			}
		}
	}
	return nil
}

// pathCandidates are the strings inside one argument that a program may
// open as a file: the argument itself, what follows "@" (curl, gh api -F
// k=@file), what follows the first "=" (--opt=path, key=path), and what
// follows a short option's letter (-fpath). Each is split the same way again,
// so "-F@/etc/passwd" and "--field=k=@/x" are seen.
func pathCandidates(a string) []string {
	seen := map[string]bool{}
	var out []string
	var add func(string, int)
	add = func(s string, depth int) {
		if s == "" || seen[s] || depth > 4 {
			return
		}
		seen[s] = true
		out = append(out, s)
		if rest, ok := strings.CutPrefix(s, "@"); ok {
			add(rest, depth+1)
		}
		if _, v, ok := strings.Cut(s, "="); ok {
			add(v, depth+1)
		}
		if len(s) > 2 && s[0] == '-' && s[1] != '-' {
			add(s[2:], depth+1)
		}
		if rest, ok := strings.CutPrefix(s, "file:"); ok {
			add(strings.TrimPrefix(rest, "//"), depth+1)
		}
	}
	add(a, 0)
	return out
}

// argPath says why p, as a path, leads outside the code dirs (or into a
// symlink or .git in them), or "" when it does not. A word that names
// nothing that exists (a title, a branch) is no path and passes, as long as
// it does not start at the home directory, name an absolute place outside
// the code dirs, or climb out with "..".
func (w *walker) argPath(dir location, p string) string {
	loc := dir
	comps := strings.Split(p, "/")
	switch {
	case strings.HasPrefix(p, "~"):
		return "(the home directory)"
	case strings.HasPrefix(p, "/"):
		clean := path.Clean(p)
		root := ""
		for _, d := range w.codeDirs {
			if (clean == d || strings.HasPrefix(clean, d+"/")) && len(d) > len(root) {
				root = d
			}
		}
		if root == "" || !strings.HasPrefix(p, root+"/") && p != root {
			return "(outside the code dirs)"
		}
		loc = location{root: root}
		comps = strings.Split(strings.TrimPrefix(p, root), "/")
	}
	// Every component is checked on the file system until one does not
	// exist; from there on only lexically, since a program may clean the
	// path before it opens it ("new/../../x" is "../x" to path.Clean).
	rel := append([]string(nil), loc.rel...)
	exists := true
	for _, c := range comps {
		switch c {
		case "", ".":
			continue
		case "..":
			if len(rel) == 0 {
				return "(it climbs out of the code dir)"
			}
			rel = rel[:len(rel)-1]
			continue
		}
		if isGitName(c) {
			return "(inside .git, which holds the repository's config and credentials)"
		}
		rel = append(rel, c)
		if !exists {
			continue
		}
		fi, err := os.Lstat(location{loc.root, rel}.abs())
		switch {
		case err != nil && (errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)):
			exists = false
		case err != nil:
			return "(it cannot be checked: " + err.Error() + ")"
		case fi.Mode()&fs.ModeSymlink != 0:
			return "(through a symlink, which may point outside)"
		}
	}
	return ""
}
