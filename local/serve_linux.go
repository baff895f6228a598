//go:build linux

package local

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sbx-sh/sbx/sandbox"
)

// server is the serving stage of the init: pid 1 of the sandbox's pid
// namespace, with no capabilities. Each command runs as pid 1 of a pid
// namespace of its own (in a user namespace of its own, which is how a
// process without capabilities may create one), so killing the command kills
// everything it started, children that called setsid included.
type server struct {
	cfg initConfig

	mu       sync.Mutex
	idle     []*worker
	starting bool
	trimmed  bool // the idle workers were stopped (trim): none is started until a command needs one
	lastUsed time.Time
	active   int
	stopping bool
}

func runServe() int {
	var cfg initConfig
	if err := json.Unmarshal([]byte(os.Getenv(envConfig)), &cfg); err != nil {
		reportReady(fmt.Errorf("parse init config: %w", err))
		return 1
	}
	os.Unsetenv(envConfig)
	os.Unsetenv(envStage)
	// Commands never see this process: each has the /proc of its worker's
	// pid namespace. (It stays dumpable: a worker it forks must be, for its
	// uid map to be writable when sbx runs as an ordinary user.)
	lf := os.NewFile(fdListener, "listener")
	ln, err := net.FileListener(lf)
	lf.Close()
	if err != nil {
		reportReady(fmt.Errorf("use listener: %w", err))
		return 1
	}
	if err := listenEgress(cfg); err != nil {
		reportReady(err)
		return 1
	}
	s := &server{cfg: cfg, lastUsed: time.Now()}
	// One idle worker before reporting ready: the first command is then as
	// fast as the later ones.
	if w := adoptWorker(); w != nil {
		go s.watch(w)
		s.idle = append(s.idle, w)
	} else if w, err := s.startWorker(); err == nil {
		s.idle = append(s.idle, w)
	}
	reportReady(nil)
	go s.trimmer()
	if cfg.IdleTTL > 0 {
		go s.idleReaper(time.Duration(cfg.IdleTTL) * time.Millisecond)
	}
	for {
		c, err := ln.Accept()
		if err != nil {
			fmt.Fprintf(os.Stderr, "sbx init: accept: %v\n", err)
			return 1
		}
		go s.handle(newConn(c.(*net.UnixConn)))
	}
}

func (s *server) idleReaper(ttl time.Duration) {
	for {
		time.Sleep(ttl / 10)
		s.mu.Lock()
		idle := s.active == 0 && time.Since(s.lastUsed) > ttl
		s.mu.Unlock()
		if idle {
			// The host notices at its next call (the init is gone) and
			// cleans up what is left.
			s.shutdown()
		}
	}
}

func (s *server) shutdown() {
	s.mu.Lock()
	s.stopping = true
	s.mu.Unlock()
	// Exiting as pid 1 kills every process left in the sandbox.
	os.Exit(0)
}

func (s *server) handle(c *conn) {
	defer c.Close()
	var req request
	files, err := c.readFrame(&req)
	if err != nil {
		if !errors.Is(err, io.EOF) {
			c.writeFrame(reply{Done: true, Error: err.Error()})
		}
		return
	}
	switch req.Op {
	case "ping":
		closeAll(files)
		c.writeFrame(reply{Done: true, Version: s.cfg.Version, Pid: os.Getpid()})
	case "trim":
		closeAll(files)
		c.writeFrame(reply{Done: true, Trimmed: s.trim()})
	case "shutdown":
		closeAll(files)
		c.writeFrame(reply{Done: true})
		s.shutdown()
	case "exec":
		s.exec(c, &req, files)
	case "egress":
		closeAll(files)
		serveEgress(c)
	case "dial":
		closeAll(files)
		serveDial(c, &req)
	case "watch":
		closeAll(files)
		serveWatch(c)
	default:
		closeAll(files)
		c.writeFrame(reply{Done: true, Error: fmt.Sprintf("unknown op %q", req.Op)})
	}
}

