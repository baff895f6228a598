package hostd_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sbx-sh/sbx/internal/testenv"
	"github.com/sbx-sh/sbx/local"
)

// These tests drive the real sbx binary as a user does: kept sessions, the
// daemon the first call starts, the calls it serves, a daemon killed, a
// release; and the daemon's socket as another user would try it.

var sbxBin, selfBin string

// envDial makes this test binary a raw client of a daemon's socket (run as
// another user): it sends one status request and prints the answer.
const envDial = "HOSTD_TEST_DIAL"

func TestMain(m *testing.M) {
	local.Main()
	if sock := os.Getenv(envDial); sock != "" {
		os.Exit(dialAsStranger(sock))
	}
	dir, err := os.MkdirTemp("", "hostdbin")
	if err != nil {
		panic(err)
	}
	os.Chmod(dir, 0o755)
	sbxBin = filepath.Join(dir, "sbx")
	if err := testenv.Build(sbxBin, "../../cmd/sbx"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// The sandbox's own small binary beside it, named explicitly (a test
	// build is not found beside by itself: local/stagebin_linux.go).
	if err := testenv.Build(filepath.Join(dir, local.SandboxBinName), "../../cmd/sbx-sandbox"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Setenv(local.EnvSandboxBin, filepath.Join(dir, local.SandboxBinName))
	// A copy of this binary another user may run (the go tool's build
	// directory is private).
	selfBin = filepath.Join(dir, "hostd.test")
	if raw, err := os.ReadFile(os.Args[0]); err != nil || os.WriteFile(selfBin, raw, 0o755) != nil {
		fmt.Fprintln(os.Stderr, "copy the test binary:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func dialAsStranger(sock string) int {
	c, err := net.Dial("unix", sock)
	if err != nil {
		fmt.Printf("dial: %v\n", err)
		return 0
	}
	defer c.Close()
	body, _ := json.Marshal(map[string]string{"op": "status", "session": "hd", "key": strings.Repeat("0", 64)})
	head := binary.BigEndian.AppendUint32(nil, uint32(len(body)))
	c.Write(append(head, body...))
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	raw, _ := io.ReadAll(c)
	fmt.Printf("answer: %s\n", raw)
	return 0
}

type world struct {
	state, code string
	env         []string
}

func newWorld(t *testing.T) *world {
	t.Helper()
	mk := func() string {
		d, err := os.MkdirTemp("", "hostd")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(d) })
		return d
	}
	w := &world{state: mk(), code: mk()}
	os.WriteFile(filepath.Join(w.code, "README"), []byte("hello\n"), 0o644)
	w.env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + mk(), "XDG_STATE_HOME=" + w.state, "LANG=C", "SBX_DEBUG=1", local.EnvSandboxBin + "=" + os.Getenv(local.EnvSandboxBin)}
	t.Cleanup(func() {
		w.sbx(t, "release", "--all")
		// What a failed test, a broken session or a failed release left.
		if left := testenv.EndSandboxes(w.state); len(left) > 0 {
			t.Logf("ended what the test left running: %s", strings.Join(left, "; "))
		}
	})
	return w
}

func (w *world) sessionDir(name string) string {
	return filepath.Join(w.state, "sbx", "sessions", name)
}

type result struct {
	stdout, stderr string
	code           int
}

func (w *world) sbx(t *testing.T, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, sbxBin, args...)
	cmd.Dir, cmd.Env = w.code, w.env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run sbx %v: %v", args, err)
	}
	return result{stdout.String(), stderr.String(), code}
}

const (
	viaDaemon = "the command runs through the session's host daemon"
	itself    = "sbx exec runs the command itself"
)

// exec runs a kept exec of session hd and checks its exit status, and
// whether the daemon ran it.
func (w *world) exec(t *testing.T, daemon bool, command string) result {
	t.Helper()
	r := w.sbx(t, "exec", "--keep", "--session", "hd", "--", command)
	if r.code != 0 {
		t.Fatalf("sbx exec %q: exit %d\n%s", command, r.code, r.stderr)
	}
	if got := strings.Contains(r.stderr, viaDaemon); got != daemon {
		t.Fatalf("sbx exec %q: through the daemon %v, want %v\n%s", command, got, daemon, r.stderr)
	}
	if !daemon && !strings.Contains(r.stderr, itself) {
		t.Fatalf("sbx exec %q: no line saying it ran the command itself\n%s", command, r.stderr)
	}
	return r
}

