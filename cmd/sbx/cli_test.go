package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sbx-sh/sbx/internal/testenv"
	"github.com/sbx-sh/sbx/local"
	"github.com/sbx-sh/sbx/sandbox/sandboxtest"
)

var sbxBin string

func TestMain(m *testing.M) {
	local.Main()
	dir, err := os.MkdirTemp("", "sbxbin")
	if err != nil {
		panic(err)
	}
	sbxBin = filepath.Join(dir, "sbx")
	if err := testenv.Build(sbxBin, "."); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// The sandbox's own small binary beside it, as go install puts it, and
	// named explicitly: a test build (-buildvcs=false, or a modified tree)
	// is not found beside by itself (local/stagebin_linux.go).
	if err := testenv.Build(filepath.Join(dir, local.SandboxBinName), "../sbx-sandbox"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Setenv(local.EnvSandboxBin, filepath.Join(dir, local.SandboxBinName))
	os.Chmod(dir, 0o755)
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func tempDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "sbxc")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// world is one user's machine: a home, a state dir, and a git work tree.
type world struct {
	home, state, code string
	env               []string
}

func newWorld(t *testing.T) *world {
	t.Helper()
	w := &world{home: tempDir(t), state: tempDir(t), code: tempDir(t)}
	os.MkdirAll(filepath.Join(w.code, ".git"), 0o755)
	os.WriteFile(filepath.Join(w.code, "README"), []byte("hello\n"), 0o644)
	w.env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + w.home, "XDG_STATE_HOME=" + w.state, "LANG=C", local.EnvSandboxBin + "=" + os.Getenv(local.EnvSandboxBin)}
	t.Cleanup(func() {
		w.sbx(t, w.code, "release", "--all")
		// What a failed test, a broken session or a failed release left.
		if left := testenv.EndSandboxes(w.state); len(left) > 0 {
			t.Logf("ended what the test left running: %s", strings.Join(left, "; "))
		}
	})
	return w
}

type result struct {
	stdout, stderr string
	code           int
}

func (w *world) sbx(t *testing.T, dir string, args ...string) result {
	t.Helper()
	return w.sbxEnv(t, dir, nil, args...)
}

func (w *world) sbxEnv(t *testing.T, dir string, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, sbxBin, args...)
	cmd.Dir = dir
	cmd.Env = append(append([]string{}, w.env...), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run sbx %v: %v", args, err)
	}
	return result{stdout.String(), stderr.String(), code}
}

// treeHash summarizes a tree (paths, modes, contents) to prove it unchanged.
func treeHash(t *testing.T, root string) string {
	t.Helper()
	h := sha256.New()
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, _ := d.Info()
		fmt.Fprintf(h, "%s %v\n", p, fi.Mode())
		if fi.Mode().IsRegular() {
			b, _ := os.ReadFile(p)
			h.Write(b)
		}
		return nil
	})
	return fmt.Sprintf("%x", h.Sum(nil))
}

func TestExecRunsInSandboxAndBringsChangesBack(t *testing.T) {
	w := newWorld(t)
	r := w.sbx(t, w.code, "exec", "--", "echo", "made", ">", "out.txt;", "id", "-u;", "pwd")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if !strings.Contains(r.stdout, "1000") || !strings.Contains(r.stdout, w.code) {
		t.Fatalf("stdout %q", r.stdout)
	}
	if b, _ := os.ReadFile(filepath.Join(w.code, "out.txt")); string(b) != "made\n" {
		t.Fatalf("change not brought back: %q", b)
	}
	// Without --keep nothing is left.
	if r := w.sbx(t, w.code, "ls"); strings.Count(r.stdout, "\n") != 1 {
		t.Fatalf("unkept session listed:\n%s", r.stdout)
	}
}

