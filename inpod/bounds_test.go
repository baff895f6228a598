package inpod

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sbx-sh/sbx/sandbox"
)

// hostile is a StreamFunc standing for a pod that sends what it likes: it
// ignores the request and writes frames of its choosing.
func hostile(frames func(w io.Writer) error) StreamFunc {
	return func(ctx context.Context, argv []string, stdin io.Reader, stdout io.Writer) error {
		if stdin != nil {
			go io.Copy(io.Discard, stdin)
		}
		if len(argv) > 2 && argv[2] == "kill" {
			return nil
		}
		return frames(stdout)
	}
}

func writeFrame(w io.Writer, typ byte, p []byte) error {
	var hdr [5]byte
	hdr[0] = typ
	binary.BigEndian.PutUint32(hdr[1:], uint32(len(p)))
	if _, err := w.Write(hdr[:]); err != nil {
		return err
	}
	_, err := w.Write(p)
	return err
}

// The host keeps at most the fd 3 bound of what a pod sends as fd 3, even
// when the pod's helper is not the one sbx uploaded.
func TestHostCapsFd3Frames(t *testing.T) {
	run := hostile(func(w io.Writer) error {
		chunk := bytes.Repeat([]byte{'/'}, maxFrame)
		for range 32 {
			if err := writeFrame(w, frameFd3, chunk); err != nil {
				return err
			}
		}
		raw, _ := json.Marshal(Exit{Started: true})
		return writeFrame(w, frameExit, raw)
	})
	var fd3 bytes.Buffer
	res, err := Exec(context.Background(), run, "helper", &sandbox.Cmd{Argv: []string{"true"}, Fd3: &fd3})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("res %+v, err %v", res, err)
	}
	if fd3.Len() != sandbox.MaxFd3+1 {
		t.Fatalf("the host kept %d bytes of fd 3, want the bound %d", fd3.Len(), sandbox.MaxFd3+1)
	}
}

// countingStream counts what crosses from the helper to the host.
func countingStream(run StreamFunc, n *atomic.Int64) StreamFunc {
	return func(ctx context.Context, argv []string, stdin io.Reader, stdout io.Writer) error {
		return run(ctx, argv, stdin, writerFunc(func(p []byte) (int, error) {
			n.Add(int64(len(p)))
			return stdout.Write(p)
		}))
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// The real helper sends no more of fd 3 than the bound: a command flooding
// it does not flood the exec stream.
func TestHelperCapsFd3(t *testing.T) {
	var n atomic.Int64
	var fd3 bytes.Buffer
	res, err := Exec(context.Background(), countingStream(local, &n), "helper", &sandbox.Cmd{
		Argv: []string{"sh", "-c", "head -c 100000000 /dev/zero >&3; echo ok"}, Env: env, Dir: "/",
		Stdout: io.Discard, Fd3: &fd3,
	})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("res %+v, err %v", res, err)
	}
	if fd3.Len() != sandbox.MaxFd3+1 {
		t.Fatalf("fd 3 of %d bytes, want %d", fd3.Len(), sandbox.MaxFd3+1)
	}
	if got := n.Load(); got > 64<<10 {
		t.Fatalf("%d bytes crossed the exec stream for a 100 MB flood of fd 3", got)
	}
}

// A pod whose greeting never ends is no helper, and the host reads no more
// than a line's bound of it.
func TestMuxGreetingBounded(t *testing.T) {
	var n atomic.Int64
	run := countingStream(hostile(func(w io.Writer) error {
		chunk := bytes.Repeat([]byte{'x'}, 64<<10)
		for range 16 << 10 { // 1 GiB, unless the host stops reading
			if _, err := w.Write(chunk); err != nil {
				return err
			}
		}
		return nil
	}), &n)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := StartMux(ctx, run, "helper", "")
	if !errors.Is(err, ErrNoHelper) || !strings.Contains(err.Error(), "xxxx") {
		t.Fatalf("err %v, want ErrNoHelper", err)
	}
	if got := n.Load(); got > 1<<20 {
		t.Fatalf("the host read %d bytes of an endless greeting", got)
	}
}

// A frame over maxFrame is refused by its header, before anything of it is
// read or held.
func TestHostRefusesOversizedFrame(t *testing.T) {
	var n atomic.Int64
	run := countingStream(hostile(func(w io.Writer) error {
		var hdr [5]byte
		hdr[0] = frameStdout
		binary.BigEndian.PutUint32(hdr[1:], 1<<31)
		if _, err := w.Write(hdr[:]); err != nil {
			return err
		}
		chunk := make([]byte, 64<<10)
		for range 1 << 10 { // 64 MiB, unless the host stops reading
			if _, err := w.Write(chunk); err != nil {
				return err
			}
		}
		return nil
	}), &n)
	_, err := Exec(context.Background(), run, "helper", &sandbox.Cmd{Argv: []string{"true"}, Stdout: io.Discard})
	if !errors.Is(err, sandbox.ErrLost) || !strings.Contains(err.Error(), "a frame of 2147483648 bytes") {
		t.Fatalf("err %v, want the sandbox lost for an oversized frame", err)
	}
	if got := n.Load(); got > 1<<20 {
		t.Fatalf("the host read %d bytes after refusing the frame", got)
	}
}
