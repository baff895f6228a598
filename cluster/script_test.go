package cluster

import (
	"bytes"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

// The in-pod scripts must work under busybox sh (the lab's pod image) and
// any POSIX sh. These tests run them on the host under busybox when it is
// installed, else /bin/sh.
func podShell(t *testing.T) []string {
	t.Helper()
	if p, err := exec.LookPath("busybox"); err == nil {
		return []string{p, "sh"}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("busybox is missing: apt-get install busybox-static (the cluster scripts are tested under busybox sh)")
	}
	return []string{"/bin/sh"}
}

func runWrapper(t *testing.T, id, dir string, merge bool, env []string, argv ...string) (stdout, stderr, fd3 string, code int) {
	t.Helper()
	sh := podShell(t)
	mark := randomID()
	args := append(append([]string{}, sh[1:]...), "-c", wrapperScript, "sbx", id, dir, boolArg(merge), mark)
	args = append(append(args, env...), argv...)
	c := exec.Command(sh[0], args...)
	c.Env = []string{"PATH=/usr/bin:/bin", "TMPDIR=" + t.TempDir()}
	var out, errb bytes.Buffer
	sp := newFd3Splitter(&out, "\x1e"+mark+"\x1e")
	c.Stdout, c.Stderr = sp, &errb
	if merge {
		c.Stderr = sp
	}
	err := c.Run()
	sp.Flush()
	code = c.ProcessState.ExitCode()
	if err != nil && code < 0 {
		t.Fatal(err)
	}
	if !sp.Found() {
		t.Errorf("marker not found in %q", out.String())
	}
	return out.String(), errb.String(), string(sp.Trailer()), code
}

func TestWrapperScript(t *testing.T) {
	tmp := t.TempDir()
	out, errs, fd3, code := runWrapper(t, "a1", tmp, false, []string{"PATH=/usr/bin:/bin", "X=y z"},
		"sh", "-c", `echo "out $X"; echo err >&2; pwd >&3; env | sort | tr '\n' ' ' >&2; exit 3`)
	if code != 3 {
		t.Errorf("exit code = %d, want 3", code)
	}
	if out != "out y z\n" {
		t.Errorf("stdout = %q", out)
	}
	if !strings.HasPrefix(errs, "err\n") || strings.Contains(errs, "TMPDIR") {
		t.Errorf("stderr = %q (want err, and only the given env)", errs)
	}
	if strings.TrimSpace(fd3) != tmp {
		t.Errorf("fd3 = %q, want %q", fd3, tmp)
	}
	// merged stderr keeps order
	out, _, _, code = runWrapper(t, "a2", "/", true, nil, "/bin/sh", "-c", "echo 1; echo 2 >&2; echo 3")
	if out != "1\n2\n3\n" || code != 0 {
		t.Errorf("merged = %q code %d", out, code)
	}
	// a missing directory fails with 125 before anything runs
	_, _, _, code = runWrapper(t, "a3", "/nonexistent-dir", false, nil, "/bin/true")
	if code != 125 {
		t.Errorf("missing dir: code %d, want 125", code)
	}
}

func TestKillScriptKillsTree(t *testing.T) {
	sh := podShell(t)
	tmp := t.TempDir()
	mark := randomID()
	// A command that starts a grandchild in the background and one that
	// escapes into a session of its own; all must die. Their durations are
	// odd numbers no other test uses, so that ps finds only them (go test
	// runs other packages' sandboxes beside this one).
	sleeps := []string{"sleep 30071", "sleep 30072", "sleep 30073"}
	c := exec.Command(sh[0], append(append([]string{}, sh[1:]...), "-c", wrapperScript, "sbx", "k1", "/", "0", mark,
		"PATH=/usr/bin:/bin", "sh", "-c", sleeps[0]+" & (setsid "+sleeps[1]+" &) ; "+sleeps[2])...)
	c.Env = []string{"PATH=/usr/bin:/bin", "TMPDIR=" + tmp}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	running := func() []string {
		out, err := exec.Command("ps", "-eo", "args").Output()
		if err != nil {
			t.Fatalf("ps: %v", err)
		}
		var found []string
		for _, l := range strings.Split(string(out), "\n") {
			if slices.Contains(sleeps, strings.TrimSpace(l)) {
				found = append(found, strings.TrimSpace(l))
			}
		}
		return found
	}
	// The whole tree runs, and the wrapper has recorded its pid.
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := os.Stat(tmp + "/.sbx-exec/k1.pid")
		if err == nil && len(running()) == len(sleeps) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the tree did not start (pid file: %v; running: %q)", err, running())
		}
		time.Sleep(10 * time.Millisecond)
	}
	k := exec.Command(sh[0], append(append([]string{}, sh[1:]...), "-c", killScript, "sbx", "k1")...)
	k.Env = c.Env
	if out, err := k.CombinedOutput(); err != nil {
		t.Fatalf("kill script: %v: %s", err, out)
	}
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		c.Process.Kill()
		t.Fatal("wrapper still running 10s after the kill script")
	}
	if left := running(); len(left) > 0 {
		t.Errorf("survivors: %q", left)
	}
}

func TestFd3Splitter(t *testing.T) {
	mark := "\x1eTOKEN\x1e"
	cases := []struct {
		name   string
		chunks []string
		out    string
		tr     string
		found  bool
	}{
		{"one write", []string{"hello\x1eTOKEN\x1e/tmp\n"}, "hello", "/tmp\n", true},
		{"marker split across writes", []string{"ab\x1eTO", "KEN", "\x1e/x"}, "ab", "/x", true},
		{"partial marker that is not one", []string{"ab\x1eTO", "X"}, "ab\x1eTOX", "", false},
		{"no marker, held tail flushed", []string{"ab\x1e"}, "ab\x1e", "", false},
		{"empty output", []string{"\x1eTOKEN\x1e"}, "", "", true},
	}
	for _, c := range cases {
		var b bytes.Buffer
		s := newFd3Splitter(&b, mark)
		for _, ch := range c.chunks {
			s.Write([]byte(ch))
		}
		s.Flush()
		if b.String() != c.out || string(s.Trailer()) != c.tr || s.Found() != c.found {
			t.Errorf("%s: out %q trailer %q found %v", c.name, b.String(), s.Trailer(), s.Found())
		}
	}
}

// What a command leaves running is killed when it exits (as in the local
// backend's per-command pid namespace), so it cannot hold the stream open.
func TestWrapperKillsLeftovers(t *testing.T) {
	start := time.Now()
	out, _, _, code := runWrapper(t, "l1", "/", false, []string{"PATH=/usr/bin:/bin"}, "sh", "-c", "sleep 311 & echo started")
	if code != 0 || out != "started\n" || time.Since(start) > 5*time.Second {
		t.Errorf("code %d out %q after %s", code, out, time.Since(start))
	}
	ps, _ := exec.Command("ps", "-eo", "args").Output()
	if strings.Contains(string(ps), "sleep 311") {
		t.Error("the background sleep survived its command")
	}
}