func TestExitCodesAndTimeout(t *testing.T) {
	w := newWorld(t)
	if r := w.sbx(t, w.code, "exec", "--", "exit 42"); r.code != 42 {
		t.Fatalf("exit code %d, want 42 (%s)", r.code, r.stderr)
	}
	start := time.Now()
	r := w.sbx(t, w.code, "exec", "--timeout", "1s", "--", "setsid sleep 60 & sleep 60")
	if r.code != 124 || !strings.Contains(r.stderr, "timed out") {
		t.Fatalf("timeout: exit %d, stderr %q", r.code, r.stderr)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Fatalf("timeout took %s", d)
	}
}

func TestOutputStreamsLive(t *testing.T) {
	w := newWorld(t)
	cmd := exec.Command(sbxBin, "exec", "--", "echo first; sleep 3; echo second")
	cmd.Dir, cmd.Env = w.code, w.env
	pr, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	start := time.Now()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil || line != "first\n" {
		t.Fatalf("first line %q %v", line, err)
	}
	if d := time.Since(start); d > 2500*time.Millisecond {
		t.Fatalf("first line arrived after %s: output is not streamed", d)
	}
	io.Copy(io.Discard, pr)
}

func TestKeepReuseListRelease(t *testing.T) {
	w := newWorld(t)
	if r := w.sbx(t, w.code, "exec", "--keep", "--session", "k", "--", "echo 1 > /tmp/state"); r.code != 0 {
		t.Fatalf("exec: %d %s", r.code, r.stderr)
	}
	if r := w.sbx(t, w.code, "exec", "--session", "k", "--", "cat /tmp/state"); r.code != 0 || r.stdout != "1\n" {
		t.Fatalf("reuse: %d %q %s", r.code, r.stdout, r.stderr)
	}
	r := w.sbx(t, w.code, "ls")
	if !strings.Contains(r.stdout, "NAME") || !strings.Contains(r.stdout, "k ") || !strings.Contains(r.stdout, "local") || !strings.Contains(r.stdout, w.code) {
		t.Fatalf("ls:\n%s", r.stdout)
	}
	if r := w.sbx(t, w.code, "release", "--session", "k"); r.code != 0 || !strings.Contains(r.stdout, "released k") {
		t.Fatalf("release: %d %s %s", r.code, r.stdout, r.stderr)
	}
	if r := w.sbx(t, w.code, "ls"); strings.Contains(r.stdout, "k ") {
		t.Fatalf("released session listed:\n%s", r.stdout)
	}
	if r := w.sbx(t, w.code, "release", "--session", "k"); r.code != 125 || !strings.Contains(r.stderr, "no such session") {
		t.Fatalf("release of a missing session: %d %s", r.code, r.stderr)
	}
	if r := w.sbx(t, w.code, "release"); r.code != 2 {
		t.Fatalf("release without a name: %d", r.code)
	}
}

func TestReleaseAll(t *testing.T) {
	w := newWorld(t)
	for _, n := range []string{"a", "b"} {
		if r := w.sbx(t, w.code, "exec", "--keep", "--session", n, "--", "true"); r.code != 0 {
			t.Fatal(r.stderr)
		}
	}
	r := w.sbx(t, w.code, "release", "--all")
	if r.code != 0 || !strings.Contains(r.stdout, "released a") || !strings.Contains(r.stdout, "released b") {
		t.Fatalf("release --all: %d %q %q", r.code, r.stdout, r.stderr)
	}
}

func TestHostEnvironmentAbsent(t *testing.T) {
	w := newWorld(t)
	r := w.sbxEnv(t, w.code, []string{"AWS_SECRET_ACCESS_KEY=AKIAFAKE123", "GITHUB_TOKEN=ghp_fake"}, "exec", "--", "env")
	if r.code != 0 {
		t.Fatal(r.stderr)
	}
	if strings.Contains(r.stdout, "AKIAFAKE123") || strings.Contains(r.stdout, "ghp_fake") {
		t.Fatalf("host secrets in the sandbox environment:\n%s", r.stdout)
	}
	for _, want := range []string{"PATH=", "HOME=/home/sbx", "LANG=", "TERM=", "CI=1", "GIT_TERMINAL_PROMPT=0"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("sandbox environment lacks %s:\n%s", want, r.stdout)
		}
	}
}

