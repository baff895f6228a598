package inpod

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sbx-sh/sbx/internal/testenv"
	"github.com/sbx-sh/sbx/sandbox"
)

func startMux(t *testing.T) *MuxClient {
	t.Helper()
	m, err := StartMux(context.Background(), localStream, "helper", SelfHash())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func TestMuxRefusesWhatIsNoHelper(t *testing.T) {
	for name, run := range map[string]StreamFunc{
		"another program": func(ctx context.Context, argv []string, stdin io.Reader, stdout io.Writer) error {
			return exec.CommandContext(ctx, "sh", "-c", "echo sbx-inpod/0 mux").Run()
		},
		"other output": func(ctx context.Context, argv []string, stdin io.Reader, stdout io.Writer) error {
			cmd := exec.CommandContext(ctx, "sh", "-c", "echo sbx-inpod/0 mux; sleep 1")
			cmd.Stdout = stdout
			return cmd.Run()
		},
		"missing binary": func(ctx context.Context, argv []string, stdin io.Reader, stdout io.Writer) error {
			cmd := exec.CommandContext(ctx, "/nonexistent/sbx", argv[1:]...)
			cmd.Stdout = stdout
			return cmd.Run()
		},
	} {
		t.Run(name, func(t *testing.T) {
			m, err := StartMux(context.Background(), run, "helper", "")
			if !errors.Is(err, ErrNoHelper) {
				if m != nil {
					m.Close()
				}
				t.Fatalf("err = %v, want ErrNoHelper", err)
			}
		})
	}
}

func TestMuxWantsTheSameBuild(t *testing.T) {
	if _, err := StartMux(context.Background(), localStream, "helper", strings.Repeat("0", 64)); !errors.Is(err, ErrNoHelper) {
		t.Fatalf("a helper of another build: err = %v, want ErrNoHelper", err)
	}
	m, err := StartMux(context.Background(), localStream, "helper", "")
	if err != nil {
		t.Fatalf("any build of this protocol: %v", err)
	}
	m.Close()
	if len(SelfHash()) != 64 {
		t.Fatalf("SelfHash = %q", SelfHash())
	}
}

func TestMuxRunsOnlyHelperCalls(t *testing.T) {
	m := startMux(t)
	var out bytes.Buffer
	err := m.Run(context.Background(), []string{"helper", "__inpod", "sh -c id"}, nil, &out)
	if err != nil || !strings.Contains(out.String(), "unknown request") {
		t.Fatalf("err %v out %q", err, out.String())
	}
	if err := m.Run(context.Background(), []string{"sh", "-c", "id"}, nil, &out); err == nil {
		t.Fatal("a call that is not the helper's was accepted")
	}
	out.Reset()
	if err := m.Run(context.Background(), []string{"helper", "__inpod", "version"}, nil, &out); err != nil || out.String() != Version+" "+SelfHash()+"\n" {
		t.Fatalf("version: %v %q", err, out.String())
	}
}

// blockingWriter takes nothing until released; blocked is closed once a
// write waits.
type blockingWriter struct {
	release, blocked chan struct{}
	once             *sync.Once
}

func (b blockingWriter) Write(p []byte) (int, error) {
	b.once.Do(func() { close(b.blocked) })
	<-b.release
	return len(p), nil
}

func TestMuxStreamsAreIndependent(t *testing.T) {
	m := startMux(t)
	// One command floods a consumer that takes nothing; others on the same
	// exec still run and finish.
	stuck := blockingWriter{release: make(chan struct{}), blocked: make(chan struct{}), once: new(sync.Once)}
	floodDone := make(chan error, 1)
	go func() {
		res, err := Exec(context.Background(), m.Run, "helper", &sandbox.Cmd{
			Argv: []string{"sh", "-c", "head -c 20000000 /dev/zero"}, Env: env, Stdout: stuck})
		if err == nil && res.ExitCode != 0 {
			err = fmt.Errorf("flood: %+v", res)
		}
		floodDone <- err
	}()
	// The flood's output is stuck in the consumer before the others start.
	select {
	case <-stuck.blocked:
	case err := <-floodDone:
		t.Fatalf("the flood ended before it blocked: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("the flood's first output never reached its consumer")
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	start := time.Now()
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var out bytes.Buffer
			res, err := Exec(context.Background(), m.Run, "helper", &sandbox.Cmd{
				Argv: []string{"sh", "-c", fmt.Sprintf("sleep 0.5; echo %d", i)}, Env: env, Stdout: &out})
			if err == nil && (res.ExitCode != 0 || out.String() != fmt.Sprintf("%d\n", i)) {
				err = fmt.Errorf("command %d: %+v %q", i, res, out.String())
			}
			errs <- err
		}()
	}
	allDone := make(chan struct{})
	go func() { wg.Wait(); close(allDone) }()
	select {
	case <-allDone:
	case <-time.After(30 * time.Second):
		close(stuck.release)
		t.Fatal("commands on the mux were held up by the flood for 30s")
	}
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	// Eight half-second commands ran side by side.
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("8 concurrent commands took %s", d)
	}
	close(stuck.release)
	if err := <-floodDone; err != nil {
		t.Fatal(err)
	}
}

