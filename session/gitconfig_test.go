package session

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func gitConfig(t testing.TB, code string, args ...string) {
	t.Helper()
	if out, err := exec.Command("git", append([]string{"-C", code, "config"}, args...)...).CombinedOutput(); err != nil {
		t.Fatalf("git config %v: %v %s", args, err, out)
	}
}

func writeFile(t testing.TB, p, content string) {
	t.Helper()
	os.MkdirAll(filepath.Dir(p), 0o755)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestReadGitConfigPaths: with real git, which paths of the code dir the
// host's git reads as config or runs, and which it does not.
func TestReadGitConfigPaths(t *testing.T) {
	for _, c := range []struct {
		name    string
		setup   func(t *testing.T, code, home string)
		want    []string // each must be protected
		notWant []string // none may be
	}{
		{"include relative to .git/config", func(t *testing.T, code, _ string) {
			gitConfig(t, code, "include.path", "../.gitconfig")
		}, []string{".gitconfig"}, nil},
		{"include from an included file, relative to it", func(t *testing.T, code, _ string) {
			gitConfig(t, code, "include.path", "../conf/a.gitconfig")
			writeFile(t, filepath.Join(code, "conf/a.gitconfig"), "[include]\n\tpath = more/b.gitconfig\n[includeIf \"onbranch:x\"]\n\tpath = ../c.gitconfig\n")
		}, []string{"conf/a.gitconfig", "conf/more/b.gitconfig", "c.gitconfig"}, nil},
		{"includeIf whatever the condition", func(t *testing.T, code, _ string) {
			gitConfig(t, code, "includeIf.onbranch:never-there.path", "../branch.gitconfig")
			gitConfig(t, code, "includeIf.gitdir:/nowhere/.path", code+"/gitdir.gitconfig")
		}, []string{"branch.gitconfig", "gitdir.gitconfig"}, nil},
		{"include through ~ and a symlink into the tree", func(t *testing.T, code, home string) {
			os.MkdirAll(home, 0o755)
			os.Symlink(filepath.Join(code, "dot/gitconfig"), filepath.Join(home, "work.gitconfig"))
			writeFile(t, filepath.Join(home, ".gitconfig"), "[include]\n\tpath = ~/work.gitconfig\n")
		}, []string{"dot/gitconfig"}, nil},
		{"a symlinked include target in the tree: both names", func(t *testing.T, code, _ string) {
			writeFile(t, filepath.Join(code, "real/gitconfig"), "")
			os.Symlink("real/gitconfig", filepath.Join(code, ".gitconfig"))
			gitConfig(t, code, "include.path", "../.gitconfig")
		}, []string{".gitconfig", "real/gitconfig"}, nil},
		{"programs named in config", func(t *testing.T, code, _ string) {
			gitConfig(t, code, "core.sshCommand", "./tools/ssh.sh -v")
			gitConfig(t, code, "credential.https://example.com.helper", "!f() { ./bin/cred \"$@\"; }; f")
			gitConfig(t, code, "alias.x", "!sh scripts/x.sh")
			gitConfig(t, code, "alias.lg", "log --format=a/b")
			gitConfig(t, code, "diff.pdf.textconv", "tools/pdf2txt")
			gitConfig(t, code, "filter.fmt.clean", "fmt --config=etc/fmt.conf")
			gitConfig(t, code, "merge.ours.driver", code+"/tools/merge %O %A %B")
			gitConfig(t, code, "gpg.ssh.program", "~/bin/sign")
			gitConfig(t, code, "pager.log", "tools/pager")
			gitConfig(t, code, "init.templateDir", "tmpl")
			gitConfig(t, code, "core.pager", "less")
			gitConfig(t, code, "core.editor", "/usr/bin/vi")
			gitConfig(t, code, "remote.origin.url", "https://example.com/a/b")
		}, []string{"tools/ssh.sh", "bin/cred", "scripts/x.sh", "tools/pdf2txt", "etc/fmt.conf", "tools/merge", "tools/pager", "tmpl"},
			[]string{"a/b", "less", "example.com/a/b"}},
		{"the global config, when the code dir is the home directory", func(t *testing.T, code, _ string) {
			t.Setenv("HOME", code)
			t.Setenv("XDG_CONFIG_HOME", "")
		}, []string{".gitconfig", ".config/git/config"}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			code := hooksRepo(t)
			home := os.Getenv("HOME")
			c.setup(t, code, home)
			hooks, _, _, err := readHooks(context.Background(), []string{code})
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range c.want {
				if !slices.Contains(hooks[0], w) {
					t.Errorf("%s not protected: %q", w, hooks[0])
				}
			}
			for _, w := range c.notWant {
				if slices.Contains(hooks[0], w) {
					t.Errorf("%s protected: %q", w, hooks[0])
				}
			}
		})
	}
}