func TestNetFlag(t *testing.T) {
	w := newWorld(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("pong\n"))
			c.Close()
		}
	}()
	probe := fmt.Sprintf("exec 3<>/dev/tcp/127.0.0.1/%d && head -1 <&3", ln.Addr().(*net.TCPAddr).Port)
	if r := w.sbx(t, w.code, "exec", "--", "bash -c '"+probe+"'"); r.code == 0 || strings.Contains(r.stdout, "pong") {
		t.Fatalf("host listener reachable without --net: %d %q", r.code, r.stdout)
	}
	if r := w.sbx(t, w.code, "exec", "--net", "--", "bash -c '"+probe+"'"); r.code != 0 || !strings.Contains(r.stdout, "pong") {
		t.Fatalf("host listener unreachable with --net: %d %q %q", r.code, r.stdout, r.stderr)
	}
}

func TestBadInput(t *testing.T) {
	w := newWorld(t)
	other := tempDir(t)
	notDir := filepath.Join(tempDir(t), "file")
	os.WriteFile(notDir, []byte("x"), 0o644)
	before := treeHash(t, w.code)
	cases := []struct {
		name string
		dir  string
		env  []string
		args []string
		want string
	}{
		{"cwd outside code dirs", other, nil, []string{"exec", "--code-dir", w.code, "--", "touch x"}, "not inside a code dir"},
		{"missing code dir", w.code, nil, []string{"exec", "--code-dir", filepath.Join(other, "nope"), "--", "touch x"}, "no such file or directory"},
		{"code dir is a file", w.code, nil, []string{"exec", "--code-dir", notDir, "--", "touch x"}, "not a directory"},
		{"unwritable state dir", w.code, []string{"XDG_STATE_HOME=" + notDir}, []string{"exec", "--", "touch x"}, "state directory"},
		{"bad timeout", w.code, nil, []string{"exec", "--timeout", "soon", "--", "touch x"}, "not a duration"},
		{"bad session name", w.code, nil, []string{"exec", "--session", "../x", "--", "touch x"}, "bad session name"},
		{"code dir holds home", w.code, []string{"HOME=" + w.code + "/home"}, []string{"exec", "--", "touch x"}, "home directory"},
		{"bad env value", w.code, []string{"SBX_MEMORY=lots"}, []string{"exec", "--", "touch x"}, "SBX_MEMORY"},
	}
	os.MkdirAll(filepath.Join(w.code, "home"), 0o755)
	before = treeHash(t, w.code)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := w.sbxEnv(t, c.dir, c.env, c.args...)
			if r.code != 125 {
				t.Fatalf("exit %d, want 125; stderr %q", r.code, r.stderr)
			}
			if !strings.HasPrefix(r.stderr, "sbx: error: ") || !strings.Contains(r.stderr, c.want) {
				t.Fatalf("stderr %q does not say %q", r.stderr, c.want)
			}
			if after := treeHash(t, w.code); after != before {
				t.Fatal("the host tree changed")
			}
		})
	}
}

