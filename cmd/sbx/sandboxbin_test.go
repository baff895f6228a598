package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/sbx-sh/sbx/internal/testenv"
	"github.com/sbx-sh/sbx/local"
)

// initExe is what /proc/PID/exe of the kept session's init (from its
// local.json) names, and its first child's (a worker's).
func initExe(t *testing.T, w *world, session string) (initPath, workerPath string) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(w.state, "sbx", "sessions", session, "local.json"))
	if err != nil {
		t.Fatalf("the kept session's local.json: %v", err)
	}
	var st struct {
		Pid int `json:"pid"`
	}
	if err := json.Unmarshal(raw, &st); err != nil || st.Pid <= 0 {
		t.Fatalf("local.json %s: %v", raw, err)
	}
	initPath, err = os.Readlink(filepathProc(st.Pid, "exe"))
	if err != nil {
		t.Fatalf("the init's executable: %v", err)
	}
	kids, _ := os.ReadFile(filepathProc(st.Pid, "task", itoa(st.Pid), "children"))
	if f := strings.Fields(string(kids)); len(f) > 0 {
		workerPath, _ = os.Readlink("/proc/" + f[0] + "/exe")
	}
	return initPath, workerPath
}

// egressExe is what /proc/PID/exe of the session's egress proxy process
// names: the process whose command line is sbx-egress and whose stderr is
// the session's proxy.log.
func egressExe(t *testing.T, w *world, session string) string {
	t.Helper()
	dir := filepath.Join(w.state, "sbx", "sessions", session) + "/"
	cmdlines, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, c := range cmdlines {
		b, _ := os.ReadFile(c)
		if !strings.HasPrefix(string(b), "sbx-egress\x00") {
			continue
		}
		if l, _ := os.Readlink(filepath.Join(filepath.Dir(c), "fd", "2")); strings.HasPrefix(l, dir) {
			exe, err := os.Readlink(filepath.Join(filepath.Dir(c), "exe"))
			if err != nil {
				t.Fatalf("the egress process's executable: %v", err)
			}
			return exe
		}
	}
	t.Fatalf("no egress process of session %s (%v)", session, testenv.HostProcs("sbx-egress"))
	return ""
}

func filepathProc(pid int, parts ...string) string {
	return filepath.Join(append([]string{"/proc", itoa(pid)}, parts...)...)
}

func itoa(n int) string { return strconv.Itoa(n) }

// runKept runs `bin exec --keep --session name -- script` in w with extra
// environment, and fails unless the command ran and said "ran".
func runKept(t *testing.T, w *world, bin, name string, env []string) string {
	t.Helper()
	cmd := exec.Command(bin, "exec", "--keep", "--session", name, "--", "echo ran > out-"+name+".txt; echo ran")
	cmd.Dir = w.code
	// allow_net: the session has an egress proxy process too.
	cmd.Env = append(append(append([]string{}, w.env...), "SBX_DEBUG=1", "SBX_ALLOW_NET=127.0.0.1:9"), env...)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "ran\n") {
		t.Fatalf("%s exec: %v\n%s", bin, err, out)
	}
	if b, err := os.ReadFile(filepath.Join(w.code, "out-"+name+".txt")); err != nil || string(b) != "ran\n" {
		t.Fatalf("the command's file did not come back: %q %v\n%s", b, err, out)
	}
	return string(out)
}

