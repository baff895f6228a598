package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The red team's attacks on issue 10's fixes (findings 1, 3, 4 and 7), each
// run from a real sandboxed command through the real sbx binary.

// hostGit runs the host's git in dir with the user's environment and hooks
// on, as a shell prompt would; it returns the output and the error.
func (w *world) hostGit(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(append([]string{}, w.env...), "GIT_CEILING_DIRECTORIES=")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestPlantedBareRepository: a directory the sandbox shapes as a git
// repository (HEAD, objects, refs, config), under any name, never becomes
// one on the host: its HEAD and config wait in quarantine, and the host's
// git status there runs nothing. A bare repository the host already has
// (a test fixture) keeps its config: the sandbox's edit waits too.
func TestPlantedBareRepository(t *testing.T) {
	w := gitWorld(t)
	fixture := filepath.Join(w.code, "testdata/fixture.git")
	if out, err := exec.Command("git", "init", "-q", "--bare", fixture).CombinedOutput(); err != nil {
		t.Fatalf("git init --bare: %v %s", err, out)
	}
	markers := map[string]string{}
	var script []string
	for _, d := range []string{"evil", "x.git", "deep/er/repo"} {
		m := filepath.Join(w.home, "pwned-"+strings.ReplaceAll(d, "/", "-"))
		markers[d] = m
		script = append(script, "mkdir -p "+d+"/objects "+d+"/refs/heads && echo 'ref: refs/heads/main' > "+d+"/HEAD && printf '[core]\\n\\trepositoryformatversion = 0\\n\\tbare = false\\n\\tworktree = .\\n\\tfsmonitor = \"echo PWNED >"+m+"; false\"\\n' > "+d+"/config")
	}
	fm := filepath.Join(w.home, "pwned-fixture")
	script = append(script, "printf '[core]\\n\\tbare = true\\n\\tfsmonitor = \"echo PWNED >"+fm+"; false\"\\n' > testdata/fixture.git/config",
		"mkdir -p testdata/fixture.git/hooks && printf '#!/bin/sh\\ntouch "+fm+"\\n' > testdata/fixture.git/hooks/post-update",
		"mkdir -p cd && echo 'ref: refs/heads/main' > cd/HEAD && echo "+filepath.Join(w.code, "evil")+" > cd/commondir",
		"echo fine > notes.txt")
	r := w.sbx(t, w.code, "exec", "--", strings.Join(script, " && "))
	if r.code != 0 {
		t.Fatalf("exec: %d %q", r.code, r.stderr)
	}
	if got, _ := os.ReadFile(filepath.Join(w.code, "notes.txt")); string(got) != "fine\n" {
		t.Fatalf("an ordinary file did not come back: %q", got)
	}
	for d, m := range markers {
		for _, f := range []string{"HEAD", "config"} {
			absent(t, filepath.Join(w.code, d, f), "the planted repository's "+f)
			if !strings.Contains(r.stderr, "quarantined: "+filepath.Join(w.code, d, f)) {
				t.Errorf("%s/%s: quarantine not reported: %q", d, f, r.stderr)
			}
		}
		w.hostGit(filepath.Join(w.code, d), "status")
		absent(t, m, "git status in "+d+" ran the planted fsmonitor")
	}
	absent(t, filepath.Join(w.code, "cd/HEAD"), "a HEAD with a commondir")
	absent(t, filepath.Join(w.code, "cd/commondir"), "a commondir")
	cfg, _ := os.ReadFile(filepath.Join(fixture, "config"))
	if bytes.Contains(cfg, []byte("PWNED")) {
		t.Fatalf("the fixture's config was changed: %s", cfg)
	}
	absent(t, filepath.Join(fixture, "hooks/post-update"), "a hook in the fixture")
	w.hostGit(fixture, "status")
	absent(t, fm, "git in the fixture ran the planted fsmonitor")
	acc := w.sbx(t, w.code, "accept")
	for _, f := range []string{"evil/HEAD", "evil/config", "x.git/config", "testdata/fixture.git/config", "testdata/fixture.git/hooks/post-update", "cd/commondir"} {
		if !strings.Contains(acc.stdout, filepath.Join(w.code, f)) {
			t.Errorf("sbx accept does not list %s: %q %q", f, acc.stdout, acc.stderr)
		}
	}
}

// TestPlantedNamesOfTheRedTeam: the names finding 3 listed wait in
// quarantine, and .git spelled with a dotless i is refused.
func TestPlantedNamesOfTheRedTeam(t *testing.T) {
	w := newWorld(t)
	quarantined := []string{".devcontainer.json", "lefthook-local.yaml", "lefthook-local.json", ".lefthook-local.yaml",
		".lefthook.toml", "lefthook.jsonc", ".lefthook-local/pre-commit/x.sh", ".vimrc", ".gvimrc", ".qwen/settings.json",
		".crush.json", ".aider.conf.yml", "sub/.conﬁg/mise/config.toml"}
	refused := []string{".gıt/hooks/pre-commit", ".GıT/config", "sub/.gıt/config"}
	plantAll(t, w, quarantined, refused)
}

// TestGitHistoryNotDestroyed: the sandbox overwrites every pack file with
// garbage: the host's packs never change (refused, reported), git log still
// works on the host. Churn that overflows the journal does not push out the
// host's own version of a file the same session overwrote: sbx undo PATH
// brings it back. A pull-back that replaces every pack with a new one waits.
func TestGitHistoryNotDestroyed(t *testing.T) {
	w := gitWorld(t)
	w.put(t, "notes.txt", "mine\n")
	w.git(t, "add", "notes.txt")
	w.git(t, "commit", "-q", "-m", "notes")
	w.git(t, "gc", "-q")
	packs, _ := filepath.Glob(filepath.Join(w.code, ".git/objects/pack/*"))
	if len(packs) == 0 {
		t.Fatal("git gc made no pack")
	}
	before := map[string][]byte{}
	for _, p := range packs {
		before[p], _ = os.ReadFile(p)
	}
	env := []string{"SBX_JOURNAL_SIZE=20KiB"}
	r := w.sbxEnv(t, w.code, env, "exec", "--keep", "--session", "k", "--", "for f in .git/objects/pack/*; do chmod u+w $f; echo garbage > $f; done; echo gone > notes.txt")
	if r.code != 0 {
		t.Fatalf("exec: %d %q", r.code, r.stderr)
	}
	for p, b := range before {
		if got, _ := os.ReadFile(p); !bytes.Equal(got, b) {
			t.Fatalf("%s was rewritten on the host", p)
		}
		if !strings.Contains(r.stderr, "not brought back: "+p) {
			t.Errorf("the refused rewrite of %s is not reported: %q", p, r.stderr)
		}
	}
	if out, err := w.hostGit(w.code, "log", "--oneline"); err != nil || !strings.Contains(out, "notes") {
		t.Fatalf("host git log after the attack: %v %s", err, out)
	}
	if w.get("notes.txt") != "gone\n" {
		t.Fatalf("notes.txt did not come back: %q", w.get("notes.txt"))
	}
	for i := 0; i < 4; i++ {
		if r := w.sbxEnv(t, w.code, env, "exec", "--keep", "--session", "k", "--", "head -c 15000 /dev/urandom > big"); r.code != 0 {
			t.Fatalf("churn %d: %d %q", i, r.code, r.stderr)
		}
	}
	if r := w.sbxEnv(t, w.code, env, "undo", "--session", "k", filepath.Join(w.code, "notes.txt")); r.code != 0 || w.get("notes.txt") != "mine\n" {
		t.Fatalf("undo notes.txt after churn: %d %q %q, now %q", r.code, r.stdout, r.stderr, w.get("notes.txt"))
	}
	// Every pack replaced by one of the sandbox's: the deletions wait.
	r = w.sbxEnv(t, w.code, env, "exec", "--keep", "--session", "k", "--", "rm -f .git/objects/pack/*; echo garbage > .git/objects/pack/pack-0000000000000000000000000000000000000000.pack")
	if !strings.Contains(r.stderr, "sbx: held:") {
		t.Fatalf("replacing every pack was not held: %d %q", r.code, r.stderr)
	}
	for p := range before {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("%s was deleted: %v", p, err)
		}
	}
}