func (s *server) exec(c *conn, req *request, files []*os.File) {
	s.mu.Lock()
	if s.stopping {
		s.mu.Unlock()
		closeAll(files)
		c.writeFrame(reply{Done: true, Error: "sandbox is shutting down"})
		return
	}
	s.active++
	s.lastUsed = time.Now()
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.active--
		s.lastUsed = time.Now()
		s.mu.Unlock()
	}()

	if len(files) != len(req.Fds) {
		closeAll(files)
		c.writeFrame(reply{Done: true, Error: fmt.Sprintf("exec frame names %d descriptors, carries %d", len(req.Fds), len(files))})
		return
	}
	if len(req.Argv) == 0 {
		closeAll(files)
		c.writeFrame(reply{Done: true, Error: "empty argv"})
		return
	}
	// The worker looks the program up on the command's PATH (runner.Run).
	wreq := workerExec{Argv: req.Argv, Env: req.Env, Dir: req.Dir, DirFallback: req.DirFallback, TTY: req.TTY, Fds: req.Fds, StderrToStdout: req.StderrToStdout, Sync: req.Sync,
		Fd3: req.Fd3, Fd4: req.Fd4, Fallback: req.Fallback, Push: req.Push, PushZeros: req.PushZeros, PullPipe: req.PullPipe}
	start := time.Now()
	// A client that sends "kill" or hangs up cancels the command.
	cancel := make(chan struct{})
	go func() {
		for {
			var r request
			fs, err := c.readFrame(&r)
			closeAll(fs)
			if err != nil || r.Op == "kill" {
				close(cancel)
				return
			}
		}
	}()
	var timeout <-chan time.Time
	if req.TimeoutMS > 0 {
		t := time.NewTimer(time.Duration(req.TimeoutMS)*time.Millisecond - time.Since(start))
		defer t.Stop()
		timeout = t.C
	}
	// A worker says that the command runs only for a terminal, with the
	// terminal's master side, which goes on to the client; for any other
	// command the first frame is the pull's pipe or the final reply: one
	// frame each way per command, no wake-up of this process while it runs.
	var (
		w        *worker
		r        reply
		timedOut bool
	)
	for attempt := 1; ; attempt++ {
		var err error
		w, err = s.handOff(&wreq, files)
		if err != nil {
			closeAll(files)
			c.writeFrame(reply{Done: true, Error: err.Error()})
			return
		}
		done := make(chan reply, 1)
		go s.relay(c, w, req, done)
		select {
		case r = <-done:
		case <-timeout:
			timedOut = true
			r = s.stopCommand(w, done)
		case <-cancel:
			r = s.stopCommand(w, done)
		}
		// A worker killed while idle (the OOM killer) can take a frame
		// before its last thread has closed its descriptors. The kernel
		// then resets the connection because the frame lay unread
		// (ECONNRESET, not EOF), before the worker sent anything: it did
		// nothing with the request, and another may run it. Anything
		// else may have begun.
		if r.resend && !timedOut && attempt < maxHandOffs {
			w.kill()
			select {
			case <-cancel:
			default:
				continue
			}
		}
		break
	}
	closeAll(files)
	if r.workerLost() {
		w.kill()
	} else {
		s.putWorker(w)
	}
	if timedOut {
		r.TimedOut = true
		r.ExitCode = sandbox.TimeoutExitCode
		r.Error = ""
	}
	c.writeFrame(r)
}

// workerLost begins a reply's Error when the worker that ran the command
// died or was killed (the init lives on, with a new worker).
const workerLost = "worker lost"

// workerLost reports whether r says the command's worker was lost.
func (r reply) workerLost() bool { return strings.HasPrefix(r.Error, workerLost) }

// relay reads w's frames for one command: a terminal's "started" frame
// (with its master side) and the pull's pipe go on to the client, the
// final reply to done.
func (s *server) relay(c *conn, w *worker, req *request, done chan<- reply) {
	relayed, got := false, false
	for {
		var r reply
		files, err := w.c.readFrame(&r)
		if err != nil {
			done <- reply{Done: true, ExitCode: 137, Signal: "SIGKILL", Error: workerLost + ": " + err.Error(),
				resend: !got && errors.Is(err, syscall.ECONNRESET)}
			return
		}
		got = true
		switch {
		case r.Done:
			closeAll(files)
			done <- r
			return
		case r.Started && req.TTY:
			c.writeFrame(r, files...)
		case r.PullPipe && !relayed && req.PullPipe:
			// The pull's pipe, made by the worker once the pull
			// outgrew the reply: on to the client, which reads it.
			relayed = true
			c.writeFrame(reply{PullPipe: true}, files...)
		}
		closeAll(files)
	}
}

// stopCommand asks the worker to kill its command, and kills the worker if it
// does not answer in time.
func (s *server) stopCommand(w *worker, done chan reply) reply {
	w.c.writeFrame(workerExec{Kill: true})
	if done == nil {
		var r reply
		w.c.readFrame(&r)
		s.putWorker(w)
		return r
	}
	select {
	case r := <-done:
		return r
	case <-time.After(2 * time.Second):
		w.kill()
		return reply{Done: true, ExitCode: 137, Signal: "SIGKILL", Error: workerLost + ": did not stop its command"}
	}
}

// maxIdleWorkers is how many workers an idle sandbox keeps ready: one, so
// that a command does not wait for a worker's start (a re-exec of sbx), and
// no more, since each is a Go process of its own (about 4 MB of private
// memory: docs/benchmarks.md, memory).
const maxIdleWorkers = 1

