package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sbx-sh/sbx/internal/gittest"
)

// Red-team finding 2 of issue 10: git config the host's git reads from inside
// the tree (include.path and includeIf targets) and programs the config names
// there (core.sshCommand=./tools/ssh.sh) are what the host runs: a sandbox
// change to them waits in quarantine, and neither the user's own git nor the
// git sbx routes to the host runs a planted program.

// plantedGitConfig is a config that runs marker-writing programs at a host
// git status (fsmonitor) and at a push (the URL rewritten to ssh, so the
// planted sshCommand runs instead of ssh; nothing reaches the network).
func plantedGitConfig(httpURL, dir string) string {
	return "[core]\n\tfsmonitor = \"touch " + filepath.Join(dir, "pwned-fsmonitor") + "; false\"\n" +
		"\tsshCommand = \"touch " + filepath.Join(dir, "pwned-ssh") + "; false\"\n" +
		"[url \"ssh://git@127.0.0.1/\"]\n\tinsteadOf = " + httpURL + "\n"
}

// shQuote quotes s for the sandbox's shell.
func shQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// TestPlantedIncludedGitConfig is the red team's reproduction: with the
// host's include.path=../.gitconfig, the .gitconfig the sandbox writes is
// quarantined; the user's git status and the routed git push run nothing of
// it, and the push reaches the real (HTTP) remote.
func TestPlantedIncludedGitConfig(t *testing.T) {
	w := gitWorld(t)
	url, bare := gittest.HTTPRemote(t, tempDir(t), w.home)
	w.git(t, "remote", "add", "origin", url)
	w.git(t, "config", "include.path", "../.gitconfig")
	r := w.sbx(t, w.code, "exec", "--", "printf %s "+shQuote(plantedGitConfig(url, w.home))+" > .gitconfig")
	if r.code != 0 {
		t.Fatalf("exec: %d %q", r.code, r.stderr)
	}
	absent(t, filepath.Join(w.code, ".gitconfig"), "the planted included config")
	if !strings.Contains(r.stderr, "quarantined: "+filepath.Join(w.code, ".gitconfig")) {
		t.Fatalf("quarantine not reported: %q", r.stderr)
	}
	w.git(t, "status")
	absent(t, filepath.Join(w.home, "pwned-fsmonitor"), "the planted fsmonitor ran at the user's git status")
	r = w.sbx(t, w.code, "exec", "--", "git push origin HEAD:main")
	absent(t, filepath.Join(w.home, "pwned-ssh"), "the planted sshCommand ran at the routed git push")
	if r.code != 0 {
		t.Fatalf("routed git push: %d %q", r.code, r.stderr)
	}
	head := strings.TrimSpace(w.git(t, "rev-parse", "HEAD"))
	out, err := exec.Command("git", "-C", bare, "rev-parse", "main").Output()
	if err != nil || strings.TrimSpace(string(out)) != head {
		t.Fatalf("the push did not reach the HTTP remote: %q %v", out, err)
	}
}

