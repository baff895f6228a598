// Package runner is the sandbox side of "run one command", written once for
// every backend's in-sandbox process (the local backend's worker, the in-pod
// helper): apply the host's sync patch, look the program up, start it with
// exactly the requested environment, kill its whole tree on timeout or
// cancellation and after it exits, hand fd 3 on within its bound, work out
// the exit code, and collect the sandbox's changes for the host.
//
// What differs between the backends is only how a command's tree is kept
// together and ended, the Isolation: the local worker is pid 1 of a pid
// namespace of its own (kill -1, reap everything); the in-pod helper is a
// child subreaper that starts the command in a process group of its own
// and finds its descendants in /proc.
//
// Exit codes follow the shells and coreutils timeout(1): the program's own
// status, 128+n for a command killed by signal n (named as
// sandbox.SignalName does), sandbox.TimeoutExitCode (124) after a timeout,
// 127 for a program that is not found and 126 for one that cannot be run (or
// a sandbox side that cannot set the command up).
package runner

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	gosync "sync"
	"syscall"
	"time"

	"github.com/sbx-sh/sbx/internal/fastjson"
	"github.com/sbx-sh/sbx/sandbox"
	sbxsync "github.com/sbx-sh/sbx/sync"
)

// Exit codes of commands that did not run.
const (
	// CannotRun is the exit code of a command that could not be started, or
	// set up (its sync patch did not apply): the shells' 126.
	CannotRun = 126
	// NotFound is the exit code of a program that is not found: the
	// shells' 127.
	NotFound = 127
)

// Cmd is one command as the host asked for it, with the streams the sandbox
// side has for it.
type Cmd struct {
	Argv []string
	// Dir is the working directory; empty keeps the runner's own.
	Dir string
	// DirFallback is sandbox.Cmd.DirFallback: where the command starts
	// when Dir is no directory once the push is applied (said on its
	// stderr), with PWD naming where it starts.
	DirFallback string
	// Env is the complete environment of the command: nil and empty both
	// mean none (never the runner's own). Argv[0] is looked up on its PATH
	// (see LookPath).
	Env []string
	// Stdin, Stdout and Stderr are the command's stdio; nil is /dev/null.
	// An *os.File is handed to the command as it is.
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// Fd3, when set, is the command's fd 3. An *os.File is handed to the
	// command as it is (the host bounds what it reads of it); any other
	// writer gets at most sandbox.MaxFd3+1 bytes, the rest is drained.
	Fd3 io.Writer
	// Fd4, when not empty, is what the command reads on its fd 4: a pipe holding
	// these bytes (at most sandbox.MaxFd4), its writing end closed before
	// the command starts.
	Fd4 []byte
	// Fallback runs instead of Argv where Argv[0] is an absolute path that
	// is not an executable file (sandbox.Cmd.Fallback).
	Fallback []string
	// Timeout, when positive, kills the command's tree once it has run this
	// long; the result then has TimedOut and sandbox.TimeoutExitCode.
	Timeout time.Duration
	// Cancel, when closed, kills the command's tree.
	Cancel <-chan struct{}

	// Sync, when set, is the sync helper's request (JSON): the patch read
	// from Push is applied before the command, the sandbox's changes are
	// written to Pull after it and the helper's reply is in the result.
	Sync json.RawMessage
	// SyncStateDir is the helper's state directory when the request names
	// none; empty leaves the request as it is.
	SyncStateDir string
	Push         io.Reader
	// PushEnds says that Push carries the patch alone, so it must end
	// right after it (on a stream shared with stdin it does not).
	PushEnds bool
	Pull     io.Writer
}

// Isolation is what a sandbox side puts around the command: the one thing
// each keeps of its own.
type Isolation interface {
	// SysProcAttr is the command's process attributes (its session or
	// process group, its terminal).
	SysProcAttr() *syscall.SysProcAttr
	// Started is told once the command runs.
	Started(pid int)
	// Wait waits for the command's own process to exit.
	Wait(cmd *exec.Cmd) (syscall.WaitStatus, error)
	// KillTree kills whatever is left of the command's tree and returns
	// when it is gone. It is called on timeout or cancellation, and after
	// the command has exited.
	KillTree()
}

// Result is how the command ended.
type Result struct {
	ExitCode int
	// Started says that the command ran; when it did not, Error says why.
	Started  bool
	TimedOut bool
	// Signal names the signal that killed the command, if one did.
	Signal string
	Error  string
	// SyncReply is the helper's reply (JSON) when the Cmd had Sync and the
	// command ran.
	SyncReply json.RawMessage
	// FellBack says that the command started in Cmd.DirFallback.
	FellBack bool
}

