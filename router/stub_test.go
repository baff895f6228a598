package router

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

type stubRun struct {
	code           int
	stdout, stderr string
}

// runSh runs script with sh in dir with the given PATH.
func runSh(t *testing.T, dir, path, script string) stubRun {
	t.Helper()
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Fatal("the stub tests need sh (apt-get install dash)")
	}
	cmd := exec.Command(sh, "-c", script)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + path, "HOME=" + dir, "GIT_CONFIG_NOSYSTEM=1", "LC_ALL=C"}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	var ee *exec.ExitError
	code := 0
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return stubRun{code, out.String(), errb.String()}
}

func writeStubs(t *testing.T, dir string, prefixes [][]string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, script := range StubScripts(prefixes) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

func TestStubScriptsGit(t *testing.T) {
	gitPath, err := exec.LookPath("git")
	if err != nil {
		t.Fatal("the stub tests need git (apt-get install git)")
	}
	stubs := StubScripts(defaultPrefixes(t))
	if len(stubs) != 1 || stubs["git"] == "" {
		t.Fatalf("StubScripts(default) has keys %v; want only git", keys(stubs))
	}
	root := t.TempDir()
	stubDir := filepath.Join(root, "stubs")
	writeStubs(t, stubDir, defaultPrefixes(t))
	if err := os.Symlink(stubDir, filepath.Join(root, "stublink")); err != nil {
		t.Fatal(err)
	}
	repo := filepath.Join(root, "repo")
	if out, err := exec.Command(gitPath, "init", "-q", repo).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
	realDir := filepath.Dir(gitPath)
	// The stub directory first, then (for the loop checks) again and through
	// a symlink, then the real git.
	path := strings.Join([]string{stubDir, filepath.Join(root, "stublink"), stubDir, realDir, "/usr/bin", "/bin"}, ":")

	for _, tc := range []struct {
		script, prefix, example string
	}{
		{"git push origin main", "git push", "git push origin main"},
		{"git push", "git push", "git push"},
		{"git fetch --all", "git fetch", "git fetch --all"},
		{"git pull --rebase", "git pull", "git pull --rebase"},
		{"git clone https://example.com/x.git", "git clone", "git clone https://example.com/x.git"},
		{"git ls-remote origin", "git ls-remote", "git ls-remote origin"},
		{"git remote add up https://example.com/x.git", "git remote add", "git remote add up https://example.com/x.git"},
		{"git remote set-url origin x", "git remote set-url", "git remote set-url origin x"},
		{"git -C . push", "git push", "git -C . push"},
		{"git -c a.b=c --no-pager push", "git push", "git -c a.b=c --no-pager push"},
		{"stublink/git push", "git push", "git push"},
	} {
		script := tc.script
		if strings.HasPrefix(script, "stublink/") {
			script = filepath.Join(root, script)
		}
		r := runSh(t, repo, path, script)
		wantLine := `sbx: "` + tc.prefix + `" needs your credentials, so it runs on the host: run it on its own as a separate bash tool call (e.g. "` + tc.example + `"), not inside a pipeline or script.` + "\n"
		if r.code != StubExitCode || r.stderr != wantLine || r.stdout != "" {
			t.Errorf("sh -c %q: exit %d stdout %q stderr %q; want exit %d and stderr %q", tc.script, r.code, r.stdout, r.stderr, StubExitCode, wantLine)
		}
	}

	for _, tc := range []struct{ script, want string }{
		{"git status", "No commits yet"},
		{"git --version", "git version"},
		{"git remote -v && echo ok", "ok"},
		{"git commit --allow-empty -q -m x -c user.name=x 2>/dev/null; git rev-parse --is-inside-work-tree", "true"},
	} {
		r := runSh(t, repo, path, tc.script)
		if r.code != 0 || !strings.Contains(r.stdout, tc.want) {
			t.Errorf("sh -c %q: exit %d stdout %q stderr %q; want real git output containing %q", tc.script, r.code, r.stdout, r.stderr, tc.want)
		}
	}
}

func TestStubScriptsOtherPrograms(t *testing.T) {
	root := t.TempDir()
	stubDir := filepath.Join(root, "stubs")
	prefixes, err := ParsePrefixes([]string{"gh pr create", "make release"})
	if err != nil {
		t.Fatal(err)
	}
	writeStubs(t, stubDir, prefixes)
	realDir := filepath.Join(root, "real")
	if err := os.MkdirAll(realDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(realDir, "gh"), []byte("#!/bin/sh\necho \"real gh $*\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	path := stubDir + ":" + realDir + ":/usr/bin:/bin"

	if r := runSh(t, root, path, "gh pr create --title x"); r.code != StubExitCode || !strings.Contains(r.stderr, `"gh pr create" needs your credentials`) {
		t.Errorf("gh pr create: %+v", r)
	}
	if r := runSh(t, root, path, "gh pr list"); r.code != 0 || r.stdout != "real gh pr list\n" {
		t.Errorf("gh pr list: %+v", r)
	}
	if r := runSh(t, root, path, "gh pr"); r.code != 0 || r.stdout != "real gh pr\n" {
		t.Errorf("gh pr: %+v", r)
	}
	// No real make here: the stub says so rather than calling itself.
	if r := runSh(t, root, stubDir+":"+realDir, "make test"); r.code != 127 || !strings.Contains(r.stderr, "make: command not found") {
		t.Errorf("make test without a real make: %+v", r)
	}
	if r := runSh(t, root, stubDir+":"+realDir, "make release"); r.code != StubExitCode {
		t.Errorf("make release: %+v", r)
	}
}

func TestStubLoopTerminates(t *testing.T) {
	root := t.TempDir()
	a, b := filepath.Join(root, "a"), filepath.Join(root, "b")
	writeStubs(t, a, defaultPrefixes(t))
	writeStubs(t, b, defaultPrefixes(t))
	// Two stub directories and no real git: each stub finds the other.
	r := runSh(t, root, a+":"+b, "git status")
	if r.code != 126 || !strings.Contains(r.stderr, "stub loop") {
		t.Errorf("git status with two stub dirs and no git: %+v", r)
	}
}

func TestStubScriptsSkipInvalid(t *testing.T) {
	got := StubScripts([][]string{{"git", "push"}, {"/bin/evil", "x"}, {"a'b"}, {}, {"sh"}})
	if len(got) != 1 || got["git"] == "" {
		t.Fatalf("StubScripts kept %v", keys(got))
	}
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