// daemonPids are the pids of the session's daemons.
func (w *world) daemonPids() []int {
	var pids []int
	for _, p := range testenv.HostProcs("__hostd\x00" + w.sessionDir("hd")) {
		pid, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(strings.Fields(p)[0], "/proc/"), "/cmdline:"))
		pids = append(pids, pid)
	}
	return pids
}

// waitDaemon waits until a daemon other than old serves the session.
func (w *world) waitDaemon(t *testing.T, old int) int {
	t.Helper()
	sock := filepath.Join(w.sessionDir("hd"), "hostd.sock")
	var pid int
	if !testenv.WaitFor(30*time.Second, func() bool {
		pids := w.daemonPids()
		if len(pids) != 1 || pids[0] == old {
			return false
		}
		pid = pids[0]
		c, err := net.Dial("unix", sock)
		if err == nil {
			c.Close()
		}
		return err == nil
	}) {
		log, _ := os.ReadFile(filepath.Join(w.sessionDir("hd"), "hostd.log"))
		t.Fatalf("no daemon serves the session (pids %v, old %d, all %v); its log:\n%s", w.daemonPids(), old, testenv.HostProcs("__hostd"), log)
	}
	return pid
}

func served(t *testing.T, stderr string) int {
	t.Helper()
	i := strings.Index(stderr, " served=")
	if i < 0 {
		t.Fatalf("no served count in\n%s", stderr)
	}
	n, _ := strconv.Atoi(strings.Fields(stderr[i+len(" served="):])[0])
	return n
}

func TestDaemonServesKeptExecs(t *testing.T) {
	w := newWorld(t)
	w.exec(t, false, "true")
	pid := w.waitDaemon(t, 0)

	// A host edit between calls is seen; the sandbox's changes come back.
	os.WriteFile(filepath.Join(w.code, "README"), []byte("edited on the host\n"), 0o644)
	r := w.exec(t, true, "cat README; echo from-sandbox > made.txt")
	if r.stdout != "edited on the host\n" {
		t.Fatalf("the sandbox read %q, want the host's edit", r.stdout)
	}
	if n := served(t, r.stderr); n != 1 {
		t.Fatalf("served %d, want 1", n)
	}
	if b, _ := os.ReadFile(filepath.Join(w.code, "made.txt")); string(b) != "from-sandbox\n" {
		t.Fatalf("made.txt on the host: %q", b)
	}
	// Many edits, a new directory, a removal: all seen by the watch.
	os.MkdirAll(filepath.Join(w.code, "d", "e"), 0o755)
	os.WriteFile(filepath.Join(w.code, "d", "e", "f"), []byte("deep\n"), 0o644)
	os.Remove(filepath.Join(w.code, "made.txt"))
	r = w.exec(t, true, "cat d/e/f; test ! -e made.txt && echo gone")
	if r.stdout != "deep\ngone\n" {
		t.Fatalf("after a new dir and a removal: %q", r.stdout)
	}
	if n := served(t, r.stderr); n != 2 {
		t.Fatalf("served %d, want 2", n)
	}
	// The exit status, stdout and stderr pass through.
	r = w.sbx(t, "exec", "--keep", "--session", "hd", "--", "echo out; echo err >&2; exit 7")
	if r.code != 7 || r.stdout != "out\n" || !strings.Contains(r.stderr, "err\n") || !strings.Contains(r.stderr, viaDaemon) {
		t.Fatalf("exit 7 through the daemon: %d %q %q", r.code, r.stdout, r.stderr)
	}

	// The daemon killed between calls: the next call runs itself (a stale
	// socket), loses nothing, and a new daemon follows.
	syscall.Kill(pid, syscall.SIGKILL)
	testenv.WaitFor(10*time.Second, func() bool { return len(w.daemonPids()) == 0 })
	os.WriteFile(filepath.Join(w.code, "README"), []byte("after the kill\n"), 0o644)
	r = w.exec(t, false, "cat README; echo again > made2.txt")
	if r.stdout != "after the kill\n" {
		t.Fatalf("after the daemon's death the sandbox read %q", r.stdout)
	}
	if b, _ := os.ReadFile(filepath.Join(w.code, "made2.txt")); string(b) != "again\n" {
		t.Fatalf("made2.txt on the host: %q", b)
	}
	pid = w.waitDaemon(t, pid)

	// Killed during a command: the caller says so; what the command wrote
	// comes back with the next command.
	cmd := exec.Command(sbxBin, "exec", "--keep", "--session", "hd", "--", "echo inflight > inflight.txt; echo ready; exec sleep 60.98765")
	cmd.Dir, cmd.Env = w.code, w.env
	pr, _ := cmd.StdoutPipe()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 6)
	io.ReadFull(pr, buf)
	syscall.Kill(pid, syscall.SIGKILL)
	err := cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 125 || !strings.Contains(stderr.String(), "ended during the command") {
		t.Fatalf("daemon killed mid-command: %v\n%s", err, stderr.String())
	}
	r = w.exec(t, false, "cat inflight.txt")
	if r.stdout != "inflight\n" {
		t.Fatalf("the next command saw %q", r.stdout)
	}
	if b, _ := os.ReadFile(filepath.Join(w.code, "inflight.txt")); string(b) != "inflight\n" {
		t.Fatalf("what the interrupted command wrote is not on the host: %q", b)
	}
	w.waitDaemon(t, pid)

	// Release stops it: no process of the session is left.
	if r := w.sbx(t, "release", "--session", "hd"); r.code != 0 {
		t.Fatalf("release: %d %s", r.code, r.stderr)
	}
	if p := testenv.HostProcs(w.sessionDir("hd")); len(p) > 0 {
		t.Fatalf("processes left after the release: %v", p)
	}
}

