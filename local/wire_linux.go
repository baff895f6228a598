package local

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/sbx-sh/sbx/internal/fastjson"
)

// The init and its clients speak length-prefixed JSON frames over a unix
// stream socket. A frame may carry file descriptors (SCM_RIGHTS): the client
// hands the command its stdio directly, so output is neither copied nor
// reordered by sbx.
//
// Frame: 4-byte big-endian payload length, 1 byte count of file descriptors,
// then the JSON payload. The descriptors travel with the frame's first byte.

// Bounds of the wire, on both ends (the init reads its workers, the host
// reads the init): a frame's payload (a command line is at most ARG_MAX,
// 2 MiB, anyway; a sync reply fits too), and the descriptors received and
// not yet claimed by a frame (a frame carries at most 255: its count is one
// byte). A peer past either is refused: the connection ends.
const (
	maxFrame = 8 << 20
	maxFds   = 255
)

// request is what a client asks of the init.
type request struct {
	Op string `json:"op"` // "exec", "kill", "ping", "shutdown"

	Argv []string `json:"argv,omitempty"`
	Dir  string   `json:"dir,omitempty"`
	// DirFallback is sandbox.Cmd.DirFallback.
	DirFallback string   `json:"dir_fallback,omitempty"`
	Env         []string `json:"env,omitempty"`
	TimeoutMS   int64    `json:"timeout_ms,omitempty"`
	TTY         bool     `json:"tty,omitempty"`
	// Fds says which descriptors come with an exec frame, in this order:
	// "stdin", "stdout", "stderr", "fd3". A missing stdin is /dev/null, a
	// missing stdout or stderr discards that output.
	Fds []string `json:"fds,omitempty"`
	// StderrToStdout sends stderr to the stdout descriptor, so the two
	// streams keep the order they were written in.
	StderrToStdout bool `json:"stderr_to_stdout,omitempty"`
	// Sync is the sync helper's request; the push and pull streams come as
	// the descriptors "push" and "pull".
	Sync json.RawMessage `json:"sync,omitempty"`
	// Fd3 asks for what the command writes to its fd 3, collected in the
	// sandbox (at most sandbox.MaxFd3+1 bytes) and sent back in the final
	// reply: no pipe of the host's, no copier on either side of the wire.
	Fd3 bool `json:"fd3,omitempty"`
	// Fd4 is what the command reads on its fd 4 (sandbox.Cmd.Fd4).
	Fd4 []byte `json:"fd4,omitempty"`
	// Fallback is sandbox.Cmd.Fallback.
	Fallback []string `json:"fallback,omitempty"`
	// Push is the whole push stream when it is small (at most inlineSync
	// bytes): it then comes in the frame instead of as a "push" descriptor.
	Push []byte `json:"push,omitempty"`
	// PushZeros is how many zero bytes end the push after Push (a frame
	// carries a small stream's trailing zeros as their count: trimZeros,
	// inlineStream).
	PushZeros int `json:"push_zeros,omitempty"`
	// PullPipe asks for the pull in the final reply while it stays within
	// inlineSync bytes, and past them through a pipe that the sandbox side
	// makes and sends up in a reply frame of its own (reply.PullPipe): a
	// warm command makes no pipe for its pull.
	PullPipe bool `json:"pull_pipe,omitempty"`
	// Port is the sandbox loopback port of a "dial" (port_linux.go).
	Port int `json:"port,omitempty"`
}

// reply is what the init answers.
type reply struct {
	// Started is set when the command is running, with its pid in the sandbox.
	Started bool `json:"started,omitempty"`
	Pid     int  `json:"pid,omitempty"`
	// Trimmed answers a trim: how many idle workers were stopped.
	Trimmed int `json:"trimmed,omitempty"`
	// Done is set on the final reply of an exec.
	Done     bool   `json:"done,omitempty"`
	ExitCode int    `json:"exit_code"`
	TimedOut bool   `json:"timed_out,omitempty"`
	Signal   string `json:"signal,omitempty"`
	Error    string `json:"error,omitempty"`
	// Version and Pid answer a ping.
	Version string `json:"version,omitempty"`
	// Sync is the sync helper's reply.
	Sync json.RawMessage `json:"sync,omitempty"`
	// Fd3 is what the command wrote to its fd 3, when the exec asked for it.
	Fd3 []byte `json:"fd3,omitempty"`
	// Pull is the whole pull stream when it stayed small (at most
	// inlineSync bytes): the "pull" descriptor then got nothing.
	Pull []byte `json:"pull,omitempty"`
	// PullZeros is how many zero bytes end the pull after Pull.
	PullZeros int `json:"pull_zeros,omitempty"`
	// PullPipe is set on the frame, before the final one, that carries the
	// reading end of the pull's pipe (request.PullPipe): at most one per
	// exec, only for one that asked, and a pipe (the host checks all three).
	PullPipe bool `json:"pull_pipe,omitempty"`
	// FellBack is sandbox.Result.FellBack, on the final reply.
	FellBack bool `json:"fell_back,omitempty"`

	// resend (the init's own, never on the wire) says that the worker
	// reset the connection before sending anything: it never read the
	// command, which may go to another worker.
	resend bool
}

// inlineSync bounds a push or pull carried in a frame instead of a pipe:
// a no-change round trip's streams (an empty patch per code dir) fit, a
// real change set goes through the pipe as before.
const inlineSync = 64 << 10

// A small sync stream's trailing zero bytes travel in a frame as their
// count. A patch ends with tar's two zero blocks, so a no-change round
// trip's push and pull are 1,024 zero bytes each; as base64 in the JSON of
// four frames, decoded and encoded again at each hop, they cost a warm
// command about 140 us (docs/benchmarks.md, W25).