// The sandbox's processes run the small sbx-sandbox when it is named (or
// beside sbx and the same build), and sbx itself through /proc/self/exe
// when the file is another build, not a Go program, or could have been
// replaced by someone else: each of those still works.
func TestSandboxRunsTheSmallBinary(t *testing.T) {
	small := os.Getenv(local.EnvSandboxBin)
	w := newWorld(t)
	out := runKept(t, w, sbxBin, "small", nil)
	if ini, wk := initExe(t, w, "small"); ini != small || wk != small {
		t.Fatalf("the init runs %q and its worker %q, want the small binary %q; sbx said:\n%s", ini, wk, small, out)
	}
	if e := egressExe(t, w, "small"); e != small {
		t.Fatalf("the egress proxy runs %q, want the small binary %q", e, small)
	}
	if !strings.Contains(out, "sandbox stages run sbx-sandbox") {
		t.Errorf("no debug line names the binary:\n%s", out)
	}
	w.sbx(t, w.code, "release", "--session", "small")

	// Run by hand, it says what it is and exits 2.
	cmd := exec.Command(small)
	cmd.Env = []string{}
	b, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(b), "sbx-sandbox runs the processes of sbx's local sandboxes") {
		t.Fatalf("sbx-sandbox by hand: %v %q", err, b)
	}

	dir := tempDir(t)
	os.Chmod(dir, 0o755)
	other := filepath.Join(dir, "other", local.SandboxBinName)
	os.Mkdir(filepath.Dir(other), 0o755)
	if err := testenv.Build(other, "../sbx-sandbox", "-ldflags=-X main.x=y"); err != nil {
		t.Fatal(err)
	}
	// sbx and a copy of /bin/true renamed sbx-sandbox beside it.
	beside := filepath.Join(dir, "beside")
	os.Mkdir(beside, 0o755)
	copyFile(t, sbxBin, filepath.Join(beside, "sbx"), 0o755)
	copyFile(t, "/bin/true", filepath.Join(beside, local.SandboxBinName), 0o755)
	// The same build, but group-writable; in a group-writable directory;
	// a link to it.
	gw := filepath.Join(dir, "gw", local.SandboxBinName)
	os.Mkdir(filepath.Dir(gw), 0o755)
	copyFile(t, small, gw, 0o775)
	os.Chmod(gw, 0o775)
	gwDir := filepath.Join(dir, "gwdir", local.SandboxBinName)
	os.Mkdir(filepath.Dir(gwDir), 0o775)
	os.Chmod(filepath.Dir(gwDir), 0o775)
	copyFile(t, small, gwDir, 0o755)
	// Owned by another user: only root can make such a file; run as an
	// ordinary user, the case is a root-owned file that is not Go.
	theirs := filepath.Join(dir, "theirs", local.SandboxBinName)
	os.Mkdir(filepath.Dir(theirs), 0o755)
	copyFile(t, small, theirs, 0o755)
	theirsWhy := "neither root nor this user"
	if os.Geteuid() == 0 {
		if err := os.Chown(theirs, 65534, 65534); err != nil {
			t.Fatal(err)
		}
	} else {
		theirs, theirsWhy = "/bin/true", "no Go build information"
	}
	// As root, the sandbox's host uid is not root's: a file only root may
	// run would start the init but no worker. As a user, the file of the
	// case is simply not executable.
	private := filepath.Join(dir, "private", local.SandboxBinName)
	os.Mkdir(filepath.Dir(private), 0o755)
	copyFile(t, small, private, 0o700)
	privateWhy := "not executable by others"
	if os.Geteuid() != 0 {
		os.Chmod(private, 0o600)
		privateWhy = "is not executable"
	}
	link := filepath.Join(dir, "link")
	os.Symlink(small, link)

	for _, c := range []struct {
		name, bin, env, why string
	}{
		{"another-build", sbxBin, other, "build setting -ldflags"},
		{"not-go", filepath.Join(beside, "sbx"), "", "no Go build information"},
		{"group-writable", sbxBin, gw, "writable by group or others"},
		{"group-writable-dir", sbxBin, gwDir, "writable by group or others"},
		{"link", sbxBin, link, "is a symbolic link"},
		{"another-owner", sbxBin, theirs, theirsWhy},
		{"private", sbxBin, private, privateWhy},
		{"relative", sbxBin, "sbx-sandbox", "not an absolute path"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := runKept(t, w, c.bin, c.name, []string{local.EnvSandboxBin + "=" + c.env})
			want, _ := filepath.EvalSymlinks(c.bin)
			if ini, wk := initExe(t, w, c.name); ini != want || wk != want {
				t.Errorf("the init runs %q and its worker %q, want sbx itself %q; sbx said:\n%s", ini, wk, want, out)
			}
			if e := egressExe(t, w, c.name); e != want {
				t.Errorf("the egress proxy runs %q, want sbx itself %q", e, want)
			}
			if !strings.Contains(out, c.why) {
				t.Errorf("the debug line does not say %q:\n%s", c.why, out)
			}
			cmd := exec.Command(c.bin, "release", "--session", c.name)
			cmd.Dir, cmd.Env = w.code, w.env
			if b, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("release: %v\n%s", err, b)
			}
		})
	}
}

func copyFile(t *testing.T, from, to string, mode os.FileMode) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, mode); err != nil {
		t.Fatal(err)
	}
}