// TestPlantedIncludeIfGitConfig: includeIf targets are protected whatever
// their condition (one that holds now, and one that may hold later: a branch
// the sandbox could check out), and so is a file included from an included
// file, followed recursively.
func TestPlantedIncludeIfGitConfig(t *testing.T) {
	w := gitWorld(t)
	url, _ := gittest.HTTPRemote(t, tempDir(t), w.home)
	w.git(t, "remote", "add", "origin", url)
	w.git(t, "config", "includeIf.gitdir:"+w.code+"/.git.path", w.code+"/conf/here.gitconfig")
	w.git(t, "config", "includeIf.onbranch:release.path", "../conf/release.gitconfig")
	os.MkdirAll(filepath.Join(w.code, "conf"), 0o755)
	os.WriteFile(filepath.Join(w.code, "conf/here.gitconfig"), []byte("[include]\n\tpath = nested.gitconfig\n"), 0o644)
	planted := shQuote(plantedGitConfig(url, w.home))
	r := w.sbx(t, w.code, "exec", "--", "printf %s "+planted+" > conf/release.gitconfig && printf %s "+planted+" > conf/nested.gitconfig")
	if r.code != 0 {
		t.Fatalf("exec: %d %q", r.code, r.stderr)
	}
	for _, f := range []string{"conf/release.gitconfig", "conf/nested.gitconfig"} {
		absent(t, filepath.Join(w.code, f), "the planted config "+f)
		if !strings.Contains(r.stderr, "quarantined: "+filepath.Join(w.code, f)) {
			t.Fatalf("quarantine of %s not reported: %q", f, r.stderr)
		}
	}
	w.git(t, "status")
	absent(t, filepath.Join(w.home, "pwned-fsmonitor"), "the planted fsmonitor ran at the user's git status")
	r = w.sbx(t, w.code, "exec", "--", "git push origin HEAD:main")
	absent(t, filepath.Join(w.home, "pwned-ssh"), "the planted sshCommand ran at the routed git push")
	if r.code != 0 {
		t.Fatalf("routed git push: %d %q", r.code, r.stderr)
	}
}

// TestPlantedProgramNamedInGitConfig: with core.sshCommand=./tools/ssh.sh
// (the user's own script), the sandbox's rewrite of tools/ssh.sh waits in
// quarantine; the routed git push runs the user's script, not the
// sandbox's. The same holds for a program inside a shell command line
// (a credential helper "!sh ci/cred.sh") and a filter driver.
func TestPlantedProgramNamedInGitConfig(t *testing.T) {
	w := gitWorld(t)
	w.git(t, "remote", "add", "origin", "ssh://git@127.0.0.1/repo.git")
	w.git(t, "config", "core.sshCommand", "./tools/ssh.sh")
	w.git(t, "config", "credential.helper", "!sh ci/cred.sh")
	w.git(t, "config", "filter.fmt.smudge", "tools/fmt --smudge")
	legit := filepath.Join(w.home, "legit-ssh")
	os.MkdirAll(filepath.Join(w.code, "tools"), 0o755)
	os.WriteFile(filepath.Join(w.code, "tools/ssh.sh"), []byte("#!/bin/sh\ntouch "+legit+"\nexit 1\n"), 0o755)
	marker := filepath.Join(w.home, "pwned-ssh")
	script := "#!/bin/sh\ntouch " + marker + "\nexit 1\n"
	r := w.sbx(t, w.code, "exec", "--", "printf %s "+shQuote(script)+" > tools/ssh.sh && mkdir -p ci && printf %s "+shQuote(script)+" > ci/cred.sh && printf %s "+shQuote(script)+" > tools/fmt && chmod +x tools/fmt")
	if r.code != 0 {
		t.Fatalf("exec: %d %q", r.code, r.stderr)
	}
	for _, f := range []string{"tools/ssh.sh", "ci/cred.sh", "tools/fmt"} {
		if !strings.Contains(r.stderr, "quarantined: "+filepath.Join(w.code, f)) {
			t.Fatalf("quarantine of %s not reported: %q", f, r.stderr)
		}
	}
	absent(t, filepath.Join(w.code, "ci/cred.sh"), "the planted credential helper")
	absent(t, filepath.Join(w.code, "tools/fmt"), "the planted filter")
	if b, _ := os.ReadFile(filepath.Join(w.code, "tools/ssh.sh")); strings.Contains(string(b), marker) {
		t.Fatalf("the sandbox's tools/ssh.sh landed on the host: %q", b)
	}
	r = w.sbx(t, w.code, "exec", "--", "git push origin HEAD:main")
	absent(t, marker, "the planted ssh script ran at the routed git push")
	if r.code == 0 {
		t.Fatalf("routed git push succeeded with the user's failing ssh script: %q", r.stderr)
	}
	if _, err := os.Stat(legit); err != nil {
		t.Fatalf("the routed git push did not run the user's tools/ssh.sh (%v): %q", err, r.stderr)
	}
}
