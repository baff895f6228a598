package runner

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sbx-sh/sbx/sandbox"
	"github.com/sbx-sh/sbx/sandbox/sandboxtest"
)

// groupIsolation runs the command in a process group of its own and kills
// that group: enough for commands that do not leave it.
type groupIsolation struct {
	mu  sync.Mutex
	pid int
}

func (g *groupIsolation) SysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
func (g *groupIsolation) Started(pid int) { g.mu.Lock(); g.pid = pid; g.mu.Unlock() }
func (g *groupIsolation) Wait(cmd *exec.Cmd) (syscall.WaitStatus, error) {
	return WaitStatus(cmd)
}
func (g *groupIsolation) KillTree() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.pid > 0 {
		syscall.Kill(-g.pid, syscall.SIGKILL)
	}
}

const path = "PATH=/usr/local/bin:/usr/bin:/bin"

func run(t *testing.T, c *Cmd) (Result, string) {
	t.Helper()
	var out sandboxtest.Buffer
	if c.Stdout == nil {
		c.Stdout, c.Stderr = &out, &out
	}
	return Run(c, &groupIsolation{}), out.String()
}

func TestExitCodes(t *testing.T) {
	dir := t.TempDir()
	noexec := dir + "/noexec"
	if err := os.WriteFile(noexec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		cmd    Cmd
		code   int
		signal string
		timed  bool
		start  bool
	}{
		{"exit status", Cmd{Argv: []string{"sh", "-c", "exit 3"}, Env: []string{path}}, 3, "", false, true},
		{"signal", Cmd{Argv: []string{"sh", "-c", "kill -9 $$"}, Env: []string{path}}, 137, "SIGKILL", false, true},
		{"signal 15", Cmd{Argv: []string{"sh", "-c", "kill -15 $$"}, Env: []string{path}}, 143, "SIGTERM", false, true},
		{"timeout", Cmd{Argv: []string{"sh", "-c", "sleep 30"}, Env: []string{path}, Timeout: 50 * time.Millisecond}, sandbox.TimeoutExitCode, "SIGKILL", true, true},
		{"not found", Cmd{Argv: []string{"sbx-no-such-command"}, Env: []string{path}}, NotFound, "", false, false},
		{"missing path", Cmd{Argv: []string{"/no/such/program"}}, NotFound, "", false, false},
		{"not executable", Cmd{Argv: []string{noexec}}, CannotRun, "", false, false},
		{"empty argv", Cmd{}, CannotRun, "", false, false},
		{"bad sync request", Cmd{Argv: []string{"true"}, Env: []string{path}, Sync: []byte("{")}, CannotRun, "", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, out := run(t, &tc.cmd)
			if r.ExitCode != tc.code || r.Signal != tc.signal || r.TimedOut != tc.timed || r.Started != tc.start {
				t.Errorf("got %+v (output %q), want exit %d, signal %q, timed out %v, started %v", r, out, tc.code, tc.signal, tc.timed, tc.start)
			}
			if !tc.start && r.Error == "" {
				t.Errorf("a command that did not run: want Error to say why, got %+v", r)
			}
		})
	}
}

func TestCancelKillsTree(t *testing.T) {
	cancel := make(chan struct{})
	close(cancel)
	r, _ := run(t, &Cmd{Argv: []string{"sh", "-c", "sleep 30"}, Env: []string{path}, Cancel: cancel})
	if r.ExitCode != 137 || r.TimedOut {
		t.Errorf("cancelled: got %+v, want exit 137 and no timeout", r)
	}
}

func TestExactEnv(t *testing.T) {
	// No PATH: env is found on sandbox.DefaultPath, and the command gets an
	// empty environment, not the runner's (nil and empty alike).
	for _, env := range [][]string{nil, {}} {
		r, out := run(t, &Cmd{Argv: []string{"env"}, Env: env})
		if r.ExitCode != 0 || out != "" {
			t.Errorf("Env %#v: got %+v, output %q; want env found and an empty environment", env, r, out)
		}
	}
	r, out := run(t, &Cmd{Argv: []string{"env"}, Env: []string{path, "X=1", "X=2"}})
	if r.ExitCode != 0 || out != path+"\nX=2\n" {
		t.Errorf("duplicates: got %+v, output %q; want the last X only", r, out)
	}
}

