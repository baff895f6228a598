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