func TestMalformedConfig(t *testing.T) {
	w := newWorld(t)
	cfgDir := filepath.Join(w.home, ".config", "sbx")
	os.MkdirAll(cfgDir, 0o755)
	for _, c := range []struct {
		name, file, content, want string
	}{
		{"syntax", filepath.Join(cfgDir, "config.toml"), "network = \"none\"\nidle_ttl = [\n", "config.toml:"},
		{"unknown key", filepath.Join(cfgDir, "config.toml"), "# x\nnetwrok = \"host\"\n", "config.toml:2: netwrok: unknown key"},
		{"bad value", filepath.Join(cfgDir, "config.toml"), "memory = \"lots\"\n", "config.toml:1: memory:"},
		{"project widens network", filepath.Join(w.code, ".sbx.toml"), "network = \"host\"\n", ".sbx.toml:1: network: the project's .sbx.toml may only narrow"},
		{"project widens memory", filepath.Join(w.code, ".sbx.toml"), "memory = \"64GiB\"\n", ".sbx.toml:1: memory: the project's .sbx.toml may only narrow"},
	} {
		t.Run(c.name, func(t *testing.T) {
			os.WriteFile(c.file, []byte(c.content), 0o644)
			defer os.Remove(c.file)
			before := treeHash(t, w.code)
			r := w.sbx(t, w.code, "exec", "--", "touch made")
			if r.code != 125 || !strings.Contains(r.stderr, c.want) {
				t.Fatalf("exit %d, stderr %q, want 125 and %q", r.code, r.stderr, c.want)
			}
			if after := treeHash(t, w.code); after != before {
				t.Fatal("the host tree changed")
			}
		})
	}
	// A project file that narrows is accepted.
	os.WriteFile(filepath.Join(w.code, ".sbx.toml"), []byte("memory = \"1GiB\"\nnetwork = \"none\"\n"), 0o644)
	if r := w.sbx(t, w.code, "exec", "--", "true"); r.code != 0 {
		t.Fatalf("narrowing project config refused: %s", r.stderr)
	}
}

func TestInterruptReleases(t *testing.T) {
	w := newWorld(t)
	cmd := exec.Command(sbxBin, "exec", "--", "echo ready; exec sleep 60.4321")
	cmd.Dir, cmd.Env = w.code, w.env
	pr, _ := cmd.StdoutPipe()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	bufio.NewReader(pr).ReadString('\n')
	cmd.Process.Signal(syscall.SIGINT)
	err := cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 130 {
		t.Fatalf("interrupted exec: %v (%s)", err, stderr.String())
	}
	entries, _ := os.ReadDir(filepath.Join(w.state, "sbx", "sessions"))
	if len(entries) != 0 {
		t.Fatalf("session state left after interrupt: %v", entries)
	}
	dirs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, d := range dirs {
		if b, _ := os.ReadFile(d); strings.Contains(string(b), "60.4321") {
			t.Fatalf("command survived the interrupt: %s", d)
		}
	}
}

func TestUnprivilegedUser(t *testing.T) {
	if os.Getuid() != 0 {
		// Already an ordinary user: every other test covers this case.
		t.Log("running as an ordinary user already")
		return
	}
	w := newWorld(t)
	for _, d := range []string{w.home, w.state, w.code} {
		exec.Command("chown", "-R", "65534:65534", d).Run()
	}
	cmd := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--", sbxBin, "exec", "--", "id -u; echo hi > made.txt")
	cmd.Dir, cmd.Env = w.code, w.env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("sbx as an ordinary user: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "1000") {
		t.Fatalf("output %q", out)
	}
	fi, err := os.Stat(filepath.Join(w.code, "made.txt"))
	if err != nil {
		t.Fatalf("change not brought back: %v", err)
	}
	if st := fi.Sys().(*syscall.Stat_t); st.Uid != 65534 {
		t.Fatalf("file brought back owned by %d, want the user (65534)", st.Uid)
	}
}

