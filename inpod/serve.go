package inpod

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sbx-sh/sbx/sandbox"
	sbxsync "github.com/sbx-sh/sbx/sync"
)

// Main runs the helper when this binary was started as one ("__inpod"
// sub-command), and never returns in that case.
func Main() {
	if len(os.Args) < 2 || os.Args[1] != "__inpod" {
		return
	}
	args := os.Args[2:]
	switch {
	case len(args) == 1 && args[0] == "version":
		fmt.Println(Version, SelfHash())
		os.Exit(0)
	case len(args) == 1 && args[0] == "serve":
		os.Exit(Serve(os.Stdin, os.Stdout))
	case len(args) == 1 && args[0] == "mux":
		os.Exit(Mux(os.Stdin, os.Stdout))
	case len(args) == 2 && args[0] == "kill":
		os.Exit(kill(args[1]))
	}
	fmt.Fprintln(os.Stderr, "usage: sbx __inpod version|serve|mux|kill ID")
	os.Exit(2)
}

// Serve runs one command as described by the header on in, writing frames to
// out. It returns the process's exit status (0 once the exit frame is out).
func Serve(in io.Reader, out io.Writer) int {
	fw := newFrameWriter(out)
	fail := func(code int, started bool, err error) int {
		raw, _ := json.Marshal(Exit{ExitCode: code, Started: started, Error: err.Error()})
		fw.frame(frameExit, raw)
		return 0
	}
	br := bufio.NewReaderSize(in, 64<<10)
	line, err := br.ReadBytes('\n')
	if err != nil {
		return fail(126, false, fmt.Errorf("read request: %w", err))
	}
	var h Header
	if err := json.Unmarshal(line, &h); err != nil {
		return fail(126, false, fmt.Errorf("parse request: %w", err))
	}
	if h.Version != Version {
		return fail(126, false, fmt.Errorf("helper %s, host wants %s", Version, h.Version))
	}
	var helper *sbxsync.Helper
	if len(h.Sync) > 0 {
		var req sbxsync.HelperRequest
		if err := json.Unmarshal(h.Sync, &req); err != nil {
			return fail(126, false, err)
		}
		if req.StateDir == "" {
			req.StateDir = filepath.Join(sandbox.RunDir, "sync")
		}
		if helper, err = sbxsync.NewHelper(req); err == nil {
			err = helper.Apply(exactReader{br})
		}
		if err != nil {
			return fail(126, false, fmt.Errorf("sync into the sandbox: %w", err))
		}
	}
	// Orphans of the command come to us, so its whole tree stays findable.
	if err := setSubreaper(); err != nil {
		return fail(126, false, err)
	}
	os.MkdirAll(sandbox.RunDir, 0o700)
	pidFile := ""
	if h.ID != "" && !strings.ContainsAny(h.ID, "/.") {
		pidFile = filepath.Join(sandbox.RunDir, "cmd-"+h.ID+".pid")
		os.WriteFile(pidFile, []byte(strconv.Itoa(os.Getpid())), 0o600)
		defer os.Remove(pidFile)
	}
	cmd := exec.Command(h.Argv[0], h.Argv[1:]...)
	if lp, err := lookPath(h.Argv[0], h.Env); err == nil {
		cmd.Path = lp
		cmd.Err = nil
	} else {
		return fail(127, false, err)
	}
	// Exactly the host's list: a nil Env would hand the command the
	// helper's own environment.
	cmd.Env, cmd.Dir = append(make([]string, 0, len(h.Env)), h.Env...), h.Dir
	for _, kv := range h.Env {
		if home, ok := strings.CutPrefix(kv, "HOME="); ok && home != "" {
			os.MkdirAll(home, 0o700) // an image without the sandbox user's home
		}
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if h.Stdin {
		cmd.Stdin = br
	}
	cmd.Stdout = stream{fw, frameStdout}
	cmd.Stderr = stream{fw, frameStderr}
	if h.StderrToStdout {
		cmd.Stderr = cmd.Stdout
	}
	var fd3r *os.File
	if h.Fd3 {
		r, w, err := os.Pipe()
		if err != nil {
			return fail(126, false, err)
		}
		cmd.ExtraFiles = []*os.File{w}
		fd3r = r
		defer w.Close()
	}
	if err := cmd.Start(); err != nil {
		code := 126
		if errors.Is(err, os.ErrNotExist) {
			code = 127
		}
		return fail(code, false, err)
	}
	fd3done := make(chan struct{})
	if fd3r != nil {
		cmd.ExtraFiles[0].Close()
		go func() {
			// Past the bound it is drained: nothing more crosses to the
			// host.
			io.Copy(sandbox.Fd3Writer(stream{fw, frameFd3}), fd3r)
			close(fd3done)
		}()
	} else {
		close(fd3done)
	}
	var timeout <-chan time.Time
	if h.TimeoutMS > 0 {
		t := time.NewTimer(time.Duration(h.TimeoutMS) * time.Millisecond)
		defer t.Stop()
		timeout = t.C
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var e Exit
	e.Started = true
	select {
	case <-done:
	case <-timeout:
		e.TimedOut = true
		killTree(os.Getpid())
		<-done
	}
	// Whatever the command left behind goes with it.
	killTree(os.Getpid())
	<-fd3done
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok {
		switch {
		case ws.Exited():
			e.ExitCode = ws.ExitStatus()
		case ws.Signaled():
			e.ExitCode = 128 + int(ws.Signal())
			e.Signal = ws.Signal().String()
		}
	}
	if e.TimedOut {
		e.ExitCode = 124
	}
	if helper != nil {
		reply := helper.Collect(stream{fw, framePull})
		reply.Bound()
		e.SyncReply, _ = json.Marshal(reply)
	}
	raw, _ := json.Marshal(e)
	fw.frame(frameExit, raw)
	return 0
}

// exactReader hides bufio's ReadFrom tricks; it only forwards Read.
type exactReader struct{ r io.Reader }

func (e exactReader) Read(p []byte) (int, error) { return e.r.Read(p) }

// kill ends the command of the helper whose id is given, and its tree.
func kill(id string) int {
	if strings.ContainsAny(id, "/.") {
		return 2
	}
	raw, err := os.ReadFile(filepath.Join(sandbox.RunDir, "cmd-"+id+".pid"))
	if err != nil {
		return 0 // already gone
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil || pid <= 1 {
		return 1
	}
	killTree(pid)
	return 0
}

// killTree kills every descendant of pid (not pid itself), repeating until
// none is left, since a dying process's children are re-parented to pid (a
// subreaper) and may still fork meanwhile.
func killTree(pid int) {
	for round := 0; round < 50; round++ {
		kids := descendants(pid)
		if len(kids) == 0 {
			return
		}
		for _, k := range kids {
			syscall.Kill(k, syscall.SIGKILL)
		}
		time.Sleep(time.Duration(round) * time.Millisecond)
	}
}

// descendants lists the live descendants of pid from /proc.
func descendants(pid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	parent := map[int]int{}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		raw, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(raw)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 2 || f[0] == "Z" {
			continue
		}
		pp, _ := strconv.Atoi(f[1])
		parent[p] = pp
	}
	var out []int
	for p := range parent {
		for q, n := parent[p], 0; q != 0 && n < 64; q, n = parent[q], n+1 {
			if q == pid {
				out = append(out, p)
				break
			}
		}
	}
	return out
}

// defaultPath is searched when the command's environment has no PATH, as
// execvp does.
const defaultPath = "/usr/local/bin:/usr/bin:/bin"

// lookPath finds a program on the command's own PATH.
func lookPath(name string, env []string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	path := defaultPath
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: command not found", name)
}