func TestMuxEndKillsWhatRuns(t *testing.T) {
	m, err := StartMux(context.Background(), localStream, "helper", SelfHash())
	if err != nil {
		t.Fatal(err)
	}
	marker := "sbx-mux-test-" + time.Now().Format("150405.000000")
	done := make(chan error, 1)
	go func() {
		_, err := Exec(context.Background(), m.Run, "helper", &sandbox.Cmd{
			Argv: []string{"bash", "-c", "(exec -a " + marker + " sleep 300) & wait"}, Env: env})
		done <- err
	}()
	deadline := time.Now().Add(5 * time.Second)
	for !running(marker) {
		if time.Now().After(deadline) {
			t.Fatal("the command never started")
		}
		time.Sleep(20 * time.Millisecond)
	}
	m.Close()
	if err := <-done; !errors.Is(err, sandbox.ErrLost) {
		t.Fatalf("a command on a mux that ended: err = %v, want ErrLost", err)
	}
	deadline = time.Now().Add(5 * time.Second)
	for running(marker) {
		if time.Now().After(deadline) {
			t.Fatal("the command outlived the mux")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !m.Closed() {
		t.Fatal("Closed() = false after Close")
	}
}

func running(marker string) bool {
	dirs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, d := range dirs {
		if b, _ := os.ReadFile(d); strings.Contains(string(b), marker) {
			return true
		}
	}
	return false
}

func TestRelayStatusAndRefusals(t *testing.T) {
	m := startMux(t)
	path := filepath.Join(t.TempDir(), "relay.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var gone atomic.Value
	gone.Store("")
	var calls atomic.Int32
	go ServeRelay(ln, RelayHooks{
		Mux:    func(context.Context) (*MuxClient, error) { return m, nil },
		Gone:   func() string { return gone.Load().(string) },
		Called: func() func() { calls.Add(1); return func() {} },
	})
	if why, err := RelayStatus(path, time.Second); err != nil || why != "" {
		t.Fatalf("status: %q %v", why, err)
	}
	var out bytes.Buffer
	if err := RelayRun(path)(context.Background(), []string{"helper", "__inpod", "version"}, nil, &out); err != nil || out.String() != Version+" "+SelfHash()+"\n" {
		t.Fatalf("version through the relay: %v %q", err, out.String())
	}
	// Only helper calls pass; anything else ends the connection unanswered.
	for _, line := range []string{"call sh -c id", "exec id", "call kill ../x"} {
		c, err := net.Dial("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "%s\n", line)
		c.(*net.UnixConn).CloseWrite()
		b, _ := io.ReadAll(c)
		c.Close()
		if len(b) != 0 {
			t.Fatalf("%q answered %q", line, b)
		}
	}
	if calls.Load() != 1 {
		t.Fatalf("Called ran %d times, want 1", calls.Load())
	}
	gone.Store("pod p was deleted")
	if why, err := RelayStatus(path, time.Second); err != nil || why != "pod p was deleted" {
		t.Fatalf("status when gone: %q %v", why, err)
	}
	if _, err := RelayStatus(filepath.Join(t.TempDir(), "none.sock"), time.Second); err == nil {
		t.Fatal("status of no relay succeeded")
	}
}

func TestMuxStartGivesUpOnASilentExec(t *testing.T) {
	defer func(d time.Duration) { greetTimeout = d }(greetTimeout)
	greetTimeout = 300 * time.Millisecond
	silent := func(ctx context.Context, argv []string, stdin io.Reader, stdout io.Writer) error {
		<-ctx.Done() // an exec that started and never runs the helper
		return ctx.Err()
	}
	start := time.Now()
	_, err := StartMux(context.Background(), silent, "helper", "")
	if err == nil || errors.Is(err, ErrNoHelper) || !strings.Contains(err.Error(), "did not answer") || time.Since(start) > 5*time.Second {
		t.Fatalf("err = %v after %s", err, time.Since(start))
	}
}

// timedWriter records when the first byte arrived.
type timedWriter struct {
	mu    sync.Mutex
	first time.Time
	buf   bytes.Buffer
}

func (w *timedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.first.IsZero() {
		w.first = time.Now()
	}
	return w.buf.Write(p)
}

// Output streams as it is written (within the frame writer's short delay),
// not when the command ends.
func TestOutputStreamsLive(t *testing.T) {
	transports(t, func(t *testing.T, run StreamFunc) {
		var w timedWriter
		start := time.Now()
		res, err := Exec(context.Background(), run, "helper", &sandbox.Cmd{
			Argv: []string{"sh", "-c", "echo first; sleep 1; echo second"}, Env: env, Stdout: &w})
		if err != nil || res.ExitCode != 0 || w.buf.String() != "first\nsecond\n" {
			t.Fatalf("%+v %v %q", res, err, w.buf.String())
		}
		if d := w.first.Sub(start); d > 700*time.Millisecond {
			t.Fatalf("the first line arrived after %s, with the command's end", d)
		}
	})
}

// TestMuxDial: a connection to a port on the sandbox's loopback goes through
// the helper (the pod's own network stack, gVisor's included), both ways,
// with a half-close; a port nothing listens on is the helper's error.
func TestMuxDial(t *testing.T) {
	m := startMux(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				got, _ := io.ReadAll(c) // until the host's half-close
				fmt.Fprintf(c, "got:%s", got)
			}()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	for i := range 3 { // streams of their own, one after another and at once
		c, err := m.Dial(context.Background(), port)
		if err != nil {
			t.Fatal(err)
		}
		msg := fmt.Sprintf("hello %d", i)
		io.WriteString(c, msg)
		c.(interface{ CloseWrite() error }).CloseWrite()
		c.SetReadDeadline(time.Now().Add(20 * time.Second))
		back, err := io.ReadAll(c)
		c.Close()
		if err != nil || string(back) != "got:"+msg {
			t.Fatalf("through the helper: %q, %v; want %q", back, err, "got:"+msg)
		}
	}
	ln2, _ := net.Listen("tcp", "127.0.0.1:0")
	closed := ln2.Addr().(*net.TCPAddr).Port
	ln2.Close()
	if _, err := m.Dial(context.Background(), closed); err == nil || !strings.Contains(err.Error(), "refused") {
		t.Errorf("dial of a port nothing listens on: %v; want the helper's connection refused", err)
	}
	if _, err := m.Dial(context.Background(), 0); err == nil {
		t.Error("port 0 was dialled")
	}
	// The mux still serves helper calls after all of it.
	var out bytes.Buffer
	if res, err := Exec(context.Background(), m.Run, "helper", &sandbox.Cmd{Argv: []string{"sh", "-c", "echo ok"}, Env: env, Stdout: &out}); err != nil || res.ExitCode != 0 || out.String() != "ok\n" {
		t.Fatalf("a command after the dials: %+v %v %q", res, err, out.String())
	}
}

// procChildren lists the pids whose parent is ppid and whose arguments,
// after the program, are args.
func procChildren(ppid int, args ...string) []int {
	var pids []int
	for _, p := range testenv.Children(ppid) {
		if slices.Equal(p.Argv[1:], args) {
			pids = append(pids, p.Pid)
		}
	}
	return pids
}

// waitFor waits for cond, 10 s at most, and fails the test with what if it
// never held.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	if !testenv.WaitFor(10*time.Second, cond) {
		t.Fatalf("after 10 s: %s", what)
	}
}

// The mux starts a "serve" child before any call and hands the next call
// to it (a program start is most of a call's cost in a pod); the call takes
// it, a new one is started, and none outlives the mux.
func TestMuxServesFromASpare(t *testing.T) {
	m, err := StartMux(context.Background(), localStream, "helper", SelfHash())
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	var mux []int
	waitFor(t, "no mux process", func() bool { mux = procChildren(os.Getpid(), "__inpod", "mux"); return len(mux) == 1 })
	var spare []int
	waitFor(t, "the mux started no serve child before its first call", func() bool {
		spare = procChildren(mux[0], "__inpod", "serve")
		return len(spare) == 1
	})
	var out bytes.Buffer
	r, err := Exec(context.Background(), m.Run, "helper", &sandbox.Cmd{Argv: []string{"sh", "-c", "echo $PPID"}, Env: env, Stdout: &out})
	if err != nil || r.ExitCode != 0 {
		t.Fatalf("exec: %v %+v", err, r)
	}
	if got := strings.TrimSpace(out.String()); got != fmt.Sprint(spare[0]) {
		t.Errorf("the command's parent is %s, want the spare %d", got, spare[0])
	}
	waitFor(t, "no new spare after the call took one", func() bool {
		s := procChildren(mux[0], "__inpod", "serve")
		return len(s) == 1 && s[0] != spare[0]
	})
	next := procChildren(mux[0], "__inpod", "serve")
	m.Close()
	waitFor(t, "the spare outlived the mux", func() bool {
		st := testenv.State(next[0])
		return st == "" || st == "Z"
	})
}

// A spare that died while it waited (the OOM killer, or the sandbox's own
// commands) is not given the call: the call starts a child of its own.
func TestMuxSpareKilledWhileWaiting(t *testing.T) {
	m, err := StartMux(context.Background(), localStream, "helper", SelfHash())
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	var mux, spare []int
	waitFor(t, "no mux process", func() bool { mux = procChildren(os.Getpid(), "__inpod", "mux"); return len(mux) == 1 })
	waitFor(t, "no spare", func() bool { spare = procChildren(mux[0], "__inpod", "serve"); return len(spare) == 1 })
	if err := syscall.Kill(spare[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the killed spare did not exit", func() bool {
		st := testenv.State(spare[0])
		return st == "" || st == "Z"
	})
	var out bytes.Buffer
	r, err := Exec(context.Background(), m.Run, "helper", &sandbox.Cmd{Argv: []string{"sh", "-c", "echo $PPID"}, Env: env, Stdout: &out})
	if err != nil || r.ExitCode != 0 {
		t.Fatalf("a call after the spare was killed: %v %+v", err, r)
	}
	if got := strings.TrimSpace(out.String()); got == fmt.Sprint(spare[0]) || got == "" {
		t.Errorf("the command's parent is %q: want a new child, not the dead spare %d", got, spare[0])
	}
}
