package inpod

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/sbx-sh/sbx/sandbox"
)

// StreamFunc runs argv in the sandbox with stdin and stdout attached (a raw
// exec, e.g. a Kubernetes exec), returning when the program ends.
type StreamFunc func(ctx context.Context, argv []string, stdin io.Reader, stdout io.Writer) error

// Exec runs cmd through the helper at helperPath, as one exec: the sync's
// push and the command's stdin go in on stdin; the command's output, the
// pull and how it ended come back as frames. Cancelling ctx kills the
// command's tree in the sandbox through a second exec (the first one's stream
// may be stuck), then ends the stream.
func Exec(ctx context.Context, run StreamFunc, helperPath string, cmd *sandbox.Cmd) (sandbox.Result, error) {
	start := time.Now()
	var idb [8]byte
	rand.Read(idb[:])
	h := Header{Version: Version, ID: hex.EncodeToString(idb[:]), Argv: cmd.Argv, Env: cmd.Env, Dir: cmd.Dir, DirFallback: cmd.DirFallback,
		TimeoutMS: cmd.Timeout.Milliseconds(), Stdin: cmd.Stdin != nil, Fd3: cmd.Fd3 != nil,
		Fd4: cmd.Fd4, Fallback: cmd.Fallback}
	if len(cmd.Fd4) > sandbox.MaxFd4 {
		return sandbox.Result{}, fmt.Errorf("exec: fd 4 of %d bytes is over its bound of %d", len(cmd.Fd4), sandbox.MaxFd4)
	}
	if cmd.Stdout != nil && cmd.Stdout == cmd.Stderr {
		h.StderrToStdout = true
	}
	if cmd.Sync != nil {
		h.Sync = cmd.Sync.Request
	}
	line, err := json.Marshal(h)
	if err != nil {
		return sandbox.Result{}, err
	}
	inR, inW := io.Pipe()
	go func() {
		_, err := inW.Write(append(line, '\n'))
		if err == nil && cmd.Sync != nil {
			// The push is a tar stream of small writes (about six per
			// file); unbuffered, each would be a message of its own
			// through the mux, the kubelet and the API server.
			bw := bufio.NewWriterSize(inW, 64<<10)
			if _, err = io.Copy(bw, cmd.Sync.Push); err == nil {
				err = bw.Flush()
			}
		}
		if err == nil && cmd.Stdin != nil {
			_, err = io.Copy(inW, cmd.Stdin)
		}
		inW.CloseWithError(err)
	}()
	outR, outW := io.Pipe()
	type result struct {
		e   Exit
		err error
	}
	frames := make(chan result, 1)
	go func() {
		var pull io.Writer
		if cmd.Sync != nil {
			pull = cmd.Sync.Pull
		}
		var fd3 io.Writer
		if cmd.Fd3 != nil {
			// The helper caps fd 3 too, but it runs in the sandbox.
			fd3 = sandbox.Fd3Writer(cmd.Fd3)
		}
		e, err := readFrames(outR, orDiscard(cmd.Stdout), orDiscard(cmd.Stderr), fd3, pull)
		// Nothing follows the exit frame, and after a refused frame the
		// pod's stream is not read on (a drain would read it as long as
		// the pod writes): the stream's further writes fail.
		outR.Close()
		frames <- result{e, err}
	}()
	sctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stop := context.AfterFunc(ctx, func() {
		kctx, kcancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer kcancel()
		run(kctx, []string{helperPath, "__inpod", "kill", h.ID}, nil, io.Discard)
		cancel()
	})
	defer stop()
	serr := run(sctx, []string{helperPath, "__inpod", "serve"}, inR, outW)
	outW.Close()
	inR.Close()
	r := <-frames
	res := sandbox.Result{ExitCode: r.e.ExitCode, TimedOut: r.e.TimedOut, Signal: r.e.Signal, Duration: time.Since(start), SyncReply: r.e.SyncReply, FellBack: r.e.FellBack}
	switch {
	case r.err == nil && r.e.Error != "" && !r.e.Started:
		if r.e.ExitCode == 126 || r.e.ExitCode == 127 {
			if cmd.Stderr != nil {
				fmt.Fprintf(cmd.Stderr, "sbx: %s\n", r.e.Error)
			}
			return res, nil
		}
		return res, fmt.Errorf("sandbox refused the command: %s", r.e.Error)
	case r.err == nil:
		if ctx.Err() != nil && !res.TimedOut {
			return res, ctx.Err()
		}
		return res, nil
	case ctx.Err() != nil:
		return res, ctx.Err()
	case serr != nil && !errors.Is(serr, io.ErrClosedPipe):
		return res, fmt.Errorf("%w: exec stream: %v", sandbox.ErrLost, serr)
	}
	// The stream broke on a frame the host refused (its end was closed
	// then): the refusal is the reason.
	return res, fmt.Errorf("%w: %v", sandbox.ErrLost, r.err)
}

func orDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}