func notRun(code int, format string, args ...any) Result {
	return Result{ExitCode: code, Error: fmt.Sprintf(format, args...)}
}

// Run runs c to its end inside iso.
func Run(c *Cmd, iso Isolation) Result {
	if len(c.Argv) == 0 {
		return notRun(CannotRun, "empty argv")
	}
	if len(c.Fd4) > sandbox.MaxFd4 {
		return notRun(CannotRun, "fd 4 of %d bytes is over its bound of %d", len(c.Fd4), sandbox.MaxFd4)
	}
	argv := c.Argv
	if len(c.Fallback) > 0 && strings.HasPrefix(argv[0], "/") && !executable(argv[0]) {
		argv = c.Fallback
	}
	path, err := LookPath(argv[0], c.Env)
	if err != nil {
		return notRun(NotFound, "%v", err)
	}
	// The sync helper: the host's changes go in before the command.
	var helper *sbxsync.Helper
	if len(c.Sync) > 0 {
		if helper, err = applySync(c); err != nil {
			return notRun(CannotRun, "sync into the sandbox: %v", err)
		}
	}
	dir, fellBack := c.Dir, false
	if c.DirFallback != "" && !isDir(dir) {
		dir, fellBack = fallBack(c), true
	}
	newCmd := func(dir string) *exec.Cmd {
		env := c.Env
		if c.DirFallback != "" {
			env = withPWD(env, dir)
		}
		return &exec.Cmd{
			Path: path, Args: argv, Dir: dir,
			// Exactly the request's environment: a nil Env would hand the
			// command the runner's own.
			Env:         append(make([]string, 0, len(env)), env...),
			Stdin:       c.Stdin,
			Stdout:      c.Stdout,
			Stderr:      c.Stderr,
			SysProcAttr: iso.SysProcAttr(),
		}
	}
	cmd := newCmd(dir)
	var fd3r, fd3w, fd4 *os.File
	switch f := c.Fd3.(type) {
	case nil:
	case *os.File:
		cmd.ExtraFiles = []*os.File{f}
	default:
		if fd3r, fd3w, err = os.Pipe(); err != nil {
			return notRun(CannotRun, "fd 3: %v", err)
		}
		defer fd3r.Close()
		cmd.ExtraFiles = []*os.File{fd3w}
	}
	if len(c.Fd4) > 0 {
		if fd4, err = fd4Pipe(c.Fd4); err != nil {
			if fd3w != nil {
				fd3w.Close()
			}
			return notRun(CannotRun, "fd 4: %v", err)
		}
		defer fd4.Close()
		if len(cmd.ExtraFiles) == 0 {
			cmd.ExtraFiles = []*os.File{nil} // fd 3 closed
		}
		cmd.ExtraFiles = append(cmd.ExtraFiles, fd4)
	}
	err = cmd.Start()
	if err != nil && c.DirFallback != "" && dir != c.DirFallback && !isDir(dir) {
		// Dir went between the check and the start (a background job
		// removed it): the fallback, as if it had been gone before.
		extra := cmd.ExtraFiles
		cmd = newCmd(fallBack(c))
		cmd.ExtraFiles = extra
		fellBack = true
		err = cmd.Start()
	}
	if fd3w != nil {
		fd3w.Close()
	}
	if err != nil {
		code := CannotRun
		if errors.Is(err, os.ErrNotExist) {
			code = NotFound
		}
		return notRun(code, "start %s: %v", c.Argv[0], err)
	}
	iso.Started(cmd.Process.Pid)
	fd3done := make(chan struct{})
	if fd3r != nil {
		go func() {
			// Past the bound it is drained: nothing more crosses to the
			// host.
			io.Copy(sandbox.Fd3Writer(c.Fd3), fd3r)
			close(fd3done)
		}()
	} else {
		close(fd3done)
	}
	var timeout <-chan time.Time
	if c.Timeout > 0 {
		t := time.NewTimer(c.Timeout)
		defer t.Stop()
		timeout = t.C
	}
	type waited struct {
		ws  syscall.WaitStatus
		err error
	}
	r := Result{Started: true, FellBack: fellBack}
	var w waited
	if timeout == nil && c.Cancel == nil {
		// Nothing to wait for beside the command (the local worker, whose
		// init times the command and kills it from outside): the wait
		// stays on this goroutine, which in the worker is the locked main
		// thread, instead of a goroutine per command whose result would
		// have to wake that thread.
		w.ws, w.err = iso.Wait(cmd)
	} else {
		done := make(chan waited, 1)
		go func() {
			ws, err := iso.Wait(cmd)
			done <- waited{ws, err}
		}()
		select {
		case w = <-done:
		case <-timeout:
			r.TimedOut = true
			iso.KillTree()
			w = <-done
		case <-c.Cancel:
			iso.KillTree()
			w = <-done
		}
	}
	// Whatever the command left behind goes with it.
	iso.KillTree()
	<-fd3done
	switch {
	case w.err != nil:
		r.ExitCode, r.Error = CannotRun, "wait: "+w.err.Error()
	case w.ws.Exited():
		r.ExitCode = w.ws.ExitStatus()
	case w.ws.Signaled():
		r.ExitCode = 128 + int(w.ws.Signal())
		r.Signal = sandbox.SignalName(int(w.ws.Signal()))
	}
	if r.TimedOut {
		r.ExitCode = sandbox.TimeoutExitCode
	}
	// What the command changed goes out.
	if helper != nil {
		var hr sbxsync.HelperReply
		if c.Pull == nil {
			hr = helper.Reply()
			hr.Error = "no pull stream"
		} else {
			hr = helper.Collect(c.Pull)
		}
		hr.Bound()
		r.SyncReply, _ = fastjson.Marshal(hr)
	}
	return r
}

