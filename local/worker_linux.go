//go:build linux

package local

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sbx-sh/sbx/internal/runner"
	sbxsync "github.com/sbx-sh/sbx/sync"
)

// A worker is pid 1 of a pid namespace of its own (in a user namespace of its
// own, which is how a process without capabilities may make one). The init
// keeps a few idle workers and hands each command to one, with its stdio.
// The worker starts the command as an ordinary process (a shell's `kill $$`
// works, orphans are reaped), and when the command ends, or is killed, the
// worker kills whatever else is left in its namespace (kill -1 from a
// namespace's pid 1 reaches every other process in it, children that called
// setsid included), so a command's tree ends with it. The worker then serves
// the next command: starting a worker costs a program start, a command only
// a fork.
//
// The worker holds CAP_SYS_ADMIN and CAP_SETPCAP in its own user namespace
// just long enough to mount its /proc and empty its bounding set; commands run
// with every capability set empty.

// workerExec is what the init sends a worker for one command.
type workerExec struct {
	Argv           []string `json:"argv"`
	Env            []string `json:"env"`
	Dir            string   `json:"dir"`
	DirFallback    string   `json:"dir_fallback,omitempty"`
	TTY            bool     `json:"tty,omitempty"`
	Fds            []string `json:"fds,omitempty"`
	StderrToStdout bool     `json:"stderr_to_stdout,omitempty"`
	Kill           bool     `json:"kill,omitempty"` // kill the running command instead
	// Sync is a sync helper request: apply the "push" stream before the
	// command, write the "pull" stream after it.
	Sync json.RawMessage `json:"sync,omitempty"`
	// Fd3 collects the command's fd 3 for the reply; Fd4 and Fallback are
	// the request's.
	Fd3      bool     `json:"fd3,omitempty"`
	Fd4      []byte   `json:"fd4,omitempty"`
	Fallback []string `json:"fallback,omitempty"`
	// Push is the push stream when it came in the request's frame.
	Push      []byte `json:"push,omitempty"`
	PushZeros int    `json:"push_zeros,omitempty"`
	// PullPipe is the request's: a pull past inlineSync goes through a pipe
	// this worker makes and sends up.
	PullPipe bool `json:"pull_pipe,omitempty"`
}

const fdWorker = 3

func runWorker() int {
	// Whatever this process inherited beyond its socket must not reach a
	// command.
	unix.CloseRange(fdWorker+1, ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
	// Not dumpable: a command may not open this process's descriptors
	// through /proc. A /proc of its own: a command sees only its own
	// processes, not the init or other commands.
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		fmt.Fprintf(os.Stderr, "sbx worker: set non-dumpable: %v\n", err)
		return 1
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		fmt.Fprintf(os.Stderr, "sbx worker: make mounts private: %v\n", err)
		return 1
	}
	if err := mountProc(); err != nil {
		fmt.Fprintf(os.Stderr, "sbx worker: %v\n", err)
		return 1
	}
	// Under the sandbox's memory limit, the OOM killer is to pick a command
	// (they inherit this), never the init that serves the sandbox. Raising
	// the score needs no privilege; a failure only loses that preference.
	os.WriteFile("/proc/self/oom_score_adj", []byte("1000"), 0)
	// Still on the locked main thread: the fork in runOne happens on this
	// thread, so what is dropped here is what commands inherit.
	if err := dropPrivileges(); err != nil {
		fmt.Fprintf(os.Stderr, "sbx worker: %v\n", err)
		return 1
	}
	if err := applyKernelLayers(); err != nil {
		fmt.Fprintf(os.Stderr, "sbx worker: %v\n", err)
		return 1
	}
	f := os.NewFile(fdWorker, "worker")
	nc, err := net.FileConn(f)
	f.Close()
	if err != nil {
		fmt.Fprintf(os.Stderr, "sbx worker: %v\n", err)
		return 1
	}
	c := newConn(nc.(*net.UnixConn))
	// The worker serves command after command (the init keeps it while
	// commands come): its sync helper keeps each code dir's manifest in
	// memory and learns what changed from inotify, instead of walking the
	// whole tree at each command. A worker the init stopped (idle) or a new
	// one starts with a full scan. Its descriptors are close-on-exec and
	// the worker is not dumpable: no command reaches them.
	sbxsync.WatchHelper = true
	// And checks them with a full scan now and then, between commands
	// (VerifyLive leaves a state a command's round trip took alone).
	go func() {
		log := slog.New(slog.NewTextHandler(os.Stderr, nil))
		for range time.Tick(sbxsync.VerifyEvery) {
			sbxsync.VerifyLive(log)
		}
	}()
	type msg struct {
		req   workerExec
		files []*os.File
	}
	execs := make(chan msg)
	go func() {
		defer close(execs)
		for {
			var m msg
			files, err := c.readFrame(&m.req)
			if err != nil {
				// The init is gone: end everything here.
				unix.Kill(-1, unix.SIGKILL)
				return
			}
			if m.req.Kill {
				unix.Kill(-1, unix.SIGKILL)
				continue
			}
			m.files = files
			execs <- m
		}
	}()
	for m := range execs {
		r := runOne(c, &m.req, m.files)
		if err := c.writeFrame(r); err != nil {
			unix.Kill(-1, unix.SIGKILL)
			sbxsync.WaitSaves()
			return 1
		}
	}
	// The sync helper's last state may still be being written (it is
	// saved after the reply): a next worker starts from that file.
	sbxsync.WaitSaves()
	return 0
}