// trimZeros splits b into what comes before its trailing zero bytes, and
// how many there are.
func trimZeros(b []byte) ([]byte, int) {
	t := bytes.TrimRight(b, "\x00")
	return t, len(b) - len(t)
}

// inlineStream is b followed by zeros zero bytes, a stream that came in a
// frame; a count below zero or a stream over inlineSync is refused.
func inlineStream(b []byte, zeros int) ([]byte, error) {
	if zeros < 0 || zeros > inlineSync || len(b)+zeros > inlineSync {
		return nil, fmt.Errorf("a stream of %d bytes and %d zeros in a frame, over the bound of %d bytes", len(b), zeros, inlineSync)
	}
	if zeros == 0 {
		return b, nil
	}
	out := make([]byte, len(b)+zeros)
	copy(out, b)
	return out, nil
}

// conn wraps a unix socket with framing and descriptor passing.
type conn struct {
	c   *net.UnixConn
	wmu sync.Mutex

	buf []byte // received but not yet consumed bytes
	fds []int  // received descriptors not yet claimed by a frame
}

func newConn(c *net.UnixConn) *conn { return &conn{c: c} }

func (c *conn) Close() error {
	for _, fd := range c.fds {
		unix.Close(fd)
	}
	c.fds = nil
	return c.c.Close()
}

// writeFrame sends v with files attached.
func (c *conn) writeFrame(v any, files ...*os.File) error {
	payload, err := fastjson.Marshal(v)
	if err != nil {
		return err
	}
	if len(payload) > maxFrame {
		return fmt.Errorf("request of %d bytes is over the %d-byte limit", len(payload), maxFrame)
	}
	if len(files) > 255 {
		return errors.New("too many descriptors")
	}
	msg := make([]byte, 5+len(payload))
	binary.BigEndian.PutUint32(msg, uint32(len(payload)))
	msg[4] = byte(len(files))
	copy(msg[5:], payload)
	var oob []byte
	if len(files) > 0 {
		fds := make([]int, len(files))
		for i, f := range files {
			fds[i] = int(f.Fd())
		}
		oob = unix.UnixRights(fds...)
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	n, _, err := c.c.WriteMsgUnix(msg, oob, nil)
	if err != nil {
		return err
	}
	if n < len(msg) {
		_, err = c.c.Write(msg[n:])
	}
	return err
}

// fillBufs are fill's read buffers, kept from frame to frame. As a local
// array the 64 KiB buffer lived on the stack: every goroutine that read a
// frame (the init's three per command, sbx's handler of each MCP call)
// first grew its stack to 128 KiB, a new stack and a copy each time.
var fillBufs = sync.Pool{New: func() any { b := make([]byte, 64<<10+unix.CmsgSpace(4*64)); return &b }}

// fill reads more bytes (and any descriptors) from the socket.
func (c *conn) fill() error {
	pb := fillBufs.Get().(*[]byte)
	defer fillBufs.Put(pb)
	b, oob := (*pb)[:64<<10], (*pb)[64<<10:]
	n, oobn, _, _, err := c.c.ReadMsgUnix(b, oob)
	n, oobn = max(n, 0), max(oobn, 0)
	if oobn > 0 {
		msgs, perr := unix.ParseSocketControlMessage(oob[:oobn])
		if perr == nil {
			for _, m := range msgs {
				fds, rerr := unix.ParseUnixRights(&m)
				if rerr == nil {
					for _, fd := range fds {
						unix.CloseOnExec(fd)
					}
					c.fds = append(c.fds, fds...)
				}
				if len(c.fds) > maxFds {
					// More than any frame could claim: the peer is hoarding
					// our descriptor table.
					for _, fd := range c.fds {
						unix.Close(fd)
					}
					c.fds = nil
					return fmt.Errorf("the peer sent more than %d descriptors ahead of its frames", maxFds)
				}
			}
		}
	}
	c.buf = append(c.buf, b[:n]...)
	if n == 0 && err == nil {
		return io.EOF
	}
	if err != nil && n > 0 {
		return nil
	}
	return err
}

// readFrame reads one frame into v and returns the descriptors it carried,
// as files the caller owns.
func (c *conn) readFrame(v any) ([]*os.File, error) {
	for len(c.buf) < 5 {
		if err := c.fill(); err != nil {
			if len(c.buf) == 0 && errors.Is(err, io.EOF) {
				return nil, io.EOF
			}
			return nil, err
		}
	}
	size := int(binary.BigEndian.Uint32(c.buf))
	nfd := int(c.buf[4])
	if size > maxFrame {
		return nil, fmt.Errorf("frame of %d bytes is over the %d-byte limit", size, maxFrame)
	}
	for len(c.buf) < 5+size {
		if err := c.fill(); err != nil {
			return nil, err
		}
	}
	if nfd > len(c.fds) {
		return nil, fmt.Errorf("frame announces %d descriptors, %d arrived", nfd, len(c.fds))
	}
	files := make([]*os.File, nfd)
	for i := range nfd {
		files[i] = os.NewFile(uintptr(c.fds[i]), "fd")
	}
	c.fds = c.fds[nfd:]
	payload := c.buf[5 : 5+size]
	c.buf = c.buf[5+size:]
	if err := fastjson.Unmarshal(payload, v); err != nil {
		closeAll(files)
		return nil, fmt.Errorf("bad frame: %w", err)
	}
	return files, nil
}

func closeAll(files []*os.File) {
	for _, f := range files {
		if f != nil {
			f.Close()
		}
	}
}
