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
		{"a file below git alternates made a directory", ".git/objects/info/alternates/i", file, false, false},
		{"git alternates as a directory", ".git/objects/info/alternates", dir, false, false},
		{"below http-alternates, any case", ".git/objects/info/HTTP-Alternates/x", file, false, false},
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
		{"git upper case", ".GIT/hooks/x", file, false, false},
		{"git mixed case config", ".Git/config", file, false, false},
		{"git trailing dot", ".git./hooks/pre-commit", file, false, false},
		{"git trailing space", ".git /config", file, false, false},
		{"git ntfs stream", ".git::$INDEX_ALLOCATION/config", file, false, false},
		{"git hfs ignorable", ".g\u200cit/config", file, false, false},
		{"git short name", "GIT~1/config", file, false, false},
		{"git dotless i", ".gıt/hooks/pre-commit", file, false, false},
		{"git dotless i upper", ".GıT/config", file, false, false},
		{"nested git dotless i", "sub/.gıt/config", file, false, false},
		{"git upper case dir", ".GIT", dir, false, false},
		{"nested git upper case", "sub/.GIT/config", file, false, false},
		{"git alternates other case", ".git/objects/INFO/Alternates", file, false, false},
		{"git hooks other case", ".git/HOOKS/pre-commit", file, false, false},
		{"git rebase todo passes (quarantined later)", ".git/rebase-merge/git-rebase-todo", file, false, true},
		{"link through own link", "keylink", link("U/U/U/U/../../../../outside/secret"), false, false},
		{"link dotdot after name", "a/l", link("b/../../c"), false, false},
		{"link leading dotdot", "a/b/l", link("../../c/d"), false, true},
		{"link dot prefix", "l", link("./README"), false, true},
		{"link into git", "l", link(".git/config"), false, false},
		{"link into git other case", "a/l", link("../.GIT/config"), false, false},
		{"link nul", "l", link("a\x00b"), false, false},
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
	for _, s := range []string{"a", ".git/config", "../x", "a/../../b", ".git/objects/info/alternates", "x/.git/y", ".GIT/hooks/x", ".g\u200cit/config", "GIT~1/config", ".git./x", ".gıt/hooks/x", ".GıT/config"} {
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
		for i, el := range strings.Split(p, "/") {
			if oracleGitName(el) && (i > 0 || el != ".git") {
				t.Fatalf("allowed a .git spelling other than the top-level .git: %q", p)
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
			// A ".." that Clean cancels against a name is one that a
			// later link could turn into a way out.
			raw, kept := 0, 0
			for _, el := range strings.Split(target, "/") {
				if el == ".." {
					raw++
				}
			}
			for _, el := range strings.Split(filepath.Clean(target), "/") {
				if el == ".." {
					kept++
				}
			}
			if raw != kept {
				t.Fatalf("allowed symlink %q -> %q with a \"..\" after a name", p, target)
			}
			for _, el := range strings.Split(target, "/") {
				if oracleGitName(el) {
					t.Fatalf("allowed symlink %q -> %q into .git", p, target)
				}
			}
		}
	})
}

