package sync

import (
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

var (
	file = Entry{Mode: 0o644, Size: 1, MTime: 1}
	dir  = Entry{Mode: fs.ModeDir | 0o755}
)

func link(target string) Entry { return Entry{Mode: fs.ModeSymlink | 0o777, Link: target} }

func TestCheckPullBack(t *testing.T) {
	for _, c := range []struct {
		name    string
		path    string
		e       Entry
		deleted bool
		ok      bool
	}{
		{"plain file", "src/main.go", file, false, true},
		{"deletion", "src/main.go", Entry{}, true, true},
		{"relative link inside", "a/b/link", link("../c"), false, true},
		{"link to sibling", "link", link("README"), false, true},
		{"absolute link", "link", link("/etc/passwd"), false, false},
		{"link climbing out", "a/link", link("../../x"), false, false},
		{"link to parent of root", "link", link(".."), false, false},
		{"link climbing out deep", "a/b/c/l", link("../../../../etc"), false, false},
		{"empty link", "l", link(""), false, false},
		{"dotdot path", "../x", file, false, false},
		{"dotdot inside path", "a/../../x", file, false, false},
		{"absolute path", "/etc/passwd", file, false, false},
		{"dot element", "a/./b", file, false, false},
		{"empty element", "a//b", file, false, false},
		{"nul byte", "a\x00b", file, false, false},
		{"backslash", `a\..\b`, file, false, false},
		{"git objects", ".git/objects/ab/cdef", file, false, true},
		{"git refs", ".git/refs/heads/main", file, false, true},
		{"git logs", ".git/logs/HEAD", file, false, true},
		{"git HEAD", ".git/HEAD", file, false, true},
		{"git index", ".git/index", file, false, true},
		{"git packed-refs", ".git/packed-refs", file, false, true},
		{"git COMMIT_EDITMSG", ".git/COMMIT_EDITMSG", file, false, true},
		{"git rebase state", ".git/rebase-merge/done", file, false, true},
		{"git dir itself", ".git", dir, false, true},
		{"git config", ".git/config", file, false, false},
		{"git config.worktree", ".git/config.worktree", file, false, false},
		{"git hook", ".git/hooks/pre-push", file, false, false},
		{"git hooks dir", ".git/hooks", dir, false, false},
		{"git info", ".git/info/attributes", file, false, false},
		{"git modules", ".git/modules/x/config", file, false, false},
		{"git worktrees", ".git/worktrees/w/gitdir", file, false, false},
		{"git commondir", ".git/commondir", file, false, false},
		{"git alternates", ".git/objects/info/alternates", file, false, false},
		{"git http-alternates", ".git/objects/info/http-alternates", file, false, false},
		{"git symlink inside", ".git/refs/heads/x", link("../../config"), false, false},
		{"git replaced by file", ".git", file, false, false},
		{"git replaced by link", ".git", link("/tmp/evil"), false, false},
		{"git deleted", ".git", Entry{}, true, false},
		{"nested git dir", "vendor/x/.git", dir, false, false},
		{"nested git config", "vendor/x/.git/config", file, false, false},
		{"nested gitfile", "sub/.git", file, false, false},
		{"git-like name", "a/.gitignore", file, true, true},
		{".github workflow", ".github/workflows/ci.yml", file, false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := CheckPullBack(c.path, c.e, c.deleted)
			if (r == nil) != c.ok {
				t.Fatalf("CheckPullBack(%q) = %v, want ok=%v", c.path, r, c.ok)
			}
			if r != nil && (r.Path != c.path || r.Reason == "") {
				t.Fatalf("refusal without a path or reason: %+v", r)
			}
		})
	}
}

func FuzzCheckPullBack(f *testing.F) {
	for _, s := range []string{"a", ".git/config", "../x", "a/../../b", ".git/objects/info/alternates", "x/.git/y"} {
		f.Add(s, "target", uint8(0))
	}
	f.Fuzz(func(t *testing.T, p, target string, kind uint8) {
		e := file
		switch kind % 3 {
		case 1:
			e = dir
		case 2:
			e = link(target)
		}
		if CheckPullBack(p, e, false) != nil {
			return
		}
		// Whatever is allowed stays inside the tree and out of .git's
		// dangerous parts.
		clean := filepath.Clean(p)
		if clean != p || clean == ".." || strings.HasPrefix(clean, "../") || filepath.IsAbs(clean) {
			t.Fatalf("allowed path %q is not clean and relative", p)
		}
		for _, el := range strings.Split(p, "/")[1:] {
			if el == ".git" {
				t.Fatalf("allowed nested .git: %q", p)
			}
		}
		if strings.HasPrefix(p, ".git/") {
			for _, bad := range []string{".git/config", ".git/hooks", ".git/info", ".git/modules", ".git/worktrees", ".git/commondir", ".git/objects/info/alternates"} {
				if p == bad || strings.HasPrefix(p, bad+"/") {
					t.Fatalf("allowed %q", p)
				}
			}
		}
		if e.Mode&fs.ModeSymlink != 0 {
			j := filepath.Join(filepath.Dir(p), target)
			if filepath.IsAbs(target) || j == ".." || strings.HasPrefix(j, "../") {
				t.Fatalf("allowed symlink %q -> %q leaves the tree", p, target)
			}
		}
	})
}