// A daemon ends when its session goes without it: the state removed (a
// release by another process, as sbx-mcp's release tool does).
func TestDaemonEndsWithItsSession(t *testing.T) {
	w := newWorld(t)
	w.exec(t, false, "true")
	w.waitDaemon(t, 0)
	os.RemoveAll(filepath.Join(w.sessionDir("hd"), "info.json"))
	os.Remove(filepath.Join(w.sessionDir("hd"), "hostd.sock"))
	if !testenv.WaitFor(20*time.Second, func() bool { return len(w.daemonPids()) == 0 }) {
		t.Fatalf("the daemon outlived its session: %v", w.daemonPids())
	}
}

// Another user cannot use the socket even when it can reach it: the daemon
// checks the peer's uid.
func TestDaemonRefusesAnotherUser(t *testing.T) {
	if os.Getuid() != 0 {
		t.Fatal("this test switches to the user nobody (65534): run it as root (the CI does)")
	}
	w := newWorld(t)
	w.exec(t, false, "true")
	w.waitDaemon(t, 0)
	sock := filepath.Join(w.sessionDir("hd"), "hostd.sock")
	// Open the way for the stranger: what the private state dir forbids.
	for d := w.sessionDir("hd"); d != filepath.Dir(w.state); d = filepath.Dir(d) {
		os.Chmod(d, 0o755)
	}
	os.Chmod(sock, 0o777)
	as := func(uid string) string {
		cmd := exec.Command("setpriv", "--reuid="+uid, "--regid="+uid, "--clear-groups", "--", selfBin)
		cmd.Env = []string{envDial + "=" + sock}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("dial as %s: %v\n%s", uid, err, out)
		}
		return string(out)
	}
	if out := as("65534"); !strings.Contains(out, "serves only uid 0") {
		t.Fatalf("the daemon answered another user: %s", out)
	}
	// The same request from its own user passes the uid check (and
	// stops at the next, the set-up's key): the refusal above is the uid's.
	if out := as("0"); !strings.Contains(out, "another set-up") {
		t.Fatalf("the daemon's answer to its own user: %s", out)
	}
	os.Chmod(w.sessionDir("hd"), 0o700)
}

