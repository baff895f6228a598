//go:build linux

package local

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sbx-sh/sbx/sandbox"
)

// outputPipeSize is the buffer of the pipes that carry a command's output to
// a writer that is not a file, and of the copy out of them (1 MiB, the
// default pipe-max-size: an unprivileged process may set it).
const outputPipeSize = 1 << 20

// copyBuffers are the output copies' buffers, kept from command to
// command: a new 1 MiB buffer for each stream of each command was most of
// a warm command's allocation (and its clearing a good part of its CPU).
var copyBuffers = sync.Pool{New: func() any { b := make([]byte, outputPipeSize); return &b }}

// pushHeads hold the first inlineSync+1 bytes of a push, to tell a small
// one (sent in the frame) from a large one.
var pushHeads = sync.Pool{New: func() any { b := make([]byte, inlineSync+1); return &b }}

// onlyWriter and onlyReader hide a writer's ReadFrom and a reader's
// WriteTo (an *os.File's copies through 32 KiB), so that io.CopyBuffer uses
// its own buffer.
type (
	onlyWriter struct{ io.Writer }
	onlyReader struct{ io.Reader }
)

// Exec runs cmd in the sandbox. The command's stdio are handed to the init
// as file descriptors: an *os.File is passed as it is, any other reader or
// writer through a pipe. When the sandbox's uid is not sbx's own (sbx runs as
// root and the sandbox has a host uid of its own), every stream goes through
// a pipe of sbx's whose sandbox end is owned by that uid: a command reopens
// its stdio by name (`echo x >/dev/stderr`, /proc/self/fd/N), which the
// kernel checks against the file's owner, and a host file or terminal passed
// as it is would refuse the unmapped uid (and lend the sandbox a host file
// description it could seek, truncate or, for a terminal, type into).
func (b *box) Exec(ctx context.Context, cmd *sandbox.Cmd) (sandbox.Result, error) {
	start := time.Now()
	if len(cmd.Argv) == 0 {
		return sandbox.Result{}, errors.New("exec: empty command")
	}
	c, err := b.dial(ctx)
	if err != nil {
		return sandbox.Result{}, err
	}
	defer c.Close()

	req := request{Op: "exec", Argv: cmd.Argv, Dir: cmd.Dir, DirFallback: cmd.DirFallback, Env: withEnv(cmd.Env, b.st.Env), TimeoutMS: cmd.Timeout.Milliseconds()}
	if cmd.Timeout > 0 && req.TimeoutMS == 0 {
		req.TimeoutMS = 1
	}
	var (
		send    []*os.File // handed to the init, closed here once sent
		copiers sync.WaitGroup
		closers []io.Closer
	)
	defer func() {
		for _, c := range closers {
			c.Close()
		}
	}()
	own := b.st.HostUID != os.Geteuid() || b.st.HostGID != os.Getegid()
	pipe := func() (r, w *os.File, err error) {
		if r, w, err = os.Pipe(); err != nil {
			return nil, nil, err
		}
		if own {
			// Both ends: one is the sandbox's, and a pipe has one inode.
			if err = r.Chown(b.st.HostUID, b.st.HostGID); err != nil {
				r.Close()
				w.Close()
				return nil, nil, fmt.Errorf("hand a pipe to the sandbox's uid %d: %w", b.st.HostUID, err)
			}
		}
		return r, w, nil
	}
	pass := func(name string, f *os.File) {
		req.Fds = append(req.Fds, name)
		send = append(send, f)
	}
	// output wires w to the command: directly for a file, else through a pipe
	// copied until the command and everything holding the pipe are gone.
	output := func(name string, w io.Writer) error {
		if f, ok := w.(*os.File); ok && !own {
			pass(name, f)
			return nil
		}
		r, pw, err := pipe()
		if err != nil {
			return err
		}
		// A command printing a lot costs a wake-up of this side per pipe
		// buffer: a larger buffer and reads as large make them few. Where
		// the kernel refuses the size (pipe-max-size, a user's pipe quota),
		// the default 64 KiB serves as before.
		unix.FcntlInt(pw.Fd(), unix.F_SETPIPE_SZ, outputPipeSize)
		pass(name, pw)
		closers = append(closers, pw)
		copiers.Add(1)
		go func() {
			defer copiers.Done()
			buf := copyBuffers.Get().(*[]byte)
			io.CopyBuffer(onlyWriter{w}, onlyReader{r}, *buf)
			copyBuffers.Put(buf)
			r.Close()
		}()
		return nil
	}

	if cmd.TTY != nil {
		// The init allocates the terminal inside the sandbox and hands back
		// its master side once the command runs.
		req.TTY = true
	} else {
		if cmd.Stdin != nil {
			if f, ok := cmd.Stdin.(*os.File); ok && !own {
				pass("stdin", f)
			} else {
				pr, pw, err := pipe()
				if err != nil {
					return sandbox.Result{}, err
				}
				pass("stdin", pr)
				closers = append(closers, pr)
				go func() {
					io.Copy(pw, cmd.Stdin)
					pw.Close()
				}()
			}
		}
		if cmd.Stdout != nil {
			if err := output("stdout", cmd.Stdout); err != nil {
				return sandbox.Result{}, err
			}
		}
		if cmd.Stderr != nil {
			if cmd.Stdout != nil && sameWriter(cmd.Stdout, cmd.Stderr) {
				req.StderrToStdout = true
			} else if err := output("stderr", cmd.Stderr); err != nil {
				return sandbox.Result{}, err
			}
		}
	}
	// The fd 3 report comes back in the final reply (the worker collects it
	// in the sandbox); the host keeps at most sandbox.MaxFd3+1 bytes of it.
	req.Fd3 = cmd.Fd3 != nil
	if len(cmd.Fd4) > sandbox.MaxFd4 {
		return sandbox.Result{}, fmt.Errorf("exec: fd 4 of %d bytes is over its bound of %d", len(cmd.Fd4), sandbox.MaxFd4)
	}
	req.Fd4, req.Fallback = cmd.Fd4, cmd.Fallback
	if cmd.Sync != nil {
		req.Sync = cmd.Sync.Request
		// A small push (a no-change round trip's) travels in the frame;
		// a larger one goes on through a pipe after what was read.
		buf := pushHeads.Get().(*[]byte)
		head := *buf
		n, err := io.ReadFull(cmd.Sync.Push, head)
		switch {
		case err == io.EOF || err == io.ErrUnexpectedEOF:
			push, zeros := trimZeros(head[:n])
			req.Push, req.PushZeros = bytes.Clone(push), zeros
			pushHeads.Put(buf)
		case err != nil:
			pushHeads.Put(buf)
			return sandbox.Result{}, fmt.Errorf("read the sync's push: %w", err)
		default:
			pr, pw, err := pipe()
			if err != nil {
				pushHeads.Put(buf)
				return sandbox.Result{}, err
			}
			pass("push", pr)
			closers = append(closers, pr)
			// Ends when the helper has read it all, or closed its end.
			go func() {
				if _, err := pw.Write(head); err == nil {
					io.Copy(pw, cmd.Sync.Push)
				}
				pw.Close()
				pushHeads.Put(buf)
			}()
		}
		// The pull comes in the final reply while it is small; a larger
		// one through a pipe the worker makes once it needs one.
		req.PullPipe = true
	}

	if err := c.writeFrame(req, send...); err != nil {
		return sandbox.Result{}, fmt.Errorf("%w: send command to sandbox init: %v", sandbox.ErrLost, err)
	}
	// The init holds its own copies now; ours must close so that pipes end
	// when the command's side closes.
	for _, cl := range closers {
		cl.Close()
	}
	closers = nil

	stop := context.AfterFunc(ctx, func() { c.writeFrame(request{Op: "kill"}) })
	defer stop()
	var r reply
	pulling := false
	for {
		r = reply{}
		files, err := c.readFrame(&r)
		if err != nil {
			if b.lostToOOM() {
				return sandbox.Result{}, fmt.Errorf("%w: the sandbox ran out of memory while the command ran, and the kernel ended its init: %s", sandbox.ErrLost, oomAdvice)
			}
			return sandbox.Result{}, fmt.Errorf("%w: lost the sandbox init while the command ran: %v", sandbox.ErrLost, err)
		}
		if r.Started && cmd.TTY != nil && len(files) == 1 {
			b.serveTerminal(files[0], cmd, &copiers)
			files = nil
		}
		if r.PullPipe {
			if err := checkPullPipe(cmd, r, files, pulling); err != nil {
				closeAll(files)
				return sandbox.Result{}, fmt.Errorf("%w: %v", sandbox.ErrLost, err)
			}
			pulling = true
			pr := files[0]
			files = nil
			copiers.Add(1)
			go func() {
				defer copiers.Done()
				buf := copyBuffers.Get().(*[]byte)
				io.CopyBuffer(onlyWriter{cmd.Sync.Pull}, onlyReader{pr}, *buf)
				copyBuffers.Put(buf)
				pr.Close()
			}()
		}
		closeAll(files)
		if r.Done {
			break
		}
	}
	copiers.Wait()
	if cmd.Sync != nil && (len(r.Pull) > 0 || r.PullZeros != 0) {
		pull, err := inlineStream(r.Pull, r.PullZeros)
		if err != nil {
			return sandbox.Result{}, fmt.Errorf("%w: the sandbox's reply: its pull: %v", sandbox.ErrLost, err)
		}
		cmd.Sync.Pull.Write(pull)
	}
	if cmd.Fd3 != nil && len(r.Fd3) > 0 {
		sandbox.Fd3Writer(cmd.Fd3).Write(r.Fd3)
	}
	res := sandbox.Result{ExitCode: r.ExitCode, TimedOut: r.TimedOut, Signal: r.Signal, Duration: time.Since(start), SyncReply: r.Sync, FellBack: r.FellBack}
	if r.Error != "" && r.Pid == 0 && !r.TimedOut {
		if r.ExitCode == 126 || r.ExitCode == 127 {
			// Not found or not executable: a result, as a shell would give.
			if cmd.Stderr != nil {
				fmt.Fprintf(cmd.Stderr, "sbx: %s\n", r.Error)
			} else if cmd.Stdout != nil && cmd.TTY != nil {
				fmt.Fprintf(cmd.Stdout, "sbx: %s\r\n", r.Error)
			}
			return res, nil
		}
		if r.workerLost() && b.lostToOOM() {
			// The OOM killer chose the worker rather than the init: the
			// sandbox lives on, what the command wrote stays in it.
			return res, fmt.Errorf("sandbox refused the command: the sandbox ran out of memory while the command ran, and the kernel ended the process that ran it: %s", oomAdvice)
		}
		return res, fmt.Errorf("sandbox refused the command: %s", r.Error)
	}
	if ctx.Err() != nil && !r.TimedOut {
		return res, ctx.Err()
	}
	return res, nil
}

