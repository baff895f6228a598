package inpod

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sbx-sh/sbx/internal/testenv"
	"github.com/sbx-sh/sbx/sandbox"
	sbxsync "github.com/sbx-sh/sbx/sync"
)

func TestMain(m *testing.M) {
	Main()
	os.Exit(m.Run())
}

// local runs the helper as a local process: this test binary, which Main
// turns into the helper.
func local(ctx context.Context, argv []string, stdin io.Reader, stdout io.Writer) error {
	cmd := exec.CommandContext(ctx, os.Args[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, os.Stderr
	return cmd.Run()
}

// localStream runs the helper as a local process the way a Kubernetes exec
// runs it in a pod: when ctx ends (the stream broke) the process is not
// killed, its input just ends.
func localStream(ctx context.Context, argv []string, stdin io.Reader, stdout io.Writer) error {
	cmd := exec.Command(os.Args[0], argv[1:]...)
	w, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	cmd.Stdout, cmd.Stderr = stdout, os.Stderr
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Start(); err != nil {
		return err
	}
	go func() { io.Copy(w, stdin); w.Close() }()
	stop := context.AfterFunc(ctx, func() { w.Close() })
	defer stop()
	return cmd.Wait()
}

var env = []string{"PATH=/usr/bin:/bin"}

// transports runs a test over both ways of reaching the helper: one exec per
// call, and streams on one long-lived exec (the mux).
func transports(t *testing.T, f func(t *testing.T, run StreamFunc)) {
	t.Run("exec", func(t *testing.T) { f(t, local) })
	t.Run("mux", func(t *testing.T) {
		m, err := StartMux(context.Background(), localStream, "helper", SelfHash())
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		f(t, m.Run)
		if m.Closed() {
			t.Fatal("the mux ended during the test")
		}
	})
	t.Run("relay", func(t *testing.T) {
		m, err := StartMux(context.Background(), localStream, "helper", SelfHash())
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		path := filepath.Join(t.TempDir(), "relay.sock")
		ln, err := net.Listen("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		go ServeRelay(ln, RelayHooks{
			Mux:  func(context.Context) (*MuxClient, error) { return m, nil },
			Gone: func() string { return "" },
		})
		f(t, RelayRun(path))
	})
}

func TestExecStreamsAndExitCodes(t *testing.T) {
	transports(t, func(t *testing.T, run StreamFunc) {
		var out bytes.Buffer
		res, err := Exec(context.Background(), run, "helper", &sandbox.Cmd{
			Argv: []string{"sh", "-c", "echo out; echo err >&2; cat; pwd >&3; exit 7"}, Env: env, Dir: "/tmp",
			Stdin: strings.NewReader("fed\n"), Stdout: &out, Stderr: &out, Fd3: &bytes.Buffer{},
		})
		if err != nil || res.ExitCode != 7 {
			t.Fatalf("res %+v err %v", res, err)
		}
		if out.String() != "out\nerr\nfed\n" {
			t.Fatalf("output %q", out.String())
		}
		res, err = Exec(context.Background(), run, "helper", &sandbox.Cmd{Argv: []string{"no-such-program"}, Env: env, Stderr: &out})
		if err != nil || res.ExitCode != 127 {
			t.Fatalf("missing program: %+v %v", res, err)
		}
		// An empty environment stays empty (nothing of the helper's), and
		// the program is found on the default PATH, as execvp does.
		out.Reset()
		res, err = Exec(context.Background(), run, "helper", &sandbox.Cmd{Argv: []string{"env"}, Stdout: &out})
		if err != nil || res.ExitCode != 0 || out.String() != "" {
			t.Fatalf("no environment: %+v %v %q", res, err, out.String())
		}
	})
}

// TestFd4AndFallbackCarried: the helper gives the command sandbox.Cmd's
// fd 4 and runs its Fallback where Argv[0] is missing (the shell wrapper's
// script for bash, and the sh wrapper for an image without bash).
func TestFd4AndFallbackCarried(t *testing.T) {
	transports(t, func(t *testing.T, run StreamFunc) {
		var out bytes.Buffer
		res, err := Exec(context.Background(), run, "helper", &sandbox.Cmd{
			Argv: []string{"/no/such/bash", "-c", "echo primary"}, Fallback: []string{"sh", "-c", "cat <&4; echo; exit 8"},
			Env: env, Stdout: &out, Fd4: []byte("script\x00bytes"),
		})
		if err != nil || res.ExitCode != 8 || out.String() != "script\x00bytes\n" {
			t.Fatalf("fallback with fd 4: res %+v err %v stdout %q", res, err, out.String())
		}
		out.Reset()
		res, err = Exec(context.Background(), run, "helper", &sandbox.Cmd{
			Argv: []string{"/bin/sh", "-c", "cat <&4"}, Fallback: []string{"sh", "-c", "echo fallback"},
			Env: env, Stdout: &out, Fd4: []byte("four"),
		})
		if err != nil || res.ExitCode != 0 || out.String() != "four" {
			t.Fatalf("primary with fd 4: res %+v err %v stdout %q", res, err, out.String())
		}
	})
}

func TestTimeoutKillsTheTree(t *testing.T) {
	transports(t, func(t *testing.T, run StreamFunc) {
		marker := "sbx-inpod-test-" + time.Now().Format("150405.000000")
		// Both children run (the command waits until ps shows them) when
		// the timeout strikes.
		var out bytes.Buffer
		start := time.Now()
		res, err := Exec(context.Background(), run, "helper", &sandbox.Cmd{
			Argv: []string{"bash", "-c", "setsid bash -c 'exec -a " + marker + " sleep 300' >/dev/null 2>&1 & (exec -a " + marker + " sleep 300 >/dev/null 2>&1) & " +
				"until [ $(ps -eo args | grep -c '^" + marker + "') -ge 2 ]; do sleep 0.01; done; echo started; wait"},
			Env: env, Timeout: 3 * time.Second, Stdout: &out,
		})
		if err != nil || !res.TimedOut || res.ExitCode != 124 {
			t.Fatalf("res %+v err %v", res, err)
		}
		if out.String() != "started\n" {
			t.Fatalf("the children did not start before the timeout: output %q", out.String())
		}
		if time.Since(start) > 15*time.Second {
			t.Fatal("timeout too slow")
		}
		if !testenv.WaitFor(10*time.Second, func() bool { return !running(marker) }) {
			t.Fatalf("a child survived the timeout by 10s")
		}
	})
}

func TestCancelKillsTheCommand(t *testing.T) {
	transports(t, func(t *testing.T, run StreamFunc) {
		marker := "sbx-inpod-cancel-" + time.Now().Format("150405.000000")
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		// Cancelled once the command runs.
		start := time.Now()
		_, err := Exec(ctx, run, "helper", &sandbox.Cmd{Argv: []string{"bash", "-c", "echo started; exec -a " + marker + " sleep 60"}, Env: env,
			Stdout: &testenv.CancelOn{Word: "started", Cancel: cancel}})
		if err == nil || ctx.Err() == nil || time.Since(start) > 10*time.Second {
			t.Fatalf("cancel: %v (context: %v) after %s", err, ctx.Err(), time.Since(start))
		}
		if !testenv.WaitFor(10*time.Second, func() bool { return !running(marker) }) {
			t.Fatalf("the cancelled command still runs 10s later")
		}
	})
}

func TestSyncRoundTripThroughTheHelper(t *testing.T) {
	transports(t, func(t *testing.T, run StreamFunc) {
		host, box, state := t.TempDir(), t.TempDir(), t.TempDir()
		os.WriteFile(filepath.Join(host, "a"), []byte("from host"), 0o644)
		h, err := sbxsync.OpenHost(state, []sbxsync.HostDir{{Path: host}})
		if err != nil {
			t.Fatal(err)
		}
		r, _, err := h.Begin()
		if err != nil {
			t.Fatal(err)
		}
		req := r.Request
		req.StateDir, req.Dirs = t.TempDir(), []sbxsync.HelperDir{{Path: box, Reset: true}}
		raw, _ := json.Marshal(req)
		pushR, pushW := io.Pipe()
		go func() { pushW.CloseWithError(r.WritePush(pushW)) }()
		pullR, pullW := io.Pipe()
		pulled := make(chan error, 1)
		go func() { err := r.ReadPull(pullR); io.Copy(io.Discard, pullR); pulled <- err }()
		var out bytes.Buffer
		res, err := Exec(context.Background(), run, "helper", &sandbox.Cmd{
			Argv: []string{"sh", "-c", "cat a; echo made > b"}, Env: env, Dir: box, Stdout: &out,
			Sync: &sandbox.SyncIO{Request: raw, Push: pushR, Pull: pullW},
		})
		pullW.Close()
		if err != nil || res.ExitCode != 0 || out.String() != "from host" {
			t.Fatalf("res %+v err %v out %q", res, err, out.String())
		}
		if err := <-pulled; err != nil {
			t.Fatal(err)
		}
		var reply sbxsync.HelperReply
		json.Unmarshal(res.SyncReply, &reply)
		if _, err := r.Finish(reply); err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(filepath.Join(host, "b")); string(b) != "made\n" {
			t.Fatalf("pull: %q", b)
		}
	})
}