// A client refuses a state dir others may enter, and runs the command
// itself.
func TestClientRefusesAnOpenStateDir(t *testing.T) {
	w := newWorld(t)
	w.exec(t, false, "true")
	w.waitDaemon(t, 0)
	os.Chmod(w.sessionDir("hd"), 0o755)
	r := w.exec(t, false, "true")
	if !strings.Contains(r.stderr, "is not a private directory") {
		t.Fatalf("no reason given:\n%s", r.stderr)
	}
	os.Chmod(w.sessionDir("hd"), 0o700)
	w.exec(t, true, "true")
}

// An interrupted call through the daemon stops its command (exit 130, as
// without a daemon), and the session goes on.
func TestDaemonCallInterrupted(t *testing.T) {
	w := newWorld(t)
	w.exec(t, false, "true")
	w.waitDaemon(t, 0)
	cmd := exec.Command(sbxBin, "exec", "--keep", "--session", "hd", "--", "echo ready; exec sleep 60.4567")
	cmd.Dir, cmd.Env = w.code, w.env
	pr, _ := cmd.StdoutPipe()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 6)
	io.ReadFull(pr, buf)
	cmd.Process.Signal(syscall.SIGINT)
	err := cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 130 || !strings.Contains(stderr.String(), viaDaemon) {
		t.Fatalf("interrupted exec through the daemon: %v\n%s", err, stderr.String())
	}
	if !testenv.WaitFor(10*time.Second, func() bool { return len(testenv.HostProcs("60.4567")) == 0 }) {
		t.Fatalf("the command survived the interrupt: %v", testenv.HostProcs("60.4567"))
	}
	if r := w.exec(t, true, "echo still"); r.stdout != "still\n" {
		t.Fatalf("after the interrupt: %q", r.stdout)
	}
}

// A daemon ends when its sandbox is gone (the init killed): it does not
// hold, or claim anew, a session whose sandbox died.
func TestDaemonEndsWithItsSandbox(t *testing.T) {
	w := newWorld(t)
	w.exec(t, false, "true")
	pid := w.waitDaemon(t, 0)
	w.exec(t, true, "true") // after the daemon's first round trip
	raw, err := os.ReadFile(filepath.Join(w.sessionDir("hd"), "local.json"))
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		Pid int `json:"pid"`
	}
	if err := json.Unmarshal(raw, &st); err != nil || st.Pid <= 1 {
		t.Fatalf("no init pid in local.json: %s (%v)", raw, err)
	}
	syscall.Kill(st.Pid, syscall.SIGKILL)
	if !testenv.WaitFor(60*time.Second, func() bool { return len(w.daemonPids()) == 0 }) {
		t.Fatalf("the daemon (pid %d) outlived its sandbox", pid)
	}
	log, _ := os.ReadFile(filepath.Join(w.sessionDir("hd"), "hostd.log"))
	if !strings.Contains(string(log), "the sandbox is gone") {
		t.Fatalf("the daemon's log does not say why it ended:\n%s", log)
	}
	// The next call claims a new sandbox itself, as without a daemon.
	if r := w.exec(t, false, "cat README"); r.stdout != "hello\n" {
		t.Fatalf("after the sandbox's death: %q", r.stdout)
	}
}

