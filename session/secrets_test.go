package session

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sbx-sh/sbx/local"
)

func TestSecretsStayOnTheHost(t *testing.T) {
	home := tempDir(t)
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, ".config"))
	t.Setenv("GITHUB_TOKEN", "ghp_FAKE_GITHUB_TOKEN")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "FAKE_AWS_SECRET")
	t.Setenv("NPM_TOKEN", "npm_FORWARDED")
	t.Setenv("NPM_SKIPPED", "npm_SKIPPED")
	write(t, filepath.Join(home, ".gitconfig"), `[user]
	name = Host User
	email = host@example.com
[credential]
	helper = store --file /root/.git-credentials-FAKE
[url "https://x-access-token:ghp_URL_TOKEN@github.com/"]
	insteadOf = https://github.com/
[alias]
	co = !sh -c 'curl evil'
[core]
	sshCommand = ssh -i /root/.ssh/FAKE_KEY
`, 0o644)
	f := newFixture(t)
	for _, args := range [][]string{{"init", "-q", "-b", "main"},
		{"remote", "add", "origin", "https://someone:PASSWORD_IN_URL@example.com/r.git"},
		{"remote", "add", "fork", "git@github.com:me/r.git"},
		{"config", "core.hooksPath", ".husky"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = f.code
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	params := Params{CodeDirs: []string{f.code}, Keep: true, IdleTTL: time.Hour, ForwardEnv: []string{"NPM_*"}, EnvSkip: []string{"NPM_SKIPPED"}}
	s, err := NewManager(f.root, &local.Provider{Version: "test"}, nil).Open(context.Background(), "secrets", params)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release(context.Background())
	out, o := sh(t, s, "env; cat ~/.gitconfig .git/config; git config --list --show-origin")
	if o.ExitCode != 0 {
		t.Fatalf("exit %d:\n%s", o.ExitCode, out)
	}
	for _, secret := range []string{"ghp_FAKE_GITHUB_TOKEN", "FAKE_AWS_SECRET", "npm_SKIPPED", "git-credentials-FAKE", "ghp_URL_TOKEN", "curl evil", "FAKE_KEY", "PASSWORD_IN_URL", "hookspath", ".husky"} {
		if strings.Contains(out, secret) {
			t.Errorf("%q reached the sandbox:\n%s", secret, out)
		}
	}
	for _, want := range []string{"NPM_TOKEN=npm_FORWARDED", "Host User", "git@github.com:me/r.git"} {
		if !strings.Contains(out, want) {
			t.Errorf("%q missing in the sandbox:\n%s", want, out)
		}
	}
	// Dropped from the host: unset in the sandbox on the next command.
	os.Unsetenv("NPM_TOKEN")
	if out, _ := sh(t, s, "echo \"[${NPM_TOKEN-unset}]\""); strings.TrimSpace(out) != "[unset]" {
		t.Fatalf("a dropped variable is still set: %q", out)
	}
	// The host's .git/config never comes back, whatever the sandbox does.
	sh(t, s, "git config core.sshCommand 'touch /tmp/pwned'")
	if b, _ := os.ReadFile(filepath.Join(f.code, ".git", "config")); strings.Contains(string(b), "pwned") {
		t.Fatal("the sandbox's .git/config reached the host")
	}
	// A host change to .git/config reaches the sandbox, filtered.
	cmd := exec.Command("git", "remote", "add", "upstream", "https://example.com/up.git")
	cmd.Dir = f.code
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatal(err, string(out))
	}
	if out, _ := sh(t, s, "git remote"); !strings.Contains(out, "upstream") {
		t.Fatalf("host remote not seen in the sandbox: %q", out)
	}
	// A later process reusing the kept sandbox writes the sandbox's config
	// anew (what the sandbox did to it is undone), from the render cache:
	// with no git on the host's PATH, the same content still arrives.
	sh(t, s, "git config core.hooksPath /tmp/planted; git config user.name Planted")
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", "/nonexistent")
	s2, err := NewManager(f.root, &local.Provider{Version: "test"}, nil).Open(context.Background(), "secrets", params)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Release(context.Background())
	out, o = sh(t, s2, "PATH=/usr/bin:/bin; git config --list --show-origin")
	if o.ExitCode != 0 || strings.Contains(out, "planted") || strings.Contains(out, "Planted") ||
		!strings.Contains(out, "Host User") || !strings.Contains(out, "upstream") {
		t.Fatalf("a reused sandbox's git config was not written anew (exit %d):\n%s", o.ExitCode, out)
	}
}

func TestSyncPathsAreReadOnlyCopies(t *testing.T) {
	f := newFixture(t)
	cfgDir := tempDir(t)
	npmrc := filepath.Join(cfgDir, "npmrc")
	write(t, npmrc, "registry=https://npm.example.com/\n", 0o600)
	os.MkdirAll(filepath.Join(cfgDir, "tool"), 0o755)
	write(t, filepath.Join(cfgDir, "tool", "conf"), "x=1\n", 0o644)
	params := Params{CodeDirs: []string{f.code}, SyncPaths: []string{npmrc, filepath.Join(cfgDir, "tool")}}
	s, err := NewManager(f.root, &local.Provider{Version: "test"}, nil).Open(context.Background(), "paths", params)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release(context.Background())
	out, _ := sh(t, s, "cat "+npmrc+" "+cfgDir+"/tool/conf; echo changed > "+npmrc+" && echo WROTE")
	if !strings.Contains(out, "registry=https://npm.example.com/") || !strings.Contains(out, "x=1") {
		t.Fatalf("sync paths not in the sandbox:\n%s", out)
	}
	if strings.Contains(out, "WROTE") {
		t.Fatalf("a sync path is writable in the sandbox:\n%s", out)
	}
	if b, _ := os.ReadFile(npmrc); string(b) != "registry=https://npm.example.com/\n" {
		t.Fatalf("host sync path changed: %q", b)
	}
}