// TestPathTooLongDoesNotWedge: a directory nested past PATH_MAX in the
// sandbox is left out and reported once; everything else still comes back,
// and later commands work.
func TestPathTooLongDoesNotWedge(t *testing.T) {
	w := newWorld(t)
	n := strings.Repeat("n", 200)
	r := w.sbx(t, w.code, "exec", "--keep", "--session", "k", "--", "echo keepme > important.txt; mkdir deep2 && cd deep2 && for i in $(seq 30); do mkdir "+n+"; cd -P "+n+"; done; echo deep > f")
	if r.code != 0 {
		t.Fatalf("exec: %d %q", r.code, r.stderr)
	}
	if w.get("important.txt") != "keepme\n" {
		t.Fatalf("important.txt did not come back: %q", w.get("important.txt"))
	}
	if strings.Count(r.stderr, "path too long") != 1 {
		t.Fatalf("the long path is not reported once: %q", r.stderr)
	}
	r = w.sbx(t, w.code, "exec", "--keep", "--session", "k", "--", "echo two > second.txt")
	if r.code != 0 || w.get("second.txt") != "two\n" {
		t.Fatalf("the next command: %d %q, second.txt %q", r.code, r.stderr, w.get("second.txt"))
	}
	if strings.Contains(r.stderr, "path too long") {
		t.Fatalf("reported again: %q", r.stderr)
	}
}