func TestProtected(t *testing.T) {
	s, err := newProtectedSet(DefaultProtected, []string{"tools/githooks"})
	if err != nil {
		t.Fatal(err)
	}
	root, err := newProtectedSet(DefaultProtected, []string{"."})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		set     *protectedSet
		path    string
		e       Entry
		deleted bool
		want    bool
	}{
		{"plain file", s, "src/main.go", file, false, false},
		{"claude settings at the root", s, ".claude/settings.json", file, false, true},
		{"claude settings at depth", s, "pkg/.claude/settings.json", file, false, true},
		{"envrc at depth", s, "sub/.envrc", file, false, true},
		{"mcp.json at depth", s, "pkg/.mcp.json", file, false, true},
		{"upper case", s, ".CLAUDE/settings.json", file, false, true},
		{"mixed case envrc", s, "a/.EnvRC", file, false, true},
		{"kelvin sign", s, ".hus\u212ay/pre-commit", file, false, true},
		{"trailing dot (Windows)", s, ".envrc.", file, false, true},
		{"ntfs stream", s, ".envrc::$DATA", file, false, true},
		{"hfs ignorable", s, ".env\u200crc", file, false, true},
		{"8.3 short name", s, "CLAUDE~1/settings.json", file, false, true},
		{"pre-commit config", s, ".pre-commit-config.yaml", file, false, true},
		{"lefthook", s, "lefthook.yml", file, false, true},
		{"dot lefthook", s, "svc/.lefthook.yml", file, false, true},
		{"husky", s, ".husky/pre-commit", file, false, true},
		{"husky as a symlink", s, ".husky", link("scripts"), false, true},
		{"gemini", s, ".gemini/settings.json", file, false, true},
		{"windsurf", s, ".windsurf/mcp.json", file, false, true},
		{"zed", s, ".zed/tasks.json", file, false, true},
		{"npmrc", s, "web/.npmrc", file, false, true},
		{"yarnrc.yml", s, ".yarnrc.yml", file, false, true},
		{"mise", s, "mise.toml", file, false, true},
		{"mise in .config", s, ".config/mise/config.toml", file, false, true},
		{"tool-versions", s, ".tool-versions", file, false, true},
		{"devcontainer", s, ".devcontainer/devcontainer.json", file, false, true},
		{"workflow at depth", s, "a/.github/workflows/ci.yml", file, false, true},
		{"github but not workflows", s, ".github/CODEOWNERS", file, false, false},
		{"direnv dir", s, ".direnv/python-3/bin/python", file, false, true},
		{"deletion of a protected file", s, ".envrc", Entry{}, true, true},
		{"Makefile is not", s, "Makefile", file, false, false},
		{"sbx dir in another case", s, ".SBX/quarantine/.claude/settings.json", file, false, true},
		{"AGENTS.md is not", s, "AGENTS.md", file, false, false},
		{".gitattributes is not", s, ".gitattributes", file, false, false},
		{"a name that only contains one", s, "my.envrc.txt", file, false, false},
		{"rebase todo", s, ".git/rebase-merge/git-rebase-todo", file, false, true},
		{"rebase dir", s, ".git/rebase-merge", dir, false, true},
		{"rebase-apply", s, ".git/rebase-apply/patch", file, false, true},
		{"sequencer todo", s, ".git/sequencer/todo", file, false, true},
		{"git objects are not", s, ".git/objects/ab/cd", file, false, false},
		{"hooks dir", s, "tools/githooks/pre-commit", file, false, true},
		{"hooks dir other case", s, "Tools/GitHooks/pre-commit", file, false, true},
		{"hooks dir itself as a link", s, "tools/githooks", link("../x"), false, true},
		{"parent of hooks as a link", s, "tools", link("elsewhere"), false, true},
		{"parent of hooks as a file", s, "tools", file, false, true},
		{"parent of hooks as a directory", s, "tools", dir, false, false},
		{"sibling of hooks", s, "tools/build.sh", file, false, false},
		{"hooks path at the root: a hook", root, "pre-commit", file, false, true},
		{"hooks path at the root: other files", root, "main.go", file, false, false},
		{"hooks path at the root: hook name deeper", root, "cmd/pre-commit", file, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := c.set.protects(c.path, c.e, c.deleted); got != c.want {
				t.Fatalf("protects(%q) = %v, want %v", c.path, got, c.want)
			}
		})
	}
	nfc, err := newProtectedSet(nil, []string{"hooks-\u00e9"})
	if err != nil {
		t.Fatal(err)
	}
	if !nfc.protects("hooks-e\u0301/pre-commit", file, false) || !nfc.protects("HOOKS-\u00c9/pre-commit", file, false) {
		t.Error("a hooks directory spelled decomposed or upper case (one directory on APFS) is not protected")
	}
	for _, bad := range []string{"../x", "a/*.json", ""} {
		if _, err := newProtectedSet([]string{bad + "x"}, nil); err == nil && bad != "" {
			t.Errorf("protected entry %q accepted", bad+"x")
		}
	}
}

func TestCheckLinkTree(t *testing.T) {
	tree := map[string]string{"U": ".", "out": "/outside", "up": "..", "d/l": "../e", "loop": "loop",
		"long": strings.Repeat("./", 1000) + "long"}
	lookup := func(q string) (string, bool) { t, ok := tree[q]; return t, ok }
	for _, c := range []struct {
		name, path, target string
		ok                 bool
	}{
		{"plain", "k", "README", true},
		{"through a link to .", "k", "U/U/README", true},
		{"through a link that climbs", "k", "up/x", false},
		{"through the user's absolute link", "k", "out/secret", false},
		{"through a relative link inside", "k", "d/l/f", true},
		{"climbing out", "a/k", "../../x", false},
		{"a loop resolves nowhere", "k", "loop/x", true},
		{"a loop of long targets is too deep to follow", "k", "long/x", false},
		{"into .git through a link", "k", "U/.git/config", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := CheckLinkTree(c.path, c.target, lookup)
			if (err == nil) != c.ok {
				t.Fatalf("CheckLinkTree(%q -> %q) = %v, want ok=%v", c.path, c.target, err, c.ok)
			}
		})
	}
}