// runOne runs one command to its end and clears the namespace after it. It
// tells the init on c once a terminal's command runs. The run itself is the runner's;
// the worker adds its isolation (workerIsolation).
func runOne(c *conn, req *workerExec, files []*os.File) reply {
	defer closeAll(files)
	stdio := map[string]*os.File{}
	for i, name := range req.Fds {
		if i < len(files) {
			stdio[name] = files[i]
		}
	}
	rc := &runner.Cmd{Argv: req.Argv, Dir: req.Dir, DirFallback: req.DirFallback, Env: req.Env, Sync: req.Sync, PushEnds: true, Fd4: req.Fd4, Fallback: req.Fallback}
	var fd3 bytes.Buffer // the runner hands on at most sandbox.MaxFd3+1 bytes
	if req.Fd3 {
		rc.Fd3 = &fd3
	}
	// A missing stream is /dev/null.
	if f, ok := stdio["stdin"]; ok {
		rc.Stdin = f
	}
	if f, ok := stdio["stdout"]; ok {
		rc.Stdout = f
	}
	if f, ok := stdio["stderr"]; ok {
		rc.Stderr = f
	}
	if req.StderrToStdout {
		rc.Stderr = rc.Stdout
	}
	if f, ok := stdio["push"]; ok {
		rc.Push = f
	} else if req.Sync != nil {
		// Small: it came in the frame.
		push, err := inlineStream(req.Push, req.PushZeros)
		if err != nil {
			return reply{Done: true, ExitCode: runner.CannotRun, Error: "the push: " + err.Error()}
		}
		rc.Push = bytes.NewReader(push)
	}
	var pull *inlinePull
	if f, ok := stdio["pull"]; ok {
		pull = &inlinePull{pipe: f}
		rc.Pull = pull
	} else if req.PullPipe && req.Sync != nil {
		pull = &inlinePull{send: func(r *os.File) error { return c.writeFrame(reply{PullPipe: true}, r) }}
		rc.Pull = pull
		defer pull.close()
	}
	iso := &workerIsolation{c: c, req: req, files: files}
	// A terminal comes from the sandbox's own devpts, so that the command's
	// tty has a name there (ttyname, ssh and gpg need that).
	if req.TTY {
		var err error
		if iso.master, iso.slave, err = openPTY(); err != nil {
			return reply{Done: true, ExitCode: runner.CannotRun, Error: "open terminal: " + err.Error()}
		}
		defer iso.master.Close()
		defer iso.slave.Close()
		rc.Stdin, rc.Stdout, rc.Stderr = iso.slave, iso.slave, iso.slave
	}
	res := runner.Run(rc, iso)
	r := reply{Done: true, ExitCode: res.ExitCode, Signal: res.Signal, Error: res.Error, Sync: res.SyncReply, FellBack: res.FellBack}
	if fd3.Len() > 0 {
		r.Fd3 = fd3.Bytes()
	}
	if pull != nil && !pull.spilled {
		r.Pull, r.PullZeros = trimZeros(pull.buf)
	}
	return r
}