// oomAdvice ends a command's error when the kernel's OOM killer ended a
// process of its sandbox (the init, or the worker that ran the command).
const oomAdvice = "its memory limit (config key memory) counts its processes and the files they wrote to its tmpfs (/tmp, and its workspaces " +
	"when they are in memory: sbx doctor says where they are); raise memory, write less there, or set workspace = \"disk\""

// checkPullPipe checks a frame that says it carries the pull's pipe: the
// sandbox chose it, so it must be the one pipe of an exec that asked for
// one, before the final reply.
func checkPullPipe(cmd *sandbox.Cmd, r reply, files []*os.File, already bool) error {
	switch {
	case cmd.Sync == nil:
		return errors.New("the sandbox sent a pull pipe for a command without a sync")
	case already:
		return errors.New("the sandbox sent a second pull pipe")
	case r.Done:
		return errors.New("the sandbox sent a pull pipe with its final reply")
	case len(files) != 1:
		return fmt.Errorf("the sandbox sent a pull pipe frame with %d descriptors, want 1", len(files))
	}
	st, err := files[0].Stat()
	if err != nil {
		return fmt.Errorf("the sandbox's pull pipe: %v", err)
	}
	if st.Mode().Type() != os.ModeNamedPipe {
		return fmt.Errorf("the sandbox sent a %v as its pull pipe, not a pipe", st.Mode().Type())
	}
	return nil
}