// A burst of host changes while the daemon cannot read its events (stopped)
// overflows the kernel's queue: the next call scans in full, as sbx-mcp's
// session does, and sees every change; later calls go on from events.
func TestDaemonQueueOverflowScansInFull(t *testing.T) {
	w := newWorld(t)
	w.exec(t, false, "true")
	pid := w.waitDaemon(t, 0)
	w.exec(t, true, "true")
	raw, _ := os.ReadFile("/proc/sys/fs/inotify/max_queued_events")
	queue, _ := strconv.Atoi(strings.TrimSpace(string(raw)))
	if queue <= 0 || queue > 1<<16 {
		t.Fatalf("fs.inotify.max_queued_events is %q: want a queue this test can overflow (at most 65536)", raw)
	}
	syscall.Kill(pid, syscall.SIGSTOP)
	if !testenv.WaitFor(30*time.Second, func() bool { return allStopped(pid) }) {
		t.Fatalf("the daemon (pid %d) did not stop", pid)
	}
	// Each file makes a create and a close-write at least: a queue's worth
	// of files overflows it twice over (half of one and a hundred were once
	// not enough on a loaded machine, the stop not yet landed: now waited
	// for above).
	n := queue + 100
	for i := range n {
		os.WriteFile(filepath.Join(w.code, fmt.Sprintf("burst%06d", i)), []byte("x"), 0o644)
	}
	os.WriteFile(filepath.Join(w.code, "README"), []byte("after the burst\n"), 0o644)
	syscall.Kill(pid, syscall.SIGCONT)
	r := w.exec(t, true, "ls | grep -c '^burst'; cat README")
	if want := fmt.Sprintf("%d\nafter the burst\n", n); r.stdout != want {
		t.Fatalf("after the burst the sandbox has %q, want %q", r.stdout, want)
	}
	log, _ := os.ReadFile(filepath.Join(w.sessionDir("hd"), "hostd.log"))
	if !strings.Contains(string(log), "the inotify queue overflowed") {
		t.Fatalf("no overflow in the daemon's log (did the queue overflow?):\n%.3000s", log)
	}
	os.WriteFile(filepath.Join(w.code, "README"), []byte("from events again\n"), 0o644)
	if r := w.exec(t, true, "cat README"); r.stdout != "from events again\n" {
		t.Fatalf("after the full scan: %q", r.stdout)
	}
}

// A daemon without calls ends after its idle bound: the session's idle_ttl
// here (shorter than hostd.IdleLimit), which is also when the sandbox
// expires; its own bound ends it first (checked every 2 s, before the
// attach every 30 s would find the sandbox gone).
func TestDaemonEndsWhenIdle(t *testing.T) {
	w := newWorld(t)
	w.env = append(w.env, "SBX_IDLE_TTL=3s")
	w.exec(t, false, "true")
	pid := w.waitDaemon(t, 0)
	if !testenv.WaitFor(20*time.Second, func() bool { return len(w.daemonPids()) == 0 }) {
		t.Fatalf("the daemon (pid %d) outlived an idle_ttl of 3s", pid)
	}
	log, _ := os.ReadFile(filepath.Join(w.sessionDir("hd"), "hostd.log"))
	if !strings.Contains(string(log), `why="idle for 3s"`) {
		t.Fatalf("the daemon's log does not say it ended idle:\n%s", log)
	}
}

