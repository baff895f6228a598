package inpod

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sbx-sh/sbx/internal/runner"
	"github.com/sbx-sh/sbx/sandbox"
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
	case len(args) == 1 && args[0] == "install":
		os.Exit(install(sandbox.HelperPath))
	}
	fmt.Fprintln(os.Stderr, "usage: sbx __inpod version|serve|mux|kill ID|install")
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
		return fail(runner.CannotRun, false, fmt.Errorf("read request: %w", err))
	}
	var h Header
	if err := json.Unmarshal(line, &h); err != nil {
		return fail(runner.CannotRun, false, fmt.Errorf("parse request: %w", err))
	}
	if h.Version != Version {
		return fail(runner.CannotRun, false, fmt.Errorf("helper %s, host wants %s", Version, h.Version))
	}
	// Orphans of the command come to us, so its whole tree stays findable.
	if err := setSubreaper(); err != nil {
		return fail(runner.CannotRun, false, err)
	}
	os.MkdirAll(sandbox.RunDir, 0o700)
	if h.ID != "" && !strings.ContainsAny(h.ID, "/.") {
		pidFile := filepath.Join(sandbox.RunDir, "cmd-"+h.ID+".pid")
		os.WriteFile(pidFile, []byte(strconv.Itoa(os.Getpid())), 0o600)
		defer os.Remove(pidFile)
	}
	for _, kv := range h.Env {
		if home, ok := strings.CutPrefix(kv, "HOME="); ok && home != "" {
			os.MkdirAll(home, 0o700) // an image without the sandbox user's home
		}
	}
	rc := &runner.Cmd{
		Argv: h.Argv, Dir: h.Dir, DirFallback: h.DirFallback, Env: h.Env,
		Stdout: stream{fw, frameStdout}, Stderr: stream{fw, frameStderr},
		Timeout: time.Duration(h.TimeoutMS) * time.Millisecond,
		// The push and then the command's stdin come on in.
		Sync: h.Sync, SyncStateDir: filepath.Join(sandbox.RunDir, "sync"), Push: exactReader{br},
		Pull: stream{fw, framePull},
		Fd4:  h.Fd4, Fallback: h.Fallback,
	}
	if h.Stdin {
		rc.Stdin = br
	}
	if h.StderrToStdout {
		rc.Stderr = rc.Stdout
	}
	if h.Fd3 {
		rc.Fd3 = stream{fw, frameFd3} // bounded by the runner
	}
	r := runner.Run(rc, helperIsolation{})
	raw, _ := json.Marshal(Exit{ExitCode: r.ExitCode, TimedOut: r.TimedOut, Signal: r.Signal, Started: r.Started, Error: r.Error, SyncReply: r.SyncReply, FellBack: r.FellBack})
	fw.frame(frameExit, raw)
	return 0
}

// helperIsolation is the helper's part of a command: a process group of its
// own, and the helper a child subreaper, so that the command's whole tree
// (children that called setsid included) stays among the helper's
// descendants, which KillTree finds in /proc.
type helperIsolation struct{}

func (helperIsolation) SysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
func (helperIsolation) Started(int)                       {}
func (helperIsolation) Wait(cmd *exec.Cmd) (syscall.WaitStatus, error) {
	return runner.WaitStatus(cmd)
}
func (helperIsolation) KillTree() { killTree(os.Getpid()) }

// exactReader hides bufio's ReadFrom tricks; it only forwards Read.
type exactReader struct{ r io.Reader }

func (e exactReader) Read(p []byte) (int, error) { return e.r.Read(p) }

// kill ends the command of the helper whose id is given, and its tree.
func kill(id string) int {
	if strings.ContainsAny(id, "/.") {
		return 2
	}
	raw, err := readPidFile(filepath.Join(sandbox.RunDir, "cmd-"+id+".pid"))
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

// readPidFile reads a command's pid file, which lives where a command can
// write (RunDir): without waiting (a fifo there opens at once), only a
// regular file, not through a link, and at most 32 bytes of it.
func readPidFile(p string) ([]byte, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", p)
	}
	return io.ReadAll(io.LimitReader(f, 32))
}

// killTree kills every descendant of pid (not pid itself), repeating until
// none is left, since a dying process's children are re-parented to pid (a
// subreaper) and may still fork meanwhile. Parents go before their
// children: a shell whose child was killed first could run its next
// command before its own kill came (seen under gVisor: `sleep 303; echo
// not-reached` printed after the timeout), while one with a SIGKILL
// pending runs nothing more.
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

// descendants lists the live descendants of pid from /proc, parents
// before their children.
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
	return below(parent, pid)
}

// below lists the processes under pid in the tree parent describes (a
// process's parent by pid), shallowest first.
func below(parent map[int]int, pid int) []int {
	type kid struct{ pid, depth int }
	var out []kid
	for p := range parent {
		for q, n := parent[p], 1; q != 0 && n <= 64; q, n = parent[q], n+1 {
			if q == pid {
				out = append(out, kid{p, n})
				break
			}
		}
	}
	slices.SortFunc(out, func(a, b kid) int { return cmp.Or(cmp.Compare(a.depth, b.depth), cmp.Compare(a.pid, b.pid)) })
	pids := make([]int, len(out))
	for i, k := range out {
		pids[i] = k.pid
	}
	return pids
}