// sameWriter reports whether a and b are the same writer, so their output
// can share one pipe and keep its order.
func sameWriter(a, b io.Writer) (same bool) {
	defer func() {
		if recover() != nil {
			same = false // uncomparable writer types
		}
	}()
	return a == b
}

// serveTerminal copies between the caller's stdin/stdout and the master side
// of the command's terminal, and passes window sizes on.
func (b *box) serveTerminal(master *os.File, cmd *sandbox.Cmd, copiers *sync.WaitGroup) {
	setWinsize(master, cmd.TTY.Size)
	if cmd.Stdin != nil {
		go io.Copy(master, cmd.Stdin)
	}
	copiers.Add(1)
	go func() {
		defer copiers.Done()
		defer master.Close()
		w := cmd.Stdout
		if w == nil {
			w = io.Discard
		}
		io.Copy(w, master) // ends with EIO once the command and its children close the terminal
	}()
	if cmd.TTY.Resize != nil {
		go func() {
			for ws := range cmd.TTY.Resize {
				setWinsize(master, ws)
			}
		}()
	}
}

// openPTY opens a new terminal pair from this mount namespace's devpts.
func openPTY() (master, slave *os.File, err error) {
	mfd, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil, err
	}
	master = os.NewFile(uintptr(mfd), "/dev/ptmx")
	if err := unix.IoctlSetPointerInt(mfd, unix.TIOCSPTLCK, 0); err != nil {
		master.Close()
		return nil, nil, err
	}
	n, err := unix.IoctlGetInt(mfd, unix.TIOCGPTN)
	if err != nil {
		master.Close()
		return nil, nil, err
	}
	sfd, err := unix.Open(fmt.Sprintf("/dev/pts/%d", n), unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		master.Close()
		return nil, nil, err
	}
	return master, os.NewFile(uintptr(sfd), "pty"), nil
}

func setWinsize(f *os.File, ws sandbox.WindowSize) {
	if ws.Rows == 0 || ws.Cols == 0 {
		return
	}
	unix.IoctlSetWinsize(int(f.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: ws.Rows, Col: ws.Cols})
}
