// Package inpod is the sandbox side of a remote backend's exec: the program
// (sbx itself, uploaded once per claim) that runs one command per exec as a
// round trip of the code sync, and the host side that speaks to it over a
// plain exec stream (stdin in, stdout out), such as a Kubernetes exec.
//
// One exec carries everything: on stdin a JSON header line, the host's push
// (one sync patch per code dir), then the command's own stdin; on stdout
// length-prefixed frames: the command's stdout, stderr and fd 3 as they are
// produced, then the sandbox's pull and the exit frame. The helper makes
// itself a child subreaper and runs the command in a process group of its
// own, so that a timeout kills the command's whole tree, children that called
// setsid included (they are re-parented to the helper, which finds them).
package inpod

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
)

// Version is checked by the host against the uploaded helper.
const Version = "sbx-inpod/2"

// Header is the first line the host sends.
type Header struct {
	Version        string          `json:"version"`
	ID             string          `json:"id"` // names the helper's pid file, for a kill from another exec
	Argv           []string        `json:"argv"`
	Env            []string        `json:"env"`
	Dir            string          `json:"dir"`
	DirFallback    string          `json:"dir_fallback,omitempty"` // sandbox.Cmd.DirFallback
	TimeoutMS      int64           `json:"timeout_ms,omitempty"`
	Stdin          bool            `json:"stdin,omitempty"`
	Fd3            bool            `json:"fd3,omitempty"`
	StderrToStdout bool            `json:"stderr_to_stdout,omitempty"`
	Sync           json.RawMessage `json:"sync,omitempty"`
	// Fd4 and Fallback are sandbox.Cmd's (the shell wrapper's script on
	// fd 4, and the command for an image without bash).
	Fd4      []byte   `json:"fd4,omitempty"`
	Fallback []string `json:"fallback,omitempty"`
}

// Exit is the last frame.
type Exit struct {
	ExitCode  int             `json:"exit_code"`
	TimedOut  bool            `json:"timed_out,omitempty"`
	Signal    string          `json:"signal,omitempty"`
	Started   bool            `json:"started"`
	Error     string          `json:"error,omitempty"`
	SyncReply json.RawMessage `json:"sync_reply,omitempty"`
	FellBack  bool            `json:"fell_back,omitempty"` // sandbox.Result.FellBack
}

// Frame types.
const (
	frameStdout = 'o'
	frameStderr = 'e'
	frameFd3    = '3'
	framePull   = 'p'
	frameExit   = 'x'
)

const maxFrame = 1 << 20

// frameWriter writes frames; it is safe for concurrent use.
type frameWriter struct {
	mu sync.Mutex
	w  *bufio.Writer
}

func newFrameWriter(w io.Writer) *frameWriter { return &frameWriter{w: bufio.NewWriterSize(w, 64<<10)} }

func (f *frameWriter) frame(typ byte, p []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for len(p) > 0 || typ == frameExit {
		n := min(len(p), maxFrame)
		var hdr [5]byte
		hdr[0] = typ
		binary.BigEndian.PutUint32(hdr[1:], uint32(n))
		if _, err := f.w.Write(hdr[:]); err != nil {
			return err
		}
		if _, err := f.w.Write(p[:n]); err != nil {
			return err
		}
		p = p[n:]
		if typ == frameExit {
			break
		}
	}
	// Output is flushed as it comes, so it streams live. The pull is not:
	// it is a tar stream of small writes that only the command's end (the
	// exit frame, which flushes) completes, and each flush is a message of
	// its own through the exec; it goes in full buffers.
	if typ == framePull {
		return nil
	}
	return f.w.Flush()
}

// stream is an io.Writer sending frames of one type.
type stream struct {
	fw  *frameWriter
	typ byte
}

func (s stream) Write(p []byte) (int, error) {
	if err := s.fw.frame(s.typ, p); err != nil {
		return 0, err
	}
	return len(p), nil
}

// readFrames demultiplexes the helper's output until the exit frame.
func readFrames(r io.Reader, stdout, stderr, fd3, pull io.Writer) (Exit, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	var hdr [5]byte
	buf := make([]byte, maxFrame)
	for {
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return Exit{}, fmt.Errorf("read from the sandbox helper: %w", err)
		}
		n := binary.BigEndian.Uint32(hdr[1:])
		if n > maxFrame {
			return Exit{}, fmt.Errorf("sandbox helper sent a frame of %d bytes", n)
		}
		p := buf[:n]
		if _, err := io.ReadFull(br, p); err != nil {
			return Exit{}, fmt.Errorf("read from the sandbox helper: %w", err)
		}
		var w io.Writer
		switch hdr[0] {
		case frameStdout:
			w = stdout
		case frameStderr:
			w = stderr
		case frameFd3:
			w = fd3
		case framePull:
			w = pull
		case frameExit:
			var e Exit
			if err := json.Unmarshal(p, &e); err != nil {
				return Exit{}, fmt.Errorf("bad exit frame from the sandbox helper: %w", err)
			}
			return e, nil
		default:
			return Exit{}, fmt.Errorf("sandbox helper sent a frame of unknown type %q", hdr[0])
		}
		if w != nil {
			if _, err := w.Write(p); err != nil && hdr[0] == framePull {
				// The host refused the pull (over the disk limit, say): the
				// rest of it is discarded, and the exit frame still read,
				// since the sandbox is fine.
				pull = nil
			}
		}
	}
}
