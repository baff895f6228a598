package session

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/sbx-sh/sbx/sandbox"
	sbxsync "github.com/sbx-sh/sbx/sync"
)

// run is sh with a shell of the caller's choosing: "/bin/bash" is the bash
// tool's path (bash started directly, the wrapper's script on fd 4), any
// other the sh wrapper's.
func run(t *testing.T, s *Session, shell, command string) (string, Outcome) {
	t.Helper()
	var out bytes.Buffer
	o, err := s.Exec(context.Background(), Run{Command: command, Shell: shell, Stdout: &out, Stderr: &out, Timeout: 30 * time.Second})
	if err != nil {
		t.Fatalf("exec %q with %s: %v", command, shell, err)
	}
	return out.String(), o
}

// TestBashStartsWithoutAWrapperShell: the bash tool's command is bash
// itself, with nothing of the wrapper visible to the command: BASH_ENV is
// unset for it and for the shells it starts, fd 4 is closed, $0 is bash,
// and its errors read as `bash -c`'s own.
func TestBashStartsWithoutAWrapperShell(t *testing.T) {
	f := newFixture(t)
	s := f.open(t, "bashenv", false)
	s.mu.Lock()
	cmd, _, _ := s.command(Run{Command: "true", Shell: "/bin/bash"}, true)
	s.mu.Unlock()
	if cmd.Argv[0] != "/bin/bash" || len(cmd.Fd4) == 0 || len(cmd.Fallback) == 0 {
		t.Fatalf("the bash tool's command is %q (fd 4 %d bytes, fallback %q): want bash itself, its script on fd 4 and the sh wrapper as fallback", cmd.Argv, len(cmd.Fd4), cmd.Fallback)
	}
	for _, tc := range []struct{ name, command, want string }{
		{"BASH_ENV unset in the command", `echo "[${BASH_ENV-unset}]"`, "[unset]\n"},
		{"BASH_ENV unset in a child bash", `bash -c 'echo "[${BASH_ENV-unset}]"'`, "[unset]\n"},
		{"BASH_ENV not in the environment", `env | grep -c '^BASH_ENV=' || true`, "0\n"},
		{"fd 4 closed", `[ -e /proc/self/fd/4 ] && echo open || echo closed`, "closed\n"},
		{"fd 4 closed in a child", `ls /proc/self/fd/4 2>/dev/null || echo closed`, "closed\n"},
		{"$0 is bash", `echo "$0"`, "bash\n"},
		{"one line", `echo $LINENO`, "1\n"},
		{"the command's own line numbers", "echo a\necho $LINENO", "a\n2\n"},
		{"the error is bash's", "true\nnonexistent_cmd_xyz", "bash: line 2: nonexistent_cmd_xyz: command not found\n"},
		{"starts in the code dir", `pwd`, f.code + "\n"},
	} {
		out, o := run(t, s, "/bin/bash", tc.command)
		if out != tc.want {
			t.Errorf("%s: %q printed %q (exit %d), want %q", tc.name, tc.command, out, o.ExitCode, tc.want)
		}
	}
	// And what bash -c prints on the host, for the error (the sandbox's
	// bash is the host's).
	want, _ := exec.Command("/bin/bash", "-c", "true\nnonexistent_cmd_xyz", "bash").CombinedOutput()
	if out, _ := run(t, s, "/bin/bash", "true\nnonexistent_cmd_xyz"); out != string(want) {
		t.Errorf("the error is %q, bash -c prints %q", out, want)
	}
}