// inlinePull holds the pull in memory while it is small, for the reply's
// frame; past inlineSync bytes it writes what it holds and the rest to the
// pull pipe.
type inlinePull struct {
	pipe    *os.File
	buf     []byte
	spilled bool
	// send, when set, makes the pipe at the spill: it sends the pipe's
	// reading end up (the writing end is closed by close, before the
	// final reply, so that the host's copy ends).
	send func(r *os.File) error
	made bool
}

func (p *inlinePull) Write(b []byte) (int, error) {
	if !p.spilled && len(p.buf)+len(b) <= inlineSync {
		p.buf = append(p.buf, b...)
		return len(b), nil
	}
	if !p.spilled {
		p.spilled = true
		if p.pipe == nil {
			r, w, err := os.Pipe()
			if err != nil {
				return 0, err
			}
			err = p.send(r)
			r.Close()
			if err != nil {
				w.Close()
				return 0, err
			}
			p.pipe, p.made = w, true
		}
		if _, err := p.pipe.Write(p.buf); err != nil {
			return 0, err
		}
		p.buf = nil
	}
	return p.pipe.Write(b)
}

// close closes the pipe inlinePull made, if it made one.
func (p *inlinePull) close() {
	if p.made {
		p.pipe.Close()
	}
}

// workerIsolation is the worker's part of a command: a session of its own
// for the command, and the worker's pid namespace around it, so that kill -1
// ends the command's whole tree (its kill on the init's "kill" is in
// runWorker).
type workerIsolation struct {
	c             *conn
	req           *workerExec
	files         []*os.File
	master, slave *os.File
	// exited is set once Wait has reaped the command: from then on KillTree
	// reaps what it kills (before, Wait must be the one to reap the
	// command).
	exited atomic.Bool
}

func (w *workerIsolation) SysProcAttr() *syscall.SysProcAttr {
	if w.req.TTY {
		return &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	}
	return &syscall.SysProcAttr{Setsid: true}
}

func (w *workerIsolation) Started(pid int) {
	// The command holds its stdio now; only the sync streams stay open here.
	for i, f := range w.files {
		if n := w.req.Fds[i]; n != "push" && n != "pull" {
			f.Close()
		}
	}
	if w.master != nil {
		// Only the command and the client may hold the terminal now, so the
		// client sees its end when the command's side closes.
		w.c.writeFrame(reply{Started: true, Pid: pid}, w.master)
		w.master.Close()
		w.slave.Close()
	}
	// Any other command says nothing until its end: a frame now would
	// wake the init (and compete with the command's start for a CPU) for
	// nothing it passes on.
}

// Wait reaps every process of the namespace (orphans come to its pid 1)
// until the command's own has exited.
func (w *workerIsolation) Wait(cmd *exec.Cmd) (syscall.WaitStatus, error) {
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, 0, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 0, err
		}
		if pid == cmd.Process.Pid {
			w.exited.Store(true)
			return syscall.WaitStatus(ws), nil
		}
		// an orphan the command left, reaped
	}
}

