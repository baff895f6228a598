package cluster

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sbx-sh/sbx/sandbox"
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
	args := append(append([]string{}, sh[1:]...), "-c")
	args = append(args, wrapperArgs(id, dir, merge, mark, false, env, argv)...)
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
	c := exec.Command(sh[0], append(append([]string{}, sh[1:]...), append([]string{"-c"}, wrapperArgs("k1", "/", false, mark, false,
		[]string{"PATH=/usr/bin:/bin"}, []string{"sh", "-c", sleeps[0] + " & (setsid " + sleeps[1] + " &) ; " + sleeps[2]})...)...)...)
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
		fell   bool
	}{
		{"one write", []string{"hello\x1eTOKEN\x1e0/tmp\n"}, "hello", "/tmp\n", true, false},
		{"marker split across writes", []string{"ab\x1eTO", "KEN", "\x1e0/x"}, "ab", "/x", true, false},
		{"status in a write of its own", []string{"ab\x1eTOKEN\x1e", "1", "/x"}, "ab", "/x", true, true},
		{"status with the marker's end", []string{"ab\x1eTOKEN", "\x1e1"}, "ab", "", true, true},
		{"status 1, then a 1 in the trailer", []string{"\x1eTOKEN\x1e11"}, "", "1", true, true},
		{"status 0 then a 1 in the trailer", []string{"\x1eTOKEN\x1e01"}, "", "1", true, false},
		{"partial marker that is not one", []string{"ab\x1eTO", "X"}, "ab\x1eTOX", "", false, false},
		{"no marker, held tail flushed", []string{"ab\x1e"}, "ab\x1e", "", false, false},
		{"no status byte (cd failed)", []string{"\x1eTOKEN\x1e"}, "", "", true, false},
	}
	for _, c := range cases {
		var b bytes.Buffer
		s := newFd3Splitter(&b, mark)
		for _, ch := range c.chunks {
			s.Write([]byte(ch))
		}
		s.Flush()
		if b.String() != c.out || string(s.Trailer()) != c.tr || s.Found() != c.found || s.FellBack() != c.fell {
			t.Errorf("%s: out %q trailer %q found %v fell back %v", c.name, b.String(), s.Trailer(), s.Found(), s.FellBack())
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

// The wrapper's command gets exactly the environment it is given: nothing
// of the wrapper's own (its exec id, TMPDIR), which commands could see.
func TestWrapperExactEnv(t *testing.T) {
	env := []string{"PATH=/usr/bin:/bin", "X=y z", "EMPTY="}
	out, errs, _, code := runWrapper(t, "e1", "/", false, env, "env")
	got := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	slices.Sort(got)
	want := slices.Clone(env)
	slices.Sort(want)
	if code != 0 || !slices.Equal(got, want) {
		t.Errorf("env: got %q (exit %d, stderr %q), want exactly %q", got, code, errs, want)
	}
}

// A program is looked up as internal/runner does: on the PATH of the
// command's Env, else on sandbox.DefaultPath (not libc's default), and the
// environment stays empty; a name found nowhere exits 127.
func TestWrapperLookup(t *testing.T) {
	for _, c := range []struct {
		env  []string
		want string
	}{
		{nil, sandbox.DefaultPath},
		{[]string{"X=1"}, sandbox.DefaultPath},
		{[]string{"PATH="}, sandbox.DefaultPath},
		{[]string{"PATH=/a", "PATH=/b:/c"}, "/b:/c"},
	} {
		if got := lookupPath(c.env); got != c.want {
			t.Errorf("lookupPath(%q) = %q, want %q", c.env, got, c.want)
		}
	}
	// The script searches the path it is given: a program only there runs,
	// with an empty environment.
	bin := t.TempDir()
	if err := os.WriteFile(bin+"/sbx-only-here", []byte("#!/bin/sh\necho found; exec /usr/bin/env -u PWD\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	sh := podShell(t)
	mark := randomID()
	run := func(argv ...string) (string, int) {
		args := append(append([]string{}, sh[1:]...), "-c")
		args = append(args, wrapperArgs("p1", "/", true, mark, false, nil, argv)...)
		args[len(sh[1:])+1+7] = "/nonexistent:" + bin // the lookup path argument
		c := exec.Command(sh[0], args...)
		c.Env = []string{"PATH=/usr/bin:/bin", "TMPDIR=" + t.TempDir()}
		var out bytes.Buffer
		sp := newFd3Splitter(&out, "\x1e"+mark+"\x1e")
		c.Stdout, c.Stderr = sp, sp
		c.Run()
		sp.Flush()
		return out.String(), c.ProcessState.ExitCode()
	}
	if out, code := run("sbx-only-here"); code != 0 || out != "found\n" {
		t.Errorf("a program on the lookup path, empty Env: exit %d, output %q; want it found, and no environment", code, out)
	}
	if out, code := run("sbx-no-such-program"); code != 127 || !strings.Contains(out, "sbx-no-such-program: command not found") {
		t.Errorf("a program on no path: exit %d, output %q; want 127 and command not found", code, out)
	}
	if _, code := run("/no/such/program"); code != 127 {
		t.Errorf("a missing absolute path: exit %d, want 127", code)
	}
}

// A command that reads none of a large stdin still ends its exec. The
// container runtime ends an exec only once it has copied all of the stdin
// (it holds the read end of the pipe it writes into); the test holds a read
// end the same way and waits for every byte to be taken.
func TestWrapperUnreadStdin(t *testing.T) {
	sh := podShell(t)
	mark := randomID()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	args := append(append([]string{}, sh[1:]...), "-c")
	args = append(args, wrapperArgs("i1", "/", false, mark, true, []string{"PATH=/usr/bin:/bin"}, []string{"true"})...)
	c := exec.Command(sh[0], args...)
	c.Env = []string{"PATH=/usr/bin:/bin", "TMPDIR=" + t.TempDir()}
	c.Stdin = r
	var out bytes.Buffer
	sp := newFd3Splitter(&out, "\x1e"+mark+"\x1e")
	c.Stdout = sp
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	wrote := make(chan error, 1)
	go func() {
		_, err := w.Write(make([]byte, 4<<20))
		w.Close()
		wrote <- err
	}()
	select {
	case err := <-wrote:
		if err != nil {
			t.Errorf("writing the stdin: %v", err)
		}
	case <-time.After(20 * time.Second):
		w.Close()
		r.Close()
		t.Fatal("4 MiB of stdin that the command does not read were not taken in 20 s: the exec would never end")
	}
	if err := c.Wait(); err != nil || !sp.Found() {
		t.Errorf("wrapper: %v, marker found %v", err, sp.Found())
	}
}

// The kill scan finds what holds the command's output pipes, never what
// merely shares a /dev/null with it: a process outside the command that
// has /dev/null as its stdout and stderr survives the kill.
func TestKillScriptSparesOthers(t *testing.T) {
	sh := podShell(t)
	tmp := t.TempDir()
	other := exec.Command("sleep", "30075") // stdin, stdout, stderr: /dev/null
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	otherDone := make(chan error, 1)
	go func() { otherDone <- other.Wait() }()
	defer other.Process.Kill()
	c := exec.Command(sh[0], append(append([]string{}, sh[1:]...), append([]string{"-c"}, wrapperArgs("k2", "/", false, randomID(), false,
		[]string{"PATH=/usr/bin:/bin"}, []string{"sleep", "30076"})...)...)...)
	c.Env = []string{"PATH=/usr/bin:/bin", "TMPDIR=" + tmp}
	// The wrapper's stdout and stderr are /dev/null too.
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(tmp + "/.sbx-exec/k2.pid"); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the wrapper did not record its command's pid")
		}
		time.Sleep(10 * time.Millisecond)
	}
	k := exec.Command(sh[0], append(append([]string{}, sh[1:]...), "-c", killScript, "sbx", "k2")...)
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
	select {
	case err := <-otherDone:
		t.Errorf("a process outside the command was killed: %v", err)
	default:
	}
}

// The wrapper carries sandbox.Cmd's Fd4 (any bytes, NUL included, on fd 4
// of the command only), closes fd 3 when the command has none, and runs
// Fallback where the argv's program is an absolute path that is not an
// executable file (the engine's bash command on an image without bash).
func TestWrapperFd4AndFallback(t *testing.T) {
	sh := podShell(t)
	run := func(fd3 bool, fd4 []byte, argv, fallback []string) (string, string, int) {
		t.Helper()
		mark := randomID()
		args := append(append([]string{}, sh[1:]...), "-c")
		args = append(args, cmdWrapperArgs("f4", "/", "", false, mark, false, fd3, fd4, []string{"PATH=/usr/bin:/bin"}, argv, fallback)...)
		c := exec.Command(sh[0], args...)
		c.Env = []string{"PATH=/usr/bin:/bin", "TMPDIR=" + t.TempDir()}
		var out, errb bytes.Buffer
		sp := newFd3Splitter(&out, "\x1e"+mark+"\x1e")
		c.Stdout, c.Stderr = sp, &errb
		c.Run()
		sp.Flush()
		return out.String() + "|" + string(sp.Trailer()), errb.String(), c.ProcessState.ExitCode()
	}
	in := "bin\x00\xff\\%s%%n\n" + strings.Repeat("x", sandbox.MaxFd4-20)
	out, errs, code := run(false, []byte(in), []string{"sh", "-c", `cat <&4; exec 4<&-; [ -e /proc/self/fd/3 ] && echo fd3open >&2; cat /proc/self/fd/4 2>/dev/null || echo closed >&2`}, nil)
	if code != 0 || out != in+"|" || errs != "closed\n" {
		t.Errorf("fd 4: exit %d, read %d bytes (want the %d given, exactly), stderr %q", code, len(out)-1, len(in), errs)
	}
	out, _, code = run(true, nil, []string{"sh", "-c", `[ -e /proc/self/fd/4 ] && echo fd4open; echo three >&3`}, nil)
	if code != 0 || out != "|three\n" {
		t.Errorf("fd 3 without fd 4: exit %d, out %q; want fd 4 closed and fd 3 the report", code, out)
	}
	out, _, code = run(true, []byte("four"), []string{"/no/such/bash", "-c", "echo primary"}, []string{"sh", "-c", `echo fallback; cat <&4 >&3; exit 9`})
	if code != 9 || out != "fallback\n|four" {
		t.Errorf("missing program: exit %d, out %q; want the fallback with fd 3 and 4", code, out)
	}
	out, _, code = run(false, nil, []string{"/bin/sh", "-c", "echo primary"}, []string{"sh", "-c", "echo fallback"})
	if code != 0 || out != "primary\n|" {
		t.Errorf("present program: exit %d, out %q; want the argv, not the fallback", code, out)
	}
	out, _, _ = run(false, nil, []string{"/dev/null"}, []string{"sh", "-c", "echo fallback"})
	if out != "fallback\n|" {
		t.Errorf("a program that is not an executable file: out %q; want the fallback", out)
	}
	out, _, code = run(false, nil, []string{"sh", "-c", "echo primary"}, []string{"sh", "-c", "echo fallback"})
	if code != 0 || out != "primary\n|" {
		t.Errorf("a program looked up on PATH: out %q; want the argv (the fallback is only for absolute paths)", out)
	}
}

// The wrapper carries sandbox.Cmd's DirFallback as the helper's runner
// does: a Dir that is gone starts the command in the fallback after one
// line on stderr, and PWD names where it started.
func TestWrapperDirFallback(t *testing.T) {
	sh := podShell(t)
	tmp := t.TempDir()
	run := func(dir, fallback string) (string, string, int, bool) {
		t.Helper()
		mark := randomID()
		args := append(append([]string{}, sh[1:]...), "-c")
		args = append(args, cmdWrapperArgs("df", dir, fallback, false, mark, false, false, nil, []string{"PATH=/usr/bin:/bin", "PWD=/elsewhere"}, []string{"sh", "-c", `printf '%s %s\n' "$(pwd -P)" "$PWD"`}, nil)...)
		c := exec.Command(sh[0], args...)
		c.Env = []string{"PATH=/usr/bin:/bin", "TMPDIR=" + tmp}
		var out, errb bytes.Buffer
		sp := newFd3Splitter(&out, "\x1e"+mark+"\x1e")
		c.Stdout, c.Stderr = sp, &errb
		c.Run()
		sp.Flush()
		if !sp.Found() {
			t.Errorf("marker not found in %q", out.String())
		}
		return out.String(), errb.String(), c.ProcessState.ExitCode(), sp.FellBack()
	}
	real, _ := filepath.EvalSymlinks(tmp)
	if out, errs, code, fell := run(real, "/"); code != 0 || out != real+" "+real+"\n" || errs != "" || fell {
		t.Errorf("Dir there: exit %d, out %q, stderr %q, fell back %v; want it in %s with PWD naming it, not fallen back", code, out, errs, fell, real)
	}
	gone := filepath.Join(real, "gone")
	want := "sbx: " + gone + " no longer exists; running in " + real + "\n"
	if out, errs, code, fell := run(gone, real); code != 0 || out != real+" "+real+"\n" || errs != want || !fell {
		t.Errorf("Dir gone: exit %d, out %q, stderr %q, fell back %v; want it in %s, PWD naming it, stderr %q, fallen back", code, out, errs, fell, real, want)
	}
	if _, _, code, fell := run(gone, ""); code != 125 || fell {
		t.Errorf("Dir gone, no fallback: exit %d, fell back %v; want 125, not fallen back", code, fell)
	}
}