func TestFd3Bound(t *testing.T) {
	var fd3 sandboxtest.Buffer
	r, out := run(t, &Cmd{Argv: []string{"sh", "-c", "head -c 3000000 /dev/zero >&3; echo rc=$?"}, Env: []string{path}, Fd3: &fd3})
	if r.ExitCode != 0 || out != "rc=0\n" {
		t.Errorf("3 MB to fd 3: want it drained (no SIGPIPE): got %+v, output %q", r, out)
	}
	if n := len(fd3.String()); n != sandbox.MaxFd3+1 {
		t.Errorf("3 MB to fd 3: %d bytes handed on, want MaxFd3+1 = %d", n, sandbox.MaxFd3+1)
	}
}

func TestLookPath(t *testing.T) {
	dir := t.TempDir()
	prog := dir + "/prog"
	if err := os.WriteFile(prog, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		env  []string
		want string
	}{
		{[]string{"PATH=" + dir}, prog},
		{[]string{"PATH=/nowhere", "PATH=" + dir}, prog}, // the last counts
		{[]string{"PATH=" + dir, "PATH="}, prog},         // an empty one does not
		{[]string{"PATH=/nowhere:" + dir + ":"}, prog},   // each entry in turn
		{nil, ""}, // DefaultPath has no prog
	} {
		got, err := LookPath("prog", tc.env)
		if got != tc.want || (tc.want == "") != (err != nil) {
			t.Errorf("LookPath(prog, %q) = %q, %v; want %q", tc.env, got, err, tc.want)
		}
	}
	if got, err := LookPath("sh", nil); err != nil || !strings.HasSuffix(got, "/sh") {
		t.Errorf("LookPath(sh) on sandbox.DefaultPath = %q, %v", got, err)
	}
	if got, _ := LookPath("./x/y", nil); got != "./x/y" {
		t.Errorf("a name with a slash is used as it is: got %q", got)
	}
}

// TestDirFallback: with DirFallback set, a Dir that is there is where the
// command starts (PWD naming it, whatever PWD the request had); one that
// is gone or is a file starts it in the fallback, after one line on its
// stderr; without DirFallback a gone Dir is an error, as before.
func TestDirFallback(t *testing.T) {
	tmp := t.TempDir()
	file := filepath.Join(tmp, "file")
	os.WriteFile(file, nil, 0o644)
	// A link to a directory: PWD names the link, as cd LINK leaves it,
	// and pwd -P the directory.
	real, link := filepath.Join(tmp, "real"), filepath.Join(tmp, "link")
	os.Mkdir(real, 0o755)
	os.Symlink("real", link)
	show := []string{"/bin/sh", "-c", `printf '%s %s\n' "$(pwd -P)" "$PWD"`}
	for _, tc := range []struct {
		dir, fallback, out, errout string
		code                       int
	}{
		{tmp, "/", tmp + " " + tmp + "\n", "", 0},
		{link, "/", real + " " + link + "\n", "", 0},
		{filepath.Join(tmp, "gone"), tmp, tmp + " " + tmp + "\n", "sbx: " + filepath.Join(tmp, "gone") + " no longer exists; running in " + tmp + "\n", 0},
		{file, "/", "/ /\n", "sbx: " + file + " no longer exists; running in /\n", 0},
		{filepath.Join(tmp, "gone"), "", "", "", -1}, // not run: an error, as before
	} {
		var out, errb strings.Builder
		r := Run(&Cmd{Argv: show, Dir: tc.dir, DirFallback: tc.fallback, Env: []string{"PATH=/usr/bin:/bin", "PWD=/elsewhere"}, Stdout: &out, Stderr: &errb}, &groupIsolation{})
		if tc.code == -1 {
			if r.ExitCode == 0 || r.Error == "" || out.String() != "" {
				t.Errorf("Dir %s, no fallback: exit %d (%q), out %q; want it not run, with an error", tc.dir, r.ExitCode, r.Error, out.String())
			}
			continue
		}
		if r.FellBack != (tc.errout != "") {
			t.Errorf("Dir %s, fallback %q: FellBack %v", tc.dir, tc.fallback, r.FellBack)
		}
		if r.ExitCode != tc.code || out.String() != tc.out || errb.String() != tc.errout {
			t.Errorf("Dir %s, fallback %q: exit %d (%s), out %q, stderr %q; want exit %d, out %q, stderr %q", tc.dir, tc.fallback, r.ExitCode, r.Error, out.String(), errb.String(), tc.code, tc.out, tc.errout)
		}
	}
}
