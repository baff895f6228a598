package testenv

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestMain: with TESTENV_SLEEP set this binary only sleeps, under whatever
// command line its parent gave it (a stand-in for an init or a daemon).
func TestMain(m *testing.M) {
	if os.Getenv("TESTENV_SLEEP") != "" {
		time.Sleep(10 * time.Minute)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestEndSandboxes: what a test left under its state root is ended (an
// init its local.json names, a host daemon of a session there), and
// nothing else: a process whose pid a local.json names with another start
// time (a reused pid), and a daemon of another root.
func TestEndSandboxes(t *testing.T) {
	root := t.TempDir()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	exited := map[*exec.Cmd]chan struct{}{}
	start := func(argv0 string, args ...string) *exec.Cmd {
		cmd := exec.Command(self)
		cmd.Args = append(append([]string{argv0}, args...), "600")
		cmd.Env = append(os.Environ(), "TESTENV_SLEEP=1")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		exited[cmd] = done
		t.Cleanup(func() { cmd.Process.Kill(); <-done })
		return cmd
	}
	record := func(session string, pid int, st uint64) {
		d := filepath.Join(root, "sbx", "sessions", session)
		os.MkdirAll(d, 0o700)
		b, _ := json.Marshal(map[string]any{"pid": pid, "start_time": st})
		os.WriteFile(filepath.Join(d, "local.json"), b, 0o600)
	}
	init := start("sbx-init")
	record("left", init.Process.Pid, startTime(init.Process.Pid))
	reused := start("sbx-init")
	record("reused", reused.Process.Pid, startTime(reused.Process.Pid)+1)
	daemon := start("sbx", "__hostd", filepath.Join(root, "sbx", "sessions", "left"))
	other := start("sbx", "__hostd", filepath.Join(root+"x", "sbx", "sessions", "left"))
	for _, c := range []*exec.Cmd{init, reused, daemon, other} {
		pid := c.Process.Pid
		if !WaitFor(10*time.Second, func() bool {
			b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
			return strings.HasSuffix(string(b), "600\x00")
		}) {
			t.Fatalf("pid %d never ran", pid)
		}
	}
	ended := EndSandboxes(root)
	if len(ended) != 2 {
		t.Errorf("ended %q, want the init and the daemon", ended)
	}
	for _, c := range []*exec.Cmd{init, daemon} {
		select {
		case <-exited[c]:
			if c.ProcessState.Success() {
				t.Errorf("%v (pid %d) ended by itself, not killed", c.Args, c.Process.Pid)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("%v (pid %d) was not ended", c.Args, c.Process.Pid)
		}
	}
	for _, c := range []*exec.Cmd{reused, other} {
		select {
		case <-exited[c]:
			t.Errorf("%v (pid %d) was ended: not this root's", c.Args, c.Process.Pid)
		default:
		}
		if c.Process.Signal(syscall.Signal(0)) != nil {
			t.Errorf("%v (pid %d) was ended: not this root's", c.Args, c.Process.Pid)
		}
	}
}