// TestCwdReportAttacks: the command owns its shell, its trap and its fd 3.
// Whatever it does to them, its exit code stands, nothing of the wrapper
// shows in its output, and the next command starts where the last report
// that could be taken said (or, refused, where the previous one started),
// for both wrappers.
func TestCwdReportAttacks(t *testing.T) {
	for _, shell := range []string{"/bin/bash", "/bin/sh"} {
		t.Run(filepath.Base(shell), func(t *testing.T) {
			f := newFixture(t)
			s := f.open(t, "cwdattack", false)
			sub := filepath.Join(f.code, "sub")
			for _, tc := range []struct {
				name, command string
				exit          int
				out           string
				next          string // where the next command starts
				noted         bool   // the report was refused, with a notice
			}{
				{"a plain cd", "cd sub", 0, "", sub, false},
				{"back", "cd ..", 0, "", f.code, false},
				{"the trap unset", "cd sub; trap - EXIT; exit 3", 3, "", f.code, false},
				{"the trap replaced", "trap 'echo bye' EXIT; cd sub", 0, "bye\n", f.code, false},
				{"fd 3 closed", "cd sub; exec 3>&-; exit 4", 4, "", f.code, false},
				{"garbage on fd 3", "echo junk >&3; cd sub", 0, "", f.code, true},
				{"a relative path on fd 3", "printf sub >&3; exec 3>&-", 0, "", f.code, true},
				{"a megabyte on fd 3", "head -c 1000000 /dev/zero >&3; cd sub; exit 5", 5, "", f.code, true},
				{"fd 3 pointed elsewhere", "exec 3>/dev/null; cd sub", 0, "", f.code, false},
			} {
				out, o := run(t, s, shell, tc.command)
				notes := s.Notices()
				if o.ExitCode != tc.exit || out != tc.out {
					t.Errorf("%s: %q: exit %d, output %q; want exit %d, output %q", tc.name, tc.command, o.ExitCode, out, tc.exit, tc.out)
				}
				if noted := slices.ContainsFunc(notes, func(n string) bool { return strings.Contains(n, "was ignored") }); noted != tc.noted {
					t.Errorf("%s: notices %q, want a refused report: %v", tc.name, notes, tc.noted)
				}
				if got, _ := run(t, s, shell, "pwd"); got != tc.next+"\n" {
					t.Errorf("%s: the next command started in %q, want %q", tc.name, got, tc.next)
				}
			}
		})
	}
}

// TestCwdWithShellCharacters: the directory a command ended in is the
// sandbox's choice, and bash's script names it: a quote, a $( ) or a
// newline-free mess in its name is a name, never code.
func TestCwdWithShellCharacters(t *testing.T) {
	f := newFixture(t)
	s := f.open(t, "cwdquote", false)
	name := `it's $(touch pwned) "x" ` + "`touch pwned2`" + ` \'; touch pwned3; '`
	write(t, filepath.Join(f.code, "name.txt"), name, 0o644)
	if out, o := run(t, s, "/bin/bash", `d=$(cat name.txt); rm name.txt; mkdir -p -- "$d" && cd -- "$d"`); o.ExitCode != 0 {
		t.Fatalf("mkdir and cd: exit %d, %q", o.ExitCode, out)
	}
	out, o := run(t, s, "/bin/bash", "pwd; ls -A")
	if want := filepath.Join(f.code, name) + "\n"; o.ExitCode != 0 || out != want {
		t.Fatalf("the next command printed %q (exit %d), want %q and nothing in the directory", out, o.ExitCode, want)
	}
	for _, p := range []string{"pwned", "pwned2", "pwned3"} {
		if _, err := os.Lstat(filepath.Join(f.code, name, p)); err == nil {
			t.Errorf("the directory's name ran as code: %s exists", p)
		}
	}
}

// TestDeletedCwdFallsBackWithBash is TestDeletedCwdFallsBackToTheCodeDir
// on the bash tool's path.
func TestDeletedCwdFallsBackWithBash(t *testing.T) {
	f := newFixture(t)
	s := f.open(t, "cwdgonebash", false)
	run(t, s, "/bin/bash", "mkdir -p gone && cd gone")
	run(t, s, "/bin/bash", "rmdir ../gone; true")
	out, o := run(t, s, "/bin/bash", "pwd")
	want := "sbx: " + filepath.Join(f.code, "gone") + " no longer exists; running in " + f.code + "\n" + f.code + "\n"
	if o.ExitCode != 0 || out != want {
		t.Fatalf("exit %d:\n%q\nwant\n%q", o.ExitCode, out, want)
	}
}

// TestLongCwdWithBash: a working directory too long for bash's script on
// fd 4 (two copies of it and the code dir, past sandbox.MaxFd4) is
// carried by the sh wrapper instead.
func TestLongCwdWithBash(t *testing.T) {
	f := newFixture(t)
	s := f.open(t, "cwdlong", false)
	el := strings.Repeat("x", 200)
	long := f.code + strings.Repeat("/"+el, 12)
	if out, o := run(t, s, "/bin/bash", `p=.; for i in $(seq 12); do p=$p/`+el+`; done; mkdir -p "$p" && cd "$p"`); o.ExitCode != 0 {
		t.Fatalf("mkdir and cd: exit %d, %q", o.ExitCode, out)
	}
	s.mu.Lock()
	cmd, _, _ := s.command(Run{Command: "pwd", Shell: "/bin/bash"}, true)
	s.mu.Unlock()
	if len(cmd.Fd4) != 0 || cmd.Argv[0] != "/bin/sh" {
		t.Fatalf("a cwd of %d bytes went to bash's script (%d bytes on fd 4)", len(long), len(cmd.Fd4))
	}
	if out, o := run(t, s, "/bin/bash", "pwd; cd .."); o.ExitCode != 0 || out != long+"\n" {
		t.Fatalf("exit %d, %q; want %q", o.ExitCode, out, long)
	}
	if out, _ := run(t, s, "/bin/bash", "pwd"); out != filepath.Dir(long)+"\n" {
		t.Fatalf("after cd ..: %q", out)
	}
}

