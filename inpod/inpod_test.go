package inpod

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

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

var env = []string{"PATH=/usr/bin:/bin"}

func TestExecStreamsAndExitCodes(t *testing.T) {
	var out bytes.Buffer
	res, err := Exec(context.Background(), local, "helper", &sandbox.Cmd{
		Argv: []string{"sh", "-c", "echo out; echo err >&2; cat; pwd >&3; exit 7"}, Env: env, Dir: "/tmp",
		Stdin: strings.NewReader("fed\n"), Stdout: &out, Stderr: &out, Fd3: &bytes.Buffer{},
	})
	if err != nil || res.ExitCode != 7 {
		t.Fatalf("res %+v err %v", res, err)
	}
	if out.String() != "out\nerr\nfed\n" {
		t.Fatalf("output %q", out.String())
	}
	res, err = Exec(context.Background(), local, "helper", &sandbox.Cmd{Argv: []string{"no-such-program"}, Env: env, Stderr: &out})
	if err != nil || res.ExitCode != 127 {
		t.Fatalf("missing program: %+v %v", res, err)
	}
}

func TestTimeoutKillsTheTree(t *testing.T) {
	marker := "sbx-inpod-test-" + time.Now().Format("150405.000000")
	start := time.Now()
	res, err := Exec(context.Background(), local, "helper", &sandbox.Cmd{
		Argv: []string{"bash", "-c", "setsid bash -c 'exec -a " + marker + " sleep 300' & (exec -a " + marker + " sleep 300) & wait"},
		Env:  env, Timeout: 500 * time.Millisecond,
	})
	if err != nil || !res.TimedOut || res.ExitCode != 124 {
		t.Fatalf("res %+v err %v", res, err)
	}
	if time.Since(start) > 10*time.Second {
		t.Fatal("timeout too slow")
	}
	time.Sleep(100 * time.Millisecond)
	dirs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, d := range dirs {
		if b, _ := os.ReadFile(d); strings.Contains(string(b), marker) {
			t.Fatalf("survivor: %s", d)
		}
	}
}

func TestCancelKillsTheCommand(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(300 * time.Millisecond); cancel() }()
	start := time.Now()
	_, err := Exec(ctx, local, "helper", &sandbox.Cmd{Argv: []string{"sleep", "60"}, Env: env})
	if err == nil || time.Since(start) > 10*time.Second {
		t.Fatalf("cancel: %v after %s", err, time.Since(start))
	}
}

func TestSyncRoundTripThroughTheHelper(t *testing.T) {
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
	res, err := Exec(context.Background(), local, "helper", &sandbox.Cmd{
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
}