// executable reports whether path is a regular file with an execute bit,
// as LookPath asks of what it finds.
func executable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// isDir reports whether dir is a directory (symlinks followed, as chdir
// follows them).
func isDir(dir string) bool {
	fi, err := os.Stat(dir)
	return err == nil && fi.IsDir()
}

// fallBack says on the command's stderr that it starts in c.DirFallback,
// since c.Dir is gone, and returns c.DirFallback.
func fallBack(c *Cmd) string {
	if c.Stderr != nil {
		fmt.Fprintf(c.Stderr, "sbx: %s no longer exists; running in %s\n", c.Dir, c.DirFallback)
	}
	return c.DirFallback
}

// withPWD is env with PWD set to dir, in place of any PWD it had.
func withPWD(env []string, dir string) []string {
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if !strings.HasPrefix(kv, "PWD=") {
			out = append(out, kv)
		}
	}
	return append(out, "PWD="+dir)
}

// fd4Pipe returns the reading end of a pipe holding b, its writing end
// closed. b fits the pipe's buffer (sandbox.MaxFd4), so the write does not
// wait for a reader.
func fd4Pipe(b []byte) (*os.File, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	_, err = w.Write(b)
	w.Close()
	if err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

func applySync(c *Cmd) (*sbxsync.Helper, error) {
	var req sbxsync.HelperRequest
	if err := fastjson.Unmarshal(c.Sync, &req); err != nil {
		return nil, fmt.Errorf("parse the helper's request: %w", err)
	}
	if req.StateDir == "" && c.SyncStateDir != "" {
		req.StateDir = c.SyncStateDir
	}
	if c.Push == nil {
		return nil, errors.New("no push stream")
	}
	helper, err := sbxsync.NewHelper(req)
	if err != nil {
		return nil, err
	}
	push := c.Push
	if f, ok := push.(*os.File); ok && c.PushEnds {
		// A stream of its own (a pipe), read whole here: through a
		// buffer, or each tar header and each small file would be a read
		// of its own (ten system calls a file in a push of 1,000). On a
		// stream the command's stdin follows, nothing past the patches may
		// be read, so none there.
		br := pushReaders.Get().(*bufio.Reader)
		br.Reset(f)
		defer func() { br.Reset(nil); pushReaders.Put(br) }()
		push = br
	}
	if err := helper.Apply(push); err != nil {
		return nil, err
	}
	if c.PushEnds {
		if err := sbxsync.ExpectEnd(push); err != nil {
			return nil, err
		}
	}
	return helper, nil
}

// pushReaders are applySync's buffers, kept from command to command.
var pushReaders = gosync.Pool{New: func() any { return bufio.NewReaderSize(nil, 64<<10) }}

// WaitStatus is the wait status of a command that exec.Cmd waited for.
func WaitStatus(cmd *exec.Cmd) (syscall.WaitStatus, error) {
	err := cmd.Wait()
	if cmd.ProcessState == nil {
		return 0, err
	}
	ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ok {
		return 0, fmt.Errorf("no wait status for %s", cmd.Path)
	}
	return ws, nil
}

// LookPath finds a program on the PATH of env, the command's own (not the
// runner's), or on sandbox.DefaultPath when env has no PATH or an empty
// one, as execvp does. A name with a slash is used as it is. When env has
// several PATH entries the last counts: it is the one the command gets (Run
// drops duplicate variables, keeping the last, as os/exec does).
func LookPath(name string, env []string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	path := sandbox.DefaultPath
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok && v != "" {
			path = v
		}
	}
	for _, dir := range strings.Split(path, ":") {
		if dir == "" {
			dir = "."
		}
		p := dir + "/" + name
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: command not found", name)
}