// TestInfoStampedNotRewritten: a command that changes nothing of the
// session's record but its last use stamps the time on info.json instead
// of rewriting it (a write and a rename per command); one that moves the
// cwd rewrites it, and a reader sees both.
func TestInfoStampedNotRewritten(t *testing.T) {
	f := newFixture(t)
	s := f.open(t, "stamp", false)
	run(t, s, "/bin/bash", "true") // claims, saves the record
	path := filepath.Join(f.root, "stamp", "info.json")
	inode := func() uint64 {
		t.Helper()
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Sys().(*syscall.Stat_t).Ino
	}
	before, ino := time.Now(), inode()
	run(t, s, "/bin/bash", "true")
	if got := inode(); got != ino {
		t.Errorf("a command that changed nothing rewrote info.json (inode %d, then %d)", ino, got)
	}
	info, err := readInfo(filepath.Join(f.root, "stamp"))
	if err != nil || info.LastUsed.Before(before) {
		t.Errorf("last use %v after a command at %v (err %v): the stamp was not read", info.LastUsed, before, err)
	}
	run(t, s, "/bin/bash", "cd sub")
	if got := inode(); got == ino {
		t.Errorf("a cd did not save the record")
	}
	if info, err := readInfo(filepath.Join(f.root, "stamp")); err != nil || info.Cwd != filepath.Join(f.code, "sub") {
		t.Errorf("saved cwd %q (err %v), want %s", info.Cwd, err, filepath.Join(f.code, "sub"))
	}
}

// TestNoChangePullMakesNoSpoolFile: a round trip that brings nothing back
// creates no spool file in the state directory (its create, truncate and
// unlink were per-command disk work); one that brings a change back does,
// as the journal of an interrupted pull.
func TestNoChangePullMakesNoSpoolFile(t *testing.T) {
	f := newFixture(t)
	s := f.open(t, "spool", false)
	run(t, s, "/bin/bash", "true")
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if _, err := unix.InotifyAddWatch(fd, filepath.Join(f.root, "spool"), unix.IN_CREATE); err != nil {
		t.Fatal(err)
	}
	created := func() []string {
		var names []string
		buf := make([]byte, 64<<10)
		for {
			n, err := unix.Read(fd, buf)
			if err != nil || n <= 0 {
				return names
			}
			for off := 0; off+unix.SizeofInotifyEvent <= n; {
				ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
				name := strings.TrimRight(string(buf[off+unix.SizeofInotifyEvent:off+unix.SizeofInotifyEvent+int(ev.Len)]), "\x00")
				names = append(names, name)
				off += unix.SizeofInotifyEvent + int(ev.Len)
			}
		}
	}
	run(t, s, "/bin/bash", "true")
	if got := created(); slices.Contains(got, "pull.spool") {
		t.Errorf("a no-change round trip created %q in the state directory", got)
	}
	run(t, s, "/bin/bash", "echo x > new.txt")
	if got := created(); !slices.Contains(got, "pull.spool") {
		t.Errorf("a round trip bringing a file back created %q, want pull.spool among them", got)
	}
}