func TestShellHasTerminalWithWindowSize(t *testing.T) {
	w := newWorld(t)
	master, slave := openTestPTY(t)
	unix.IoctlSetWinsize(int(master.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 31, Col: 97})
	cmd := exec.Command(sbxBin, "shell")
	cmd.Dir, cmd.Env = w.code, append(w.env, "TERM=xterm")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	slave.Close()
	var out sandboxtest.Buffer
	done := make(chan struct{})
	go func() { io.Copy(&out, master); close(done) }()
	// Type once the shell prompts ("...$ "), as a user does.
	deadline := time.Now().Add(30 * time.Second)
	for !strings.HasSuffix(out.String(), "$ ") {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("no shell prompt within 30s; the terminal shows %q", out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	master.Write([]byte("stty size; tty; exit 7\n"))
	werr := make(chan error, 1)
	go func() { werr <- cmd.Wait() }()
	select {
	case err := <-werr:
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 7 {
			t.Errorf("shell exit: %v", err)
		}
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatal("shell did not exit")
	}
	master.Close()
	<-done
	if !strings.Contains(out.String(), "31 97") || !strings.Contains(out.String(), "/dev/pts/") {
		t.Fatalf("terminal size or tty not passed through:\n%s", out.String())
	}
}

func TestShellNeedsTerminal(t *testing.T) {
	w := newWorld(t)
	if r := w.sbx(t, w.code, "shell"); r.code != 2 || !strings.Contains(r.stderr, "needs a terminal") {
		t.Fatalf("shell without a terminal: %d %q", r.code, r.stderr)
	}
}

func TestVersionAndUsage(t *testing.T) {
	w := newWorld(t)
	if r := w.sbx(t, w.code, "version"); r.code != 0 || !strings.HasPrefix(r.stdout, "sbx ") {
		t.Fatalf("version: %d %q", r.code, r.stdout)
	}
	if r := w.sbx(t, w.code, "frobnicate"); r.code != 2 || !strings.Contains(r.stderr, "unknown command") {
		t.Fatalf("unknown command: %d %q", r.code, r.stderr)
	}
	if r := w.sbx(t, w.code, "exec"); r.code != 2 {
		t.Fatalf("exec without a command: %d", r.code)
	}
}

func TestRoute(t *testing.T) {
	w := newWorld(t)
	for _, c := range []struct {
		args []string
		want string
		code int
	}{
		{[]string{"route", "--", "git", "push", "origin", "main"}, "host: git push", 0},
		{[]string{"route", "--", "make test"}, "sandbox: ", 0},
		{[]string{"route", "--json", "--", "git push $(id)"}, `{"where":"sandbox","reason":"sandbox: command substitution`, 0},
		{[]string{"route", "--json", "--", "git push"}, `{"where":"host"`, 0},
		{[]string{"route", "--cwd", "/", "--", "git push"}, "sandbox: ", 0},
		{[]string{"route", "--host-command", "git fetch", "--", "git push"}, "sandbox: ", 0},
		{[]string{"route"}, "needs a command", 2},
		{[]string{"route", "--bogus", "--", "x"}, "flag provided but not defined", 2},
		{[]string{"route", "--host-command", "sh -c", "--", "x"}, "host command", 2},
	} {
		r := w.sbx(t, w.code, c.args...)
		if r.code != c.code || !strings.Contains(r.stdout+r.stderr, c.want) {
			t.Errorf("%v: exit %d, out %q %q; want %d and %q", c.args, r.code, r.stdout, r.stderr, c.code, c.want)
		}
	}
}

func TestQuarantineAndAccept(t *testing.T) {
	w := newWorld(t)
	r := w.sbx(t, w.code, "exec", "--", "mkdir -p .claude && echo '{\"hooks\":1}' > .claude/settings.json")
	if r.code != 0 || !strings.Contains(r.stderr, "quarantined") {
		t.Fatalf("exec: %d %q", r.code, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(w.code, ".claude/settings.json")); err == nil {
		t.Fatal("protected file reached the host")
	}
	r = w.sbx(t, w.code, "accept")
	if r.code != 0 || !strings.Contains(r.stdout, ".claude/settings.json") {
		t.Fatalf("accept list: %d %q %q", r.code, r.stdout, r.stderr)
	}
	if r := w.sbx(t, w.code, "accept", "nope"); r.code != 125 {
		t.Fatalf("accepting a missing file: %d", r.code)
	}
	if r := w.sbx(t, w.code, "accept", ".claude/settings.json"); r.code != 0 {
		t.Fatalf("accept: %d %q", r.code, r.stderr)
	}
	if b, _ := os.ReadFile(filepath.Join(w.code, ".claude/settings.json")); !strings.Contains(string(b), "hooks") {
		t.Fatalf("accepted file: %q", b)
	}
}
