package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sbx-sh/sbx/internal/testenv"
)

// TestReclaimRemovesReadOnlyLeftovers: as an ordinary user, a directory the
// sandbox made read-only in its workspace (here in an excluded one, which
// never comes back to the host) is gone with the sandbox: when the sandbox
// is lost and the next command claims a new one, the new workspace holds
// the host tree only. os.RemoveAll could not remove it (its entries can
// not be unlinked without write permission), and the new sandbox found
// the old one's files.
func TestReclaimRemovesReadOnlyLeftovers(t *testing.T) {
	w := newWorld(t)
	sbxAs := ordinaryUser(t, w)
	if r := sbxAs(t, w.code, nil, "exec", "--keep", "--session", "lo", "--", "mkdir -p __pycache__/old && echo old > __pycache__/old/f && chmod -R a-w __pycache__/old"); r.code != 0 {
		t.Fatalf("exec: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	raw, err := os.ReadFile(filepath.Join(w.state, "sbx", "sessions", "lo", "local.json"))
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		Pid int `json:"pid"`
	}
	if err := json.Unmarshal(raw, &st); err != nil || st.Pid <= 1 {
		t.Fatalf("local.json: %s %v", raw, err)
	}
	syscall.Kill(st.Pid, syscall.SIGKILL)
	if !testenv.WaitFor(20*time.Second, func() bool { return syscall.Kill(st.Pid, 0) != nil }) {
		t.Fatalf("the init (pid %d) did not end", st.Pid)
	}
	r := sbxAs(t, w.code, nil, "exec", "--keep", "--session", "lo", "--", "ls -A __pycache__ 2>/dev/null; echo end")
	if r.code != 0 {
		t.Fatalf("exec after the loss: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if strings.Contains(r.stdout, "old") {
		t.Fatalf("the new sandbox's workspace holds the lost one's read-only directory:\n%s", r.stdout)
	}
}
