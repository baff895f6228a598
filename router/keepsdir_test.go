package router

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// keepsDirTable: commands and whether KeepsDir may hold for them. Every
// command that changes the shell's directory in bash is on the false side;
// some that do not are there too (the analysis errs on the safe side).
var keepsDirTable = []struct {
	cmd   string
	keeps bool
}{
	{"true", true},
	{"ls -la; echo done", true},
	{"go test ./... 2>&1 | tail -3", true},
	{`set -euo pipefail; x=$(pwd); echo "$x"`, true},
	{"git status && git diff --stat", true},
	{`for f in a b; do echo "$f"; done`, true},
	{`f() { echo hi; }; f`, true},
	{`'echo' "ok"`, true},
	{"(cd /tmp)", false}, // a subshell: safe, but the walk does not tell
	{"cd /tmp", false},
	{"cd /tmp && ls", false},
	{"pushd /tmp", false},
	{"popd", false},
	{"'cd' /tmp", false},
	{`"cd" /tmp`, false},
	{`c''d /tmp`, false},
	{`c"d" /tmp`, false},
	{`\cd /tmp`, false},
	{`{cd,} /tmp`, false},
	{`$'cd' /tmp`, false},
	{`c=cd; $c /tmp`, false},
	{`"$(echo cd)" /tmp`, false},
	{"eval 'cd /tmp'", false},
	{"builtin cd /tmp", false},
	{"command cd /tmp", false},
	{"exec bash -c 'cd /tmp'", false},
	{"trap 'cd /tmp' EXIT", false},
	{"source ./x.sh", false},
	{". ./x.sh", false},
	{"f() { cd /tmp; }; f", false},
	{"shopt -s expand_aliases\nalias go=cd\ngo /tmp", false},
	{"mapfile -C cd -c 1 <<< x", false},
	{"c?d /tmp", false},
	{"[ -d /tmp ] && echo yes", true},
	{"[c]d /tmp", false},
	{"if true; then cd /tmp; fi", false},
	{"echo $(", false},   // does not parse
	{"ls \u00e9", false}, // refused before any parse
}

func TestKeepsDir(t *testing.T) {
	for _, c := range keepsDirTable {
		d := Decide(c.cmd, "/", nil, nil)
		if d.KeepsDir != c.keeps {
			t.Errorf("%q: KeepsDir %v, want %v", c.cmd, d.KeepsDir, c.keeps)
		}
	}
}

// TestKeepsDirAgainstBash runs every command of the table with a real bash
// (as nobody, builtins only) and checks the oracle: where KeepsDir holds,
// bash ends where it began; and the table's cd commands do move it, so
// that the oracle can fail.
func TestKeepsDirAgainstBash(t *testing.T) {
	o := newDirOracle(t)
	for _, c := range keepsDirTable {
		end, ok := o.run(t, c.cmd)
		if !ok {
			continue
		}
		if c.keeps && end != o.start {
			t.Errorf("%q: KeepsDir, but bash ended in %s, not %s", c.cmd, end, o.start)
		}
		if strings.HasPrefix(c.cmd, "cd /tmp") && end == o.start {
			t.Errorf("%q: bash stayed in %s: the oracle sees nothing", c.cmd, end)
		}
	}
}

// FuzzKeepsDir: whenever Decide says KeepsDir, a real bash running the
// command (as nobody, with no program on PATH, so that only builtins run,
// bounded in time) ends in the directory it started in.
func FuzzKeepsDir(f *testing.F) {
	o := newDirOracle(f)
	for _, c := range keepsDirTable {
		f.Add(c.cmd)
	}
	f.Fuzz(func(t *testing.T, cmd string) {
		d := Decide(cmd, "/", nil, nil)
		if !d.KeepsDir {
			return
		}
		if end, ok := o.run(t, cmd); ok && end != o.start {
			t.Fatalf("%q: KeepsDir, but bash ended in %s, not %s", cmd, end, o.start)
		}
	})
}

// dirOracle runs bash -c CMD in start, a scratch directory, and reports
// where the shell ended (an EXIT trap read through BASH_ENV writes a random
// mark and pwd -P to fd 3: the command may write to fd 3 too, as "2>&3 0"
// did, whose "command not found" the oracle once took for the directory);
// ok is false when bash wrote no report (killed, timed out, fd 3 closed).
type dirOracle struct {
	start string
	run   func(t testing.TB, cmd string) (end string, ok bool)
}

func newDirOracle(tb testing.TB) *dirOracle {
	tb.Helper()
	bash, err := exec.LookPath("bash")
	if err != nil {
		tb.Fatal("the oracle needs bash on PATH (apt-get install bash)")
	}
	// Its own directory in the temp dir, so that nobody can reach it
	// (t.TempDir's parent is private).
	root, err := os.MkdirTemp("", "keepsdir")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(root) })
	if root, err = filepath.EvalSymlinks(root); err != nil {
		tb.Fatal(err)
	}
	os.Chmod(root, 0o755)
	start := filepath.Join(root, "start")
	trapFile := filepath.Join(root, "trap.sh")
	if err := os.Mkdir(start, 0o777); err != nil {
		tb.Fatal(err)
	}
	os.Chmod(start, 0o777)
	var nonce [16]byte
	rand.Read(nonce[:])
	mark := fmt.Sprintf("sbx-oracle-%x:", nonce) // letters, digits, a colon: no quoting
	trap := fmt.Sprintf("unset BASH_ENV\ntrap 'printf %%s %s >&3 2>/dev/null; pwd -P >&3 2>/dev/null' EXIT\n", mark)
	if err := os.WriteFile(trapFile, []byte(trap), 0o644); err != nil {
		tb.Fatal(err)
	}
	o := &dirOracle{start: start}
	o.run = func(t testing.TB, cmd string) (string, bool) {
		if strings.ContainsRune(cmd, 0) {
			return "", false
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		c := exec.CommandContext(ctx, bash, "-c", cmd)
		c.Dir = start
		c.Env = []string{"PATH=/nonexistent", "BASH_ENV=" + trapFile, "HOME=" + start}
		c.ExtraFiles = []*os.File{w}
		c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if os.Geteuid() == 0 {
			c.SysProcAttr.Credential = &syscall.Credential{Uid: 65534, Gid: 65534}
		}
		c.Stdin = strings.NewReader("")
		if err := c.Start(); err != nil {
			w.Close()
			r.Close()
			t.Fatal(err)
		}
		w.Close()
		var out bytes.Buffer
		done := make(chan struct{})
		go func() { out.ReadFrom(r); close(done) }()
		c.Wait()
		if c.Process != nil {
			syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
		}
		select {
		case <-done:
		case <-ctx.Done():
		}
		r.Close()
		// The report after the last mark; what the command wrote to fd 3
		// before it is not the shell's directory.
		i := strings.LastIndex(out.String(), mark)
		if i < 0 {
			return "", false
		}
		end := strings.TrimSuffix(out.String()[i+len(mark):], "\n")
		return end, end != ""
	}
	return o
}