// KillTree kills every other process of the namespace and, once the
// command has been reaped, reaps them.
func (w *workerIsolation) KillTree() {
	unix.Kill(-1, unix.SIGKILL)
	for w.exited.Load() {
		var ws unix.WaitStatus
		if _, err := unix.Wait4(-1, &ws, 0, nil); err == unix.ECHILD {
			break
		} else if err != nil && err != unix.EINTR {
			break
		}
	}
}

// worker is the init's handle on one worker process.
type worker struct {
	proc *os.Process
	c    *conn
	// dead is closed once the worker has exited (and been reaped): the
	// kernel may kill an idle one, and a command must never be handed to it.
	dead chan struct{}
}

// reap waits for p and closes the returned channel when it has exited.
func reap(wait func() error) chan struct{} {
	dead := make(chan struct{})
	go func() {
		wait()
		close(dead)
	}()
	return dead
}

// alive reports whether the worker has not exited (as far as is known yet:
// a worker killed a moment ago may still look alive).
func (w *worker) alive() bool {
	select {
	case <-w.dead:
		return false
	default:
		return true
	}
}

func startWorker() (*worker, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	ours := os.NewFile(uintptr(fds[0]), "worker")
	theirs := os.NewFile(uintptr(fds[1]), "worker")
	defer theirs.Close()
	nc, err := net.FileConn(ours)
	ours.Close()
	if err != nil {
		return nil, err
	}
	cmd := &exec.Cmd{
		Path: "/proc/self/exe", Args: []string{"sbx-worker"},
		Env:        []string{envStage + "=worker"},
		Stderr:     os.Stderr,
		ExtraFiles: []*os.File{theirs},
		SysProcAttr: &syscall.SysProcAttr{
			Cloneflags:                 syscall.CLONE_NEWUSER | syscall.CLONE_NEWPID | syscall.CLONE_NEWNS,
			UidMappings:                []syscall.SysProcIDMap{{ContainerID: sandboxUID, HostID: sandboxUID, Size: 1}},
			GidMappings:                []syscall.SysProcIDMap{{ContainerID: sandboxGID, HostID: sandboxGID, Size: 1}},
			GidMappingsEnableSetgroups: false,
			AmbientCaps:                []uintptr{unix.CAP_SETPCAP, unix.CAP_SYS_ADMIN},
			Setsid:                     true,
		},
	}
	if err := cmd.Start(); err != nil {
		nc.Close()
		return nil, fmt.Errorf("start worker: %w", err)
	}
	return &worker{proc: cmd.Process, c: newConn(nc.(*net.UnixConn)), dead: reap(cmd.Wait)}, nil
}

// kill ends the worker and, with it, everything in its namespace.
func (w *worker) kill() {
	w.proc.Kill()
	w.c.Close()
}

const envWorker = "SBX_LOCAL_WORKER"

// handOver keeps w's socket open across the setup stage's execve and
// returns the environment entry that tells the serving stage where it is.
func (w *worker) handOver() (string, error) {
	f, err := w.c.c.File()
	if err != nil {
		return "", err
	}
	if _, err := unix.FcntlInt(f.Fd(), unix.F_SETFD, 0); err != nil {
		return "", err
	}
	return fmt.Sprintf("%s=%d:%d", envWorker, f.Fd(), w.proc.Pid), nil
}

// adoptWorker takes over the worker the setup stage started, if any.
func adoptWorker() *worker {
	v := os.Getenv(envWorker)
	os.Unsetenv(envWorker)
	var fd, pid int
	if _, err := fmt.Sscanf(v, "%d:%d", &fd, &pid); err != nil {
		return nil
	}
	f := os.NewFile(uintptr(fd), "worker")
	nc, err := net.FileConn(f)
	f.Close()
	if err != nil {
		return nil
	}
	p, err := os.FindProcess(pid)
	if err != nil {
		nc.Close()
		return nil
	}
	return &worker{proc: p, c: newConn(nc.(*net.UnixConn)), dead: reap(func() error { _, err := p.Wait(); return err })}
}
