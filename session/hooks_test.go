package session

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
)

// hooksRepo makes a git repository in a fresh directory, with a HOME of its
// own so the user's config does not leak in.
func hooksRepo(t testing.TB) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("git is needed on PATH for the hooks tests (apt-get install git)")
	}
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", filepath.Join(dir, "home"))
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(dir, "home", ".config"))
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	code := filepath.Join(dir, "code")
	os.MkdirAll(code, 0o755)
	if out, err := exec.Command("git", "init", "-q", code).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
	return code
}

func setHooksPath(t testing.TB, code, v string) {
	t.Helper()
	if out, err := exec.Command("git", "-C", code, "config", "core.hooksPath", v).CombinedOutput(); err != nil {
		t.Fatalf("git config: %v %s", err, out)
	}
}

func TestReadHooks(t *testing.T) {
	for _, c := range []struct {
		name  string
		value string // core.hooksPath; "" leaves it unset
		setup func(code string)
		want  []string
	}{
		{"unset: .git/hooks, refused anyway", "", nil, nil},
		{"relative", ".githooks", nil, []string{".githooks"}},
		{"relative deeper", "ci/git-hooks", nil, []string{"ci/git-hooks"}},
		{"absolute inside", "@CODE@/tools/hooks", nil, []string{"tools/hooks"}},
		{"absolute outside", "/usr/share/hooks", nil, nil},
		{"the code dir itself", ".", nil, []string{"."}},
		{"through a symlink in the tree", "hooks", func(code string) {
			os.MkdirAll(filepath.Join(code, "scripts/hooks"), 0o755)
			os.Symlink("scripts/hooks", filepath.Join(code, "hooks"))
		}, []string{"scripts/hooks", "hooks"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			code := hooksRepo(t)
			if c.value != "" {
				v := c.value
				if v == "@CODE@/tools/hooks" {
					v = filepath.Join(code, "tools/hooks")
				}
				setHooksPath(t, code, v)
			}
			if c.setup != nil {
				c.setup(code)
			}
			hooks, _, _, err := readHooks(context.Background(), []string{code})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(hooks[0], c.want) {
				t.Fatalf("hooks = %q, want %q", hooks[0], c.want)
			}
		})
	}
}

func TestReadHooksNotARepository(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("GIT_CEILING_DIRECTORIES", filepath.Dir(dir))
	hooks, _, _, err := readHooks(context.Background(), []string{dir})
	if err != nil || len(hooks) != 1 || hooks[0] != nil {
		t.Fatalf("a plain directory: %q, %v", hooks, err)
	}
}

// TestHooksFingerprintSeesConfigChange: the cheap check notices a changed
// repository config, so a core.hooksPath set during a session counts.
func TestHooksFingerprintSeesConfigChange(t *testing.T) {
	code := hooksRepo(t)
	_, gitDirs, _, err := readHooks(context.Background(), []string{code})
	if err != nil {
		t.Fatal(err)
	}
	before := hooksFingerprint([]string{code}, gitDirs, nil)
	setHooksPath(t, code, ".githooks-with-a-longer-name")
	if after := hooksFingerprint([]string{code}, gitDirs, nil); after == before {
		t.Fatal("the fingerprint did not change with .git/config")
	}
}

// BenchmarkHooksCheck is the per-round-trip cost of the hooks check when
// nothing changed (a fingerprint of stats), beside a read by git, its cost
// when a config file changed.
func BenchmarkHooksCheck(b *testing.B) {
	code := hooksRepo(b)
	setHooksPath(b, code, ".githooks")
	_, gitDirs, _, err := readHooks(context.Background(), []string{code})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("unchanged", func(b *testing.B) {
		for b.Loop() {
			hooksFingerprint([]string{code}, gitDirs, nil)
		}
	})
	b.Run("read by git", func(b *testing.B) {
		for b.Loop() {
			readHooks(context.Background(), []string{code})
		}
	})
}
