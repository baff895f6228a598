//go:build linux

package local

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

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
	running  map[int]*exec.Cmd
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
	lf := os.NewFile(fdListener, "listener")
	ln, err := net.FileListener(lf)
	lf.Close()
	if err != nil {
		reportReady(fmt.Errorf("use listener: %w", err))
		return 1
	}
	s := &server{cfg: cfg, running: map[int]*exec.Cmd{}, lastUsed: time.Now()}
	reportReady(nil)
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
			// Leave a mark for the host: the next sbx call reports the session
			// as expired rather than crashed, and cleans up what is left.
			state := os.NewFile(fdState, "state")
			_ = os.WriteFile(fmt.Sprintf("/proc/self/fd/%d/expired", fdState), []byte(time.Now().UTC().Format(time.RFC3339)+"\n"), 0o644)
			state.Close()
			s.shutdown()
		}
	}
}

func (s *server) shutdown() {
	s.mu.Lock()
	s.stopping = true
	for _, c := range s.running {
		c.Process.Kill()
	}
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
	case "shutdown":
		closeAll(files)
		c.writeFrame(reply{Done: true})
		s.shutdown()
	case "exec":
		s.exec(c, &req, files)
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
	cmd := &exec.Cmd{Path: req.Argv[0], Args: req.Argv, Dir: req.Dir, Env: req.Env}
	if lp, err := lookPath(req.Argv[0], req.Env); err == nil {
		cmd.Path = lp
	} else {
		closeAll(files)
		c.writeFrame(reply{Done: true, ExitCode: 127, Error: err.Error()})
		return
	}
	for i, name := range req.Fds {
		switch name {
		case "stdin":
			cmd.Stdin = files[i]
		case "stdout":
			cmd.Stdout = files[i]
		case "stderr":
			cmd.Stderr = files[i]
		case "fd3":
			cmd.ExtraFiles = []*os.File{files[i]}
		}
	}
	if req.StderrToStdout {
		cmd.Stderr = cmd.Stdout
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWPID,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: sandboxUID, HostID: sandboxUID, Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: sandboxGID, HostID: sandboxGID, Size: 1}},

		GidMappingsEnableSetgroups: false,
		Setsid:                     true,
	}
	if req.TTY {
		cmd.SysProcAttr.Setctty = true
		cmd.SysProcAttr.Ctty = 0
	}
	start := time.Now()
	err := cmd.Start()
	closeAll(files)
	if err != nil {
		code := 126
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ENOENT) {
			code = 127
		}
		c.writeFrame(reply{Done: true, ExitCode: code, Error: fmt.Sprintf("start %s: %v", req.Argv[0], err)})
		return
	}
	pid := cmd.Process.Pid
	s.mu.Lock()
	s.running[pid] = cmd
	s.mu.Unlock()
	c.writeFrame(reply{Started: true, Pid: pid})

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
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	timedOut := false
	select {
	case <-done:
	case <-timeout:
		timedOut = true
		cmd.Process.Kill()
		<-done
	case <-cancel:
		cmd.Process.Kill()
		<-done
	}
	s.mu.Lock()
	delete(s.running, pid)
	s.mu.Unlock()
	r := reply{Done: true}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok {
		switch {
		case ws.Exited():
			r.ExitCode = ws.ExitStatus()
		case ws.Signaled():
			r.ExitCode = 128 + int(ws.Signal())
			r.Signal = unix.SignalName(ws.Signal())
		}
	}
	if timedOut {
		r.TimedOut = true
		r.ExitCode = sandbox.TimeoutExitCode
	}
	c.writeFrame(r)
}

// lookPath finds a program on the command's own PATH, not the init's.
func lookPath(name string, env []string) (string, error) {
	for i := len(name) - 1; i >= 0; i-- {
		if name[i] == '/' {
			return name, nil
		}
	}
	path := ""
	for _, kv := range env {
		if len(kv) > 5 && kv[:5] == "PATH=" {
			path = kv[5:]
		}
	}
	for _, dir := range splitList(path) {
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

func splitList(path string) []string {
	var out []string
	start := 0
	for i := 0; i <= len(path); i++ {
		if i == len(path) || path[i] == ':' {
			out = append(out, path[start:i])
			start = i + 1
		}
	}
	return out
}
