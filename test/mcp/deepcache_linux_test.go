package mcptest

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

// TestReclaimAfterDeepSessionCache: as root, a new sandbox of a session
// with cache = "session" is given the caches its lost one left (chowned to
// its host uid). A chain of directories past PATH_MAX there failed that
// walk by path ("file name too long"), and with it every later claim: an
// sbx-mcp session whose sandbox was lost (killed, out of memory) answered
// each bash call with that error until the client went. Such a cache
// starts empty now, and the session goes on.
func TestReclaimAfterDeepSessionCache(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test is about the caches sbx gives a new sandbox's host uid as root: run it as root")
	}
	const python = "/usr/bin/python3"
	if _, err := os.Stat(python); err != nil {
		t.Fatalf("the sandbox builds the tree with %s: install python3 (%v)", python, err)
	}
	e := newEnv(t)
	e.vars = append(e.vars, "SBX_CACHE=session")
	c := e.stdio()
	out := c.bash(python + ` -c 'import os
os.chdir(os.environ["HOME"] + "/.cache")
os.mkdir("deep"); os.chdir("deep")
for i in range(3000):
    os.mkdir("a"); os.chdir("a")
print("built")'`)
	wantContains(t, out, "built")
	names := e.sessions()
	if len(names) != 1 {
		t.Fatalf("sessions: %v", names)
	}
	raw, err := os.ReadFile(filepath.Join(e.state, "sbx", "sessions", names[0], "local.json"))
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
	res := c.call("bash", map[string]any{"command": "echo again"})
	if res.IsError || !strings.Contains(text(res), "again") {
		t.Fatalf("the next bash call after the sandbox was lost: %s", text(res))
	}
}