// TestPushAndPullAroundTheInlineBound: the local backend carries a small
// push or pull in its frames and a larger one through a pipe; files of
// sizes on both sides of that bound (64 KiB) travel intact both ways.
func TestPushAndPullAroundTheInlineBound(t *testing.T) {
	f := newFixture(t)
	s := f.open(t, "inline", false)
	run(t, s, "/bin/bash", "true")
	for _, n := range []int{1, 60 << 10, 63<<10 + 512, 64 << 10, 65 << 10, 300 << 10} {
		in := make([]byte, n)
		for i := range in {
			in[i] = byte(i*7 + n)
		}
		write(t, filepath.Join(f.code, "in.bin"), string(in), 0o644)
		sum := fmt.Sprintf("%x", sha256.Sum256(in))
		out, o := run(t, s, "/bin/bash", fmt.Sprintf("sha256sum < in.bin | cut -d' ' -f1; head -c %d /dev/urandom > out.bin", n))
		if o.ExitCode != 0 || strings.TrimSpace(out) != sum {
			t.Fatalf("push of %d bytes: the sandbox read %q (exit %d), want %s", n, out, o.ExitCode, sum)
		}
		got, err := os.ReadFile(filepath.Join(f.code, "out.bin"))
		if err != nil || len(got) != n {
			t.Fatalf("pull of %d bytes: the host has %d (%v)", n, len(got), err)
		}
		out, _ = run(t, s, "/bin/bash", "sha256sum < out.bin | cut -d' ' -f1")
		if want := fmt.Sprintf("%x", sha256.Sum256(got)); strings.TrimSpace(out) != want {
			t.Fatalf("pull of %d bytes: the host's copy differs from the sandbox's", n)
		}
	}
}

// TestBashToolEndings: on the bash tool's path (bash started directly) a
// command's exit code, its death by a signal, its timeout and the jobs it
// leaves behind end it as before, and the cwd follows the report: bash runs
// its EXIT trap on an exit and on a SIGTERM (as it did behind the sh
// wrapper), never on the SIGKILL of a timeout.
func TestBashToolEndings(t *testing.T) {
	f := newFixture(t)
	s := f.open(t, "endings", false)
	sub := filepath.Join(f.code, "sub")
	if _, o := run(t, s, "/bin/bash", "cd sub; exit 7"); o.ExitCode != 7 {
		t.Errorf("exit 7: got %d", o.ExitCode)
	}
	if out, _ := run(t, s, "/bin/bash", "pwd"); out != sub+"\n" {
		t.Errorf("after cd; exit 7 the next command starts in %q, want %s", out, sub)
	}
	if _, o := run(t, s, "/bin/bash", "cd ..; kill -TERM $$"); o.Signal != "SIGTERM" || o.ExitCode != 143 {
		t.Errorf("kill -TERM $$: signal %q, exit %d", o.Signal, o.ExitCode)
	}
	if out, _ := run(t, s, "/bin/bash", "pwd"); out != f.code+"\n" {
		t.Errorf("after cd ..; kill -TERM $$ the next command starts in %q, want %s", out, f.code)
	}
	start := time.Now()
	var out bytes.Buffer
	o, err := s.Exec(context.Background(), Run{Command: "cd sub; echo started; sleep 3021", Shell: "/bin/bash", Stdout: &out, Stderr: &out, Timeout: time.Second})
	if err != nil || !o.TimedOut || o.ExitCode != 124 || out.String() != "started\n" || time.Since(start) > 20*time.Second {
		t.Errorf("timeout: err %v, timed out %v, exit %d, output %q after %s", err, o.TimedOut, o.ExitCode, out.String(), time.Since(start))
	}
	if out, _ := run(t, s, "/bin/bash", "pwd"); out != f.code+"\n" {
		t.Errorf("after a timeout the next command starts in %q, want %s (no report from a killed shell)", out, f.code)
	}
	start = time.Now()
	if out, o := run(t, s, "/bin/bash", "sleep 3022 & (setsid sleep 3023 &); cd sub; echo done"); o.ExitCode != 0 || out != "done\n" || time.Since(start) > 20*time.Second {
		t.Errorf("jobs left behind: exit %d, output %q after %s", o.ExitCode, out, time.Since(start))
	}
	if out, _ := run(t, s, "/bin/bash", "pwd; ps -eo args | grep -c '[s]leep 302' || true"); out != sub+"\n0\n" {
		t.Errorf("after the jobs' command: %q, want %s and no sleep left", out, sub)
	}
}

