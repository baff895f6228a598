package inpod

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/sbx-sh/sbx/internal/testtree"
	"github.com/sbx-sh/sbx/sandbox"
	sbxsync "github.com/sbx-sh/sbx/sync"
)

// msgCounter runs the helper like local, counting the reads it takes
// from the exec's stdin and the writes the helper's stdout makes: over a
// Kubernetes exec each of them is a message of its own through the mux, the
// kubelet and the API server, so a sync of many small files must not cost
// one per tar block.
type msgCounter struct {
	reads, writes, in, out atomic.Int64
}

type msgCountReader struct {
	r io.Reader
	c *msgCounter
}

func (r msgCountReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if n > 0 {
		r.c.reads.Add(1)
		r.c.in.Add(int64(n))
	}
	return n, err
}

type msgCountWriter struct {
	w io.Writer
	c *msgCounter
}

func (w msgCountWriter) Write(p []byte) (int, error) {
	w.c.writes.Add(1)
	w.c.out.Add(int64(len(p)))
	return w.w.Write(p)
}

func (c *msgCounter) run(ctx context.Context, argv []string, stdin io.Reader, stdout io.Writer) error {
	// Each Read of a pipe returns at most one Write's bytes: the reads
	// counted here are the client's writes onto the exec's stdin.
	in := io.Reader(nil)
	if stdin != nil {
		in = msgCountReader{stdin, c}
	}
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		// The helper's output through a pipe, one Write per helper write,
		// like an exec's stdout stream.
		done <- local(ctx, argv, in, pw)
		pw.Close()
	}()
	buf := make([]byte, 1<<20)
	for {
		n, err := pr.Read(buf)
		if n > 0 {
			if _, werr := (msgCountWriter{stdout, c}).Write(buf[:n]); werr != nil {
				pr.CloseWithError(werr)
			}
		}
		if err != nil {
			break
		}
	}
	return <-done
}

// TestSyncWritesAreCoalesced pushes 2000 small files into the helper and
// pulls 2000 new ones back, and counts the exec's messages both ways: they
// must come in buffers of tens of kilobytes, not one per tar header and
// block (about five per file, which cost 1 ms each through a cluster).
func TestSyncWritesAreCoalesced(t *testing.T) {
	const n = 2000
	host, box, state := t.TempDir(), t.TempDir(), t.TempDir()
	for i := 0; i < n; i++ {
		d := filepath.Join(host, fmt.Sprintf("d%02d", i/100))
		os.MkdirAll(d, 0o755)
		os.WriteFile(filepath.Join(d, fmt.Sprintf("f%04d", i)), []byte(fmt.Sprintf("file %d\n", i)), 0o644)
	}
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
	var c msgCounter
	res, err := Exec(context.Background(), c.run, "helper", &sandbox.Cmd{
		Argv: []string{"sh", "-c", "mkdir new && for d in d*; do cp -r $d new/; done"}, Env: env, Dir: box,
		Sync: &sandbox.SyncIO{Request: raw, Push: pushR, Pull: pullW},
	})
	pullW.Close()
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("res %+v err %v", res, err)
	}
	if err := <-pulled; err != nil {
		t.Fatal(err)
	}
	var reply sbxsync.HelperReply
	json.Unmarshal(res.SyncReply, &reply)
	if _, err := r.Finish(reply); err != nil {
		t.Fatal(err)
	}
	if got := testtree.RegularFiles(filepath.Join(host, "new")); got != n {
		t.Fatalf("%d of %d files came back", got, n)
	}
	// Full 32 KiB buffers (os/exec's copy size) and a few partial ones.
	maxReads := c.in.Load()/(32<<10) + 8
	maxWrites := c.out.Load()/(32<<10) + 8
	t.Logf("push: %d bytes in %d reads; pull: %d bytes in %d writes", c.in.Load(), c.reads.Load(), c.out.Load(), c.writes.Load())
	if c.reads.Load() > maxReads {
		t.Errorf("the push of %d files took %d writes onto the exec's stdin (%d bytes), want at most %d", n, c.reads.Load(), c.in.Load(), maxReads)
	}
	if c.writes.Load() > maxWrites {
		t.Errorf("the pull of %d files took %d writes from the helper's stdout (%d bytes), want at most %d", n, c.writes.Load(), c.out.Load(), maxWrites)
	}
}
