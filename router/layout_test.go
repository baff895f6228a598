package router

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// layout is a scratch tree shared by the table and fuzz tests:
//
//	root/code          the code dir and default cwd (with .git, sub/, symlinks, a
//	                   planted nested repo, a local bare repo, ...)
//	root/code2/x       a second code dir
//	root/outside       a directory outside the code dirs
//	root/home          HOME for bash runs
type layout struct {
	root, code, code2, outside, home string
}

func newLayout(tb testing.TB) *layout {
	tb.Helper()
	root, err := filepath.EvalSymlinks(tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	l := &layout{
		root:    root,
		code:    filepath.Join(root, "code"),
		code2:   filepath.Join(root, "code2"),
		outside: filepath.Join(root, "outside"),
		home:    filepath.Join(root, "home"),
	}
	for _, d := range []string{
		"code/.git", "code/sub/deeper", "code/nested/.git", "code/bare.git", "code/origin2",
		"code/existing", "code2/x", "outside", "home",
	} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			tb.Fatal(err)
		}
	}
	files := map[string]string{"code/file.txt": "x\n", "outside/secret.txt": "secret\n", "home/.profile": "p\n"}
	for f, c := range files {
		if err := os.WriteFile(filepath.Join(root, f), []byte(c), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	links := map[string]string{
		"code/link":       "../outside",
		"code/inlink":     "sub",
		"code/sub/uplink": "..",
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
			tb.Fatal(err)
		}
	}
	return l
}

// expand replaces the placeholders used in table commands.
func (l *layout) expand(s string) string {
	return strings.NewReplacer("@CODE2@", l.code2, "@CODE@", l.code, "@OUT@", l.outside, "@HOME@", l.home).Replace(s)
}

func (l *layout) codeDirs() []string { return []string{l.code, l.code2} }

func defaultPrefixes(tb testing.TB) [][]string {
	tb.Helper()
	p, err := ParsePrefixes(DefaultHostCommands)
	if err != nil {
		tb.Fatal(err)
	}
	return p
}