// TestUntrackedWhereNoCdCan: a bash command that cannot change its shell's
// directory (router.Decision.KeepsDir), in a directory the sync carries,
// runs without the wrapper: no report pipe on fd 3 and no script; one that
// may cd, one in a directory outside the code dirs, or one whose
// environment hands bash code of its own keeps the wrapper, and the cwd
// still follows a cd.
func TestUntrackedWhereNoCdCan(t *testing.T) {
	f := newFixture(t)
	s := f.open(t, "untracked", false)
	probe := `[ -e /proc/$$/fd/3 ] && echo tracked || echo untracked; echo "$PWD"`
	sub := filepath.Join(f.code, "sub")
	for _, tc := range []struct {
		name, command string
		env           []string
		want          string
	}{
		{"a plain command in the code dir", probe, nil, "untracked\n" + f.code + "\n"},
		{"one that may cd", "cd .; " + probe, nil, "tracked\n" + f.code + "\n"},
		{"a cd moves the next command", "cd sub", nil, ""},
		{"a plain command in a subdirectory", probe, nil, "untracked\n" + sub + "\n"},
		{"BASH_ENV of the caller's", probe, []string{"BASH_ENV=/dev/null"}, "tracked\n" + sub + "\n"},
		{"an exported function", probe, []string{"BASH_FUNC_f%%=() { cd /; }"}, "tracked\n" + sub + "\n"},
		{"out of the code dirs", "cd /tmp", nil, ""},
		{"a plain command out of the code dirs", probe, nil, "tracked\n/tmp\n"},
	} {
		var out bytes.Buffer
		o, err := s.Exec(context.Background(), Run{Command: tc.command, Shell: "/bin/bash", Env: tc.env, Stdout: &out, Stderr: &out, Timeout: 30 * time.Second})
		if err != nil || o.ExitCode != 0 || out.String() != tc.want {
			t.Errorf("%s: %q printed %q (exit %d, %v), want %q", tc.name, tc.command, out.String(), o.ExitCode, err, tc.want)
		}
	}
	// An untracked command given its directory (sbx exec's) leaves the
	// session there, as the report of a tracked one did.
	var out bytes.Buffer
	if o, err := s.Exec(context.Background(), Run{Command: probe, Shell: "/bin/bash", Dir: sub, Stdout: &out, Stderr: &out, Timeout: 30 * time.Second}); err != nil || out.String() != "untracked\n"+sub+"\n" || o.Cwd != sub {
		t.Errorf("in %s: printed %q, outcome's cwd %q (%v)", sub, out.String(), o.Cwd, err)
	}
	if got, _ := run(t, s, "/bin/bash", "pwd"); got != sub+"\n" {
		t.Errorf("after an untracked command in %s the next started in %q", sub, got)
	}
}

// TestUntrackedCommandForm: untracked's rewrite, and what it leaves alone.
func TestUntrackedCommandForm(t *testing.T) {
	f := newFixture(t)
	s := f.open(t, "untrackedform", false)
	s.mu.Lock()
	cmd, cwd, dir := s.command(Run{Command: "ls", Shell: "/bin/bash"}, true)
	s.mu.Unlock()
	untracked(cmd, cwd, Run{Command: "ls"}, dir, f.code)
	if cmd.Fd4 != nil || cmd.Fd3 != nil || cmd.Dir != dir || cmd.DirFallback != f.code || slices.Contains(cmd.Env, "BASH_ENV=/dev/fd/4") ||
		!slices.Equal(cmd.Argv, []string{"/bin/bash", "-c", "ls", "bash"}) || len(cmd.Fallback) == 0 || cmd.Fallback[5] != "." {
		t.Errorf("untracked: argv %q dir %q fallback dir %q env %q fd3 %v fd4 %q fallback %q", cmd.Argv, cmd.Dir, cmd.DirFallback, cmd.Env, cmd.Fd3, cmd.Fd4, cmd.Fallback)
	}
	s.mu.Lock()
	sh, cwd2, _ := s.command(Run{Command: "ls", Shell: "/bin/sh"}, true)
	s.mu.Unlock()
	// A command the backend started in the fallback moves the session's
	// directory there, so that the next does not fall back again.
	s.mu.Lock()
	s.info.Cwd = filepath.Join(f.code, "sub")
	s.finish(sandbox.Result{FellBack: true}, sbxsync.Report{}, nil, &cwdReport{})
	moved := s.startDir()
	s.mu.Unlock()
	if moved != f.code {
		t.Errorf("after a fallback the next command starts in %s, want %s", moved, f.code)
	}
	before := fmt.Sprint(sh.Argv, sh.Dir, sh.Fd3 != nil)
	untracked(sh, cwd2, Run{Command: "ls"}, dir, f.code)
	if after := fmt.Sprint(sh.Argv, sh.Dir, sh.Fd3 != nil); after != before || sh.DirFallback != "" {
		t.Errorf("the sh wrapper's command was rewritten: %s -> %s", before, after)
	}
}