// oracleGitName is the test's own idea of a name a case-insensitive host
// takes for .git: ASCII case folded by strings.EqualFold, after dropping
// what HFS+ ignores, an NTFS stream suffix and Windows' trailing dots and
// spaces; or an 8.3 alias of it.
func oracleGitName(el string) bool {
	el = strings.Map(func(r rune) rune {
		if (r >= 0x200c && r <= 0x200f) || (r >= 0x202a && r <= 0x202e) || (r >= 0x206a && r <= 0x206f) || r == 0xfeff {
			return -1
		}
		return r
	}, el)
	el, _, _ = strings.Cut(el, ":")
	el = strings.TrimRight(el, ". ")
	return oracleSameName(el, ".git") || (len(el) >= 4 && oracleSameName(el[:4], "git~")) ||
		strings.HasPrefix(strings.ToUpper(el), "GIT~")
}

// oracleSameName: two names a case-insensitive host takes for one, to the
// tests: Unicode simple folding (strings.EqualFold, as APFS and ext4's
// casefold compare), or equal once upper-cased rune by rune
// (strings.ToUpper, as NTFS's upcase table compares: a dotless ı is an I).
func oracleSameName(a, b string) bool {
	//lint:ignore SA6005 deliberate: NTFS compares names upper-cased rune by rune, which EqualFold (simple folding) does not match (a dotless ı)
	return strings.EqualFold(a, b) || strings.ToUpper(a) == strings.ToUpper(b)
}

// FuzzProtected: whenever a component of the path is, to the test's own
// comparison (oracleGitName's stripping, then strings.EqualFold), one of the
// one-component protected names, the change is quarantined. The NFC and
// Unicode folding of foldName are beyond this oracle; it checks that they
// never lose what plain case folding finds.
func FuzzProtected(f *testing.F) {
	for _, s := range []string{".claude/settings.json", "a/.EnvRC", ".envrc.", "x/.Mcp.Json", "src/main.go", ".hus\u212ay/x", ".vımrc", "LEFTHOOK.JSONC", "a/.devcontaıner.json"} {
		f.Add(s)
	}
	s, err := newProtectedSet(DefaultProtected, nil)
	if err != nil {
		f.Fatal(err)
	}
	var names []string
	for _, e := range DefaultProtected {
		if e = strings.Trim(e, "/"); !strings.Contains(e, "/") {
			names = append(names, e)
		}
	}
	f.Fuzz(func(t *testing.T, p string) {
		if CheckPath(p) != nil {
			return
		}
		got := s.protects(p, file, false)
		for _, el := range strings.Split(p, "/") {
			el = strings.Map(func(r rune) rune {
				if (r >= 0x200c && r <= 0x200f) || (r >= 0x202a && r <= 0x202e) || (r >= 0x206a && r <= 0x206f) || r == 0xfeff {
					return -1
				}
				return r
			}, el)
			el, _, _ = strings.Cut(el, ":")
			el = strings.TrimRight(el, ". ")
			for _, n := range names {
				if oracleSameName(el, n) && !got {
					t.Fatalf("%q holds %q (as %q) but is not protected", p, n, el)
				}
			}
		}
	})
}

// FuzzFoldASCII: foldName's ASCII shortcut gives what the full Unicode
// folding gives, for every name it takes; it takes every ASCII name.
func FuzzFoldASCII(f *testing.F) {
	for _, s := range []string{"", ".git", ".GIT", "Git~1", ".git.", ".git ", ".git::$INDEX_ALLOCATION", "a:b:c", "K\u212a", "src/Main.GO", "..", " . ", "\x7f\x00Z"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, c string) {
		got, ok := foldASCII(c)
		ascii := true
		for i := 0; i < len(c); i++ {
			ascii = ascii && c[i] < 0x80
		}
		if ok != ascii {
			t.Fatalf("foldASCII(%q) ok=%v, but the name is ASCII: %v", c, ok, ascii)
		}
		if ok && got != foldUnicode(c) {
			t.Fatalf("foldASCII(%q) = %q, the full folding gives %q", c, got, foldUnicode(c))
		}
	})
}

func TestFoldASCII(t *testing.T) {
	for in, want := range map[string]string{".GIT": ".git", "GIT~1": "git~1", ".git. .": ".git", ".Git::$DATA": ".git", "Makefile": "makefile", "a.b": "a.b"} {
		if got := foldName(in); got != want {
			t.Errorf("foldName(%q) = %q, want %q", in, got, want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { foldName("main_test.go") }); n != 0 {
		t.Errorf("foldName of a lower-case ASCII name allocates %v times, want 0", n)
	}
}