// workerIdleTTL is how long a sandbox without commands keeps its idle
// worker. Past it the init stops the worker and gives its own free memory
// back, leaving one process per idle sandbox; the next command starts a
// worker first (about 15 ms more on a loaded 2-core machine, once) and its
// sync helper scans the workspace in full, as the worker's watch went with
// it. An agent's calls come seconds apart, and rarely minutes (a long
// answer being written), so a session at work does not pay that; one left
// idle (its agent done, or waiting for its user) gives its memory back.
const workerIdleTTL = 2 * time.Minute

// trimmer stops the idle workers of a sandbox unused for workerIdleTTL.
func (s *server) trimmer() {
	for {
		s.mu.Lock()
		wait := workerIdleTTL - time.Since(s.lastUsed)
		trimmed := s.trimmed
		s.mu.Unlock()
		if wait <= 0 {
			if !trimmed {
				s.trim()
			}
			wait = workerIdleTTL
		}
		time.Sleep(wait) // a timer: nothing waits on the trim
	}
}

// trim stops the idle workers unless a command runs, and hands the init's
// free heap back to the kernel. It reports how many workers it stopped.
func (s *server) trim() int {
	s.mu.Lock()
	if s.active > 0 || s.stopping {
		s.mu.Unlock()
		return 0
	}
	idle := s.idle
	s.idle = nil
	s.trimmed = true
	s.mu.Unlock()
	for _, w := range idle {
		w.kill()
	}
	debug.FreeOSMemory()
	return len(idle)
}

// handOff gives the command to a live worker. A worker that died while idle
// (the kernel killed it) refuses the frame at once, having received
// nothing: it is dropped, and the command goes to another one.
// maxHandOffs is how many workers in a row one command is offered to before
// it fails: each of them found dead as it was handed the command.
const maxHandOffs = 3

func (s *server) handOff(wreq *workerExec, files []*os.File) (*worker, error) {
	var last error
	for range maxHandOffs {
		w, err := s.getWorker()
		if err != nil {
			return nil, err
		}
		if err = w.c.writeFrame(wreq, files...); err == nil {
			return w, nil
		}
		w.kill()
		last = err
	}
	return nil, fmt.Errorf("hand the command to a worker: three workers in a row were gone (%v); see the sandbox's init.log", last)
}

// startWorker starts a worker that the server watches.
func (s *server) startWorker() (*worker, error) {
	w, err := startWorker()
	if err == nil {
		go s.watch(w)
	}
	return w, err
}

// watch replaces w if it dies while idle, so that the next command finds a
// worker ready.
//
// Only an idle worker's socket is closed here. A worker that a command was
// handed to is its command's: the command reads the worker's end of it,
// which tells a worker that died before reading the command (the kernel
// resets a socket closed with a frame unread, ECONNRESET: the command may
// go to another worker) from one that died running it (EOF); closing it
// here, as the worker died, made both a closed connection and failed a
// command that had never started.
func (s *server) watch(w *worker) {
	<-w.dead
	s.mu.Lock()
	i := slices.Index(s.idle, w)
	if i >= 0 {
		s.idle = slices.Delete(s.idle, i, i+1)
	}
	spare := i >= 0 && len(s.idle) == 0 && !s.starting && !s.stopping && !s.trimmed
	if spare {
		s.starting = true
	}
	s.mu.Unlock()
	if i >= 0 {
		w.c.Close()
	}
	if spare {
		s.startSpare()
	}
}

// getWorker returns the idle worker, or starts one (the first command after
// a trim, or one that runs beside another). No spare is started: a command's
// worker comes back to the pool when it ends, so sequential commands reuse
// one worker and an idle sandbox holds one worker at most.
func (s *server) getWorker() (*worker, error) {
	s.mu.Lock()
	var w *worker
	for w == nil && len(s.idle) > 0 {
		n := len(s.idle)
		w, s.idle = s.idle[n-1], s.idle[:n-1]
		if !w.alive() {
			w.c.Close() // died after its last command, once put back
			w = nil
		}
	}
	s.trimmed = false
	s.mu.Unlock()
	if w != nil {
		return w, nil
	}
	return s.startWorker()
}

func (s *server) startSpare() {
	w, err := s.startWorker()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.starting = false
	if err != nil {
		fmt.Fprintf(os.Stderr, "sbx init: %v\n", err)
		return
	}
	if s.stopping || s.trimmed || len(s.idle) >= maxIdleWorkers {
		w.kill()
		return
	}
	s.idle = append(s.idle, w)
}

func (s *server) putWorker(w *worker) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopping || s.trimmed || len(s.idle) >= maxIdleWorkers {
		w.kill()
		return
	}
	s.idle = append(s.idle, w)
}