// TestGitConfigFingerprintFollowsIncludes: an included file is in the
// fingerprint, so a user's edit that adds a further include (or creates the
// included file) is seen at the next round trip, and the new target is
// protected.
func TestGitConfigFingerprintFollowsIncludes(t *testing.T) {
	code := hooksRepo(t)
	gitConfig(t, code, "include.path", "../.gitconfig")
	hooks, gitDirs, files, err := readHooks(context.Background(), []string{code})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(files, filepath.Join(code, ".gitconfig")) || slices.Contains(hooks[0], "extra.gitconfig") {
		t.Fatalf("files %q, hooks %q", files, hooks[0])
	}
	before := hooksFingerprint([]string{code}, gitDirs, files)
	writeFile(t, filepath.Join(code, ".gitconfig"), "[include]\n\tpath = extra.gitconfig\n")
	if hooksFingerprint([]string{code}, gitDirs, files) == before {
		t.Fatal("the fingerprint did not change when the included file appeared")
	}
	hooks, _, _, err = readHooks(context.Background(), []string{code})
	if err != nil || !slices.Contains(hooks[0], "extra.gitconfig") {
		t.Fatalf("the new include is not protected: %q %v", hooks[0], err)
	}
}

func TestCommandPaths(t *testing.T) {
	for _, c := range []struct {
		value string
		want  []string
	}{
		{"ssh", nil},
		{"./tools/ssh.sh", []string{"/top/tools/ssh.sh"}},
		{`sh -c "echo x >/tmp/y; tools/a"`, []string{"/tmp/y", "/top/tools/a"}},
		{"!f() { ../up/x; }; f", []string{"/up/x"}},
		{"run --cfg=etc/c.toml", []string{"/top/etc/c.toml"}},
		{`'/abs/prog' arg`, []string{"/abs/prog"}},
	} {
		if got := commandPaths(c.value, "/top"); !slices.Equal(got, c.want) {
			t.Errorf("commandPaths(%q) = %q, want %q", c.value, got, c.want)
		}
	}
}

// FuzzCommandPaths: a path written into a command line in any of the ways a
// shell accepts it as one word (bare, quoted, after --opt=, after a
// redirection or an operator) is found, whatever surrounds it. The oracle
// is the construction: the fuzzer picks the path and its surroundings, and
// the expected absolute path is computed without the function under test.
func FuzzCommandPaths(f *testing.F) {
	f.Add("tools/ssh.sh", "sh -c", "-v", uint8(0))
	f.Add("a/b", "", "", uint8(3))
	f.Add("../x/y", "!f() {", "; }; f", uint8(5))
	f.Fuzz(func(t *testing.T, p, before, after string, how uint8) {
		// A path word: components of ordinary file-name characters.
		if !strings.Contains(p, "/") || strings.ContainsAny(p, " \t\n\r\v\f\"'`;|&()<>=${}\\,~") || strings.HasPrefix(p, "file:") {
			return
		}
		if strings.ContainsAny(before+after, "\"'") {
			return // quotes around the surroundings could swallow the word's own
		}
		var word string
		switch how % 6 {
		case 0:
			word = p
		case 1:
			word = `"` + p + `"`
		case 2:
			word = "'" + p + "'"
		case 3:
			word = "--opt=" + p
		case 4:
			word = ">" + p
		case 5:
			word = "&&" + p + ";"
		}
		value := before + " " + word + " " + after
		want := filepath.Join("/top", p)
		if filepath.IsAbs(p) {
			want = filepath.Clean(p)
		}
		if got := commandPaths(value, "/top"); !slices.Contains(got, want) {
			t.Fatalf("commandPaths(%q) = %q, missing %q", value, got, want)
		}
	})
}