// Every check of a request, attacked from a raw client of the daemon's own
// user: each is refused with its reason, nothing runs, and the daemon goes
// on serving (but for another set-up's exec, which ends it).
func TestDaemonRefusesBadRequests(t *testing.T) {
	w := newWorld(t)
	w.exec(t, false, "true")
	pid := w.waitDaemon(t, 0)
	// The set-up key, from what the starter passed (as root: /proc).
	environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		t.Fatal(err)
	}
	var start struct{ Key string }
	for _, kv := range strings.Split(string(environ), "\x00") {
		if v, ok := strings.CutPrefix(kv, "SBX_HOSTD_START="); ok {
			json.Unmarshal([]byte(v), &start)
		}
	}
	if len(start.Key) != 64 {
		t.Fatalf("no key in the daemon's start environment")
	}
	sock := filepath.Join(w.sessionDir("hd"), "hostd.sock")
	marker := filepath.Join(w.code, "ran")
	exec1 := func(key, dir string) map[string]any {
		return map[string]any{"op": "exec", "session": "hd", "key": key, "command": "touch " + marker, "dir": dir}
	}
	frame := func(v any) []byte {
		b, _ := json.Marshal(v)
		return append(binary.BigEndian.AppendUint32(nil, uint32(len(b))), b...)
	}
	for _, c := range []struct {
		name string
		raw  []byte
		fds  int
		want string
	}{
		{"another session", frame(map[string]any{"op": "status", "session": "other", "key": start.Key}), 0, "serves session hd, not other"},
		{"not JSON", append(binary.BigEndian.AppendUint32(nil, 7), "garbage"...), 0, "a bad request"},
		{"an unknown field", frame(map[string]any{"op": "status", "session": "hd", "key": start.Key, "uid": 0}), 0, "a bad request"},
		{"a frame over the bound", binary.BigEndian.AppendUint32(nil, 2<<20), 0, "over the bound"},
		{"a frame cut short", append(binary.BigEndian.AppendUint32(nil, 100), `{"op":`...), 0, "cut short"},
		{"an unknown op", frame(map[string]any{"op": "shell", "session": "hd", "key": start.Key}), 0, "unknown op"},
		{"a session name that is a path", frame(map[string]any{"op": "status", "session": "../hd", "key": start.Key}), 0, "a bad request"},
		{"an exec without descriptors", frame(exec1(start.Key, w.code)), 0, "not 0 descriptors"},
		{"an exec with three descriptors", frame(exec1(start.Key, w.code)), 3, "not 3 descriptors"},
		{"an exec outside the code dirs", frame(exec1(start.Key, "/tmp")), 2, "not inside the session's code dirs"},
		{"an exec with a relative dir", frame(exec1(start.Key, "tmp")), 2, "not a clean absolute path"},
	} {
		t.Run(c.name, func(t *testing.T) {
			conn, err := net.Dial("unix", sock)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			uc := conn.(*net.UnixConn)
			var rights []byte
			if c.fds > 0 {
				fds := make([]int, c.fds)
				for i := range fds {
					fds[i] = int(os.Stderr.Fd())
				}
				rights = syscall.UnixRights(fds...)
			}
			if _, _, err := uc.WriteMsgUnix(c.raw[:min(4, len(c.raw))], rights, nil); err != nil {
				t.Fatal(err)
			}
			uc.Write(c.raw[min(4, len(c.raw)):])
			if c.name == "a frame cut short" {
				uc.CloseWrite()
			}
			uc.SetReadDeadline(time.Now().Add(10 * time.Second))
			answer, _ := io.ReadAll(uc)
			if !strings.Contains(string(answer), `"refused"`) || !strings.Contains(string(answer), c.want) {
				t.Fatalf("answer %q, want a refusal with %q", answer, c.want)
			}
		})
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("a refused request ran its command")
	}
	// Still serving.
	if r := w.exec(t, true, "echo ok"); r.stdout != "ok\n" {
		t.Fatalf("after the refusals: %q", r.stdout)
	}
	// An exec of another set-up is refused, and ends the daemon (of no more
	// use: the user's configuration changed); the next call runs itself.
	conn, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	raw := frame(exec1(strings.Repeat("1", 64), w.code))
	conn.(*net.UnixConn).WriteMsgUnix(raw[:4], syscall.UnixRights(int(os.Stderr.Fd()), int(os.Stderr.Fd())), nil)
	conn.Write(raw[4:])
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	answer, _ := io.ReadAll(conn)
	conn.Close()
	if !strings.Contains(string(answer), "differs from the daemon's") {
		t.Fatalf("another set-up's exec: %q", answer)
	}
	if !testenv.WaitFor(10*time.Second, func() bool { return len(w.daemonPids()) == 0 }) {
		t.Fatal("the daemon goes on after a call of another set-up")
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("a refused request ran its command")
	}
	w.exec(t, false, "true")
}

// allStopped reports whether every thread of pid is stopped (state T in
// /proc/PID/task/*/stat): a SIGSTOP has landed.
func allStopped(pid int) bool {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil || len(tasks) == 0 {
		return false
	}
	for _, task := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stat", pid, task.Name()))
		if err != nil {
			return false
		}
		// The state follows the command, which is in parentheses.
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 || i+2 >= len(b) || b[i+2] != 'T' {
			return false
		}
	}
	return true
}
