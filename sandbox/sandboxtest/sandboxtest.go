// Package sandboxtest is the conformance suite of the sandbox contract, as
// testing/fstest.TestFS is for file systems: every backend runs Run in its
// tests, so that the engine can rely on what package sandbox promises and
// not on what one backend happens to do.
//
// Run runs real commands in real sandboxes. It needs /bin/sh and the
// usual tools (cat, env, head, grep, setsid, sleep, tail, wc) in the
// sandbox, in /usr/local/bin, /usr/bin or /bin. RunContract is its part
// about the contract itself, which Fake, a backend without processes for
// the lifecycle tests of the engine and the MCP pool, keeps too.
package sandboxtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sbx-sh/sbx/sandbox"
)

// Backend is what the suite needs of a backend.
type Backend struct {
	// New claims a new sandbox for the running test, with limits as its
	// Spec.Limits, and releases it when the test ends (t.Cleanup).
	New func(t *testing.T, limits sandbox.Limits) sandbox.Sandbox
	// Lose makes the sandbox go away behind the backend's back, as a crash,
	// an eviction or the node's OOM killer would, and returns once it is
	// gone. It is required: ErrLost and ErrUnreachable are promises too.
	Lose func(t *testing.T, sb sandbox.Sandbox)
	// Limits says that the backend enforces Spec.Limits itself. A backend
	// whose limits come from elsewhere (the cluster's pool template) leaves
	// it false and the limits tests are not run for it.
	Limits bool
	// Programs are the commands RunContract's promises run; nil: /bin/sh's
	// (Shell). Run always uses the shell's.
	Programs *Programs
}

// Programs are the commands of the promises about the contract itself,
// which hold whatever runs inside the sandbox.
type Programs struct {
	// Exit exits with code and prints nothing.
	Exit func(code int) []string
	// Block writes "started\n" to stdout, then runs until it is killed.
	Block []string
}

// Shell are the Programs as /bin/sh scripts.
var Shell = Programs{
	Exit:  func(code int) []string { return sh(fmt.Sprintf("exit %d", code)) },
	Block: sh("echo started; sleep 3031"),
}

// PATH is the search path the suite gives its commands.
const PATH = "PATH=/usr/local/bin:/usr/bin:/bin"

// wait bounds how long the suite waits for anything that should be prompt:
// a command's end after its timeout, a cancellation, a release.
const wait = 30 * time.Second

// Run runs the whole suite against b, each promise as a subtest.
func Run(t *testing.T, b Backend) {
	t.Helper()
	if b.New == nil || b.Lose == nil {
		t.Fatal("sandboxtest.Backend needs New and Lose")
	}
	p := &Shell
	// One sandbox serves the promises that do not end it.
	shared := b.New(t, sandbox.Limits{})
	sb := func(*testing.T) sandbox.Sandbox { return shared }
	t.Run("ExitCode", func(t *testing.T) { testExitCode(t, sb(t), p) })
	t.Run("NotFound", func(t *testing.T) { testNotFound(t, sb(t)) })
	t.Run("Signal", func(t *testing.T) { testSignal(t, sb(t)) })
	t.Run("Streams", func(t *testing.T) { testStreams(t, sb(t)) })
	t.Run("MergedOrder", func(t *testing.T) { testMergedOrder(t, sb(t)) })
	t.Run("NilWriters", func(t *testing.T) { testNilWriters(t, sb(t)) })
	t.Run("StdinClosed", func(t *testing.T) { testStdinClosed(t, sb(t)) })
	t.Run("StdinGiven", func(t *testing.T) { testStdinGiven(t, sb(t)) })
	t.Run("ExactEnv", func(t *testing.T) { testExactEnv(t, sb(t)) })
	t.Run("DefaultPath", func(t *testing.T) { testDefaultPath(t, sb(t)) })
	t.Run("Dir", func(t *testing.T) { testDir(t, sb(t)) })
	t.Run("DirFallback", func(t *testing.T) { testDirFallback(t, sb(t)) })
	t.Run("Fd3", func(t *testing.T) { testFd3(t, sb(t)) })
	t.Run("Fd3Bound", func(t *testing.T) { testFd3Bound(t, sb(t)) })
	t.Run("Fd4", func(t *testing.T) { testFd4(t, sb(t)) })
	t.Run("Fd4Bound", func(t *testing.T) { testFd4Bound(t, sb(t)) })
	t.Run("Fallback", func(t *testing.T) { testFallback(t, sb(t)) })
	t.Run("TimeoutKillsTree", func(t *testing.T) { testTimeout(t, sb(t)) })
	t.Run("CancelKillsTree", func(t *testing.T) { testCancel(t, sb(t)) })
	t.Run("EmptyArgv", func(t *testing.T) { testEmptyArgv(t, sb(t)) })
	// These end their sandbox: each has its own.
	t.Run("Release", func(t *testing.T) { testRelease(t, b.New(t, sandbox.Limits{}), p) })
	t.Run("ReleaseKillsRunning", func(t *testing.T) { testReleaseRunning(t, b.New(t, sandbox.Limits{}), p) })
	t.Run("LostMidCommand", func(t *testing.T) { testLost(t, b, p) })
	if b.Limits {
		t.Run("LimitPids", func(t *testing.T) { testPids(t, b) })
		t.Run("LimitMemory", func(t *testing.T) { testMemory(t, b) })
	}
}

// RunContract runs the promises about the contract itself, which a
// backend keeps whatever runs inside it: exit codes are results, a timeout
// is exit 124 and TimedOut, a cancellation is the context's error, an empty
// Argv is refused, Release is idempotent and final and ends a running
// command with ErrLost, a lost sandbox ends its command with ErrLost and
// refuses the next with ErrUnreachable. Their commands are b.Programs (the
// shell's when nil). Run checks all of these and what processes promise
// (the whole tree killed, streams, stdin, environment, fd 3, limits); a
// backend that runs no processes (Fake) runs RunContract only.
func RunContract(t *testing.T, b Backend) {
	t.Helper()
	if b.New == nil || b.Lose == nil {
		t.Fatal("sandboxtest.Backend needs New and Lose")
	}
	p := b.Programs
	if p == nil {
		p = &Shell
	}
	shared := b.New(t, sandbox.Limits{})
	t.Run("ExitCode", func(t *testing.T) { testExitCode(t, shared, p) })
	t.Run("Timeout", func(t *testing.T) { testTimeoutResult(t, shared, p) })
	t.Run("Cancel", func(t *testing.T) { testCancelResult(t, shared, p) })
	t.Run("EmptyArgv", func(t *testing.T) { testEmptyArgv(t, shared) })
	t.Run("Release", func(t *testing.T) { testRelease(t, b.New(t, sandbox.Limits{}), p) })
	t.Run("ReleaseKillsRunning", func(t *testing.T) { testReleaseRunning(t, b.New(t, sandbox.Limits{}), p) })
	t.Run("LostMidCommand", func(t *testing.T) { testLost(t, b, p) })
}

// result is one finished Exec.
type result struct {
	res         sandbox.Result
	err         error
	out, errout string
	took        time.Duration
}

func (r result) String() string {
	return fmt.Sprintf("exit %d timedout %v signal %q err %v after %s\nstdout %q\nstderr %q",
		r.res.ExitCode, r.res.TimedOut, r.res.Signal, r.err, r.took.Round(time.Millisecond), r.out, r.errout)
}

// exec runs c with its own buffers for output it does not set, and fails
// the test when Exec does not return within wait (a backend that hangs).
func exec(t *testing.T, ctx context.Context, sb sandbox.Sandbox, c *sandbox.Cmd) result {
	t.Helper()
	var out, errout Buffer
	if c.Stdout == nil {
		c.Stdout = &out
	}
	if c.Stderr == nil {
		c.Stderr = &errout
	}
	if c.Env == nil {
		c.Env = []string{PATH}
	}
	select {
	case r := <-execAsync(ctx, sb, c):
		r.out, r.errout = out.String(), errout.String()
		return r
	case <-time.After(c.Timeout + wait):
		t.Fatalf("Exec %q did not return %s after its timeout of %s: something kept it (a process left holding its output?)\nstdout so far %q", c.Argv, wait, c.Timeout, out.String())
		return result{}
	}
}

// execAsync runs c and delivers its result, with what c's writers got
// when they are Buffers.
func execAsync(ctx context.Context, sb sandbox.Sandbox, c *sandbox.Cmd) <-chan result {
	done := make(chan result, 1)
	start := time.Now()
	go func() {
		res, err := sb.Exec(ctx, c)
		r := result{res: res, err: err, took: time.Since(start)}
		if b, ok := c.Stdout.(*Buffer); ok {
			r.out = b.String()
		}
		if b, ok := c.Stderr.(*Buffer); ok {
			r.errout = b.String()
		}
		done <- r
	}()
	return done
}

func sh(script string) []string { return []string{"/bin/sh", "-c", script} }

func testExitCode(t *testing.T, sb sandbox.Sandbox, p *Programs) {
	for _, code := range []int{0, 1, 3, 125, 255} {
		r := exec(t, context.Background(), sb, &sandbox.Cmd{Argv: p.Exit(code)})
		if r.err != nil || r.res.ExitCode != code || r.res.TimedOut || r.res.Signal != "" {
			t.Errorf("exit %d: a non-zero exit is a result, not an error:\n%s", code, r)
		}
	}
}

func testNotFound(t *testing.T, sb sandbox.Sandbox) {
	r := exec(t, context.Background(), sb, &sandbox.Cmd{Argv: []string{"sbx-no-such-command"}})
	if r.err != nil || r.res.ExitCode != 127 {
		t.Errorf("a program not on PATH: want exit 127 as a shell gives, and no error:\n%s", r)
	}
	r = exec(t, context.Background(), sb, &sandbox.Cmd{Argv: []string{"/no/such/program"}})
	if r.err != nil || r.res.ExitCode != 127 {
		t.Errorf("a missing absolute path: want exit 127 and no error:\n%s", r)
	}
}

func testSignal(t *testing.T, sb sandbox.Sandbox) {
	r := exec(t, context.Background(), sb, &sandbox.Cmd{Argv: sh("kill -9 $$")})
	if r.err != nil || r.res.ExitCode != 128+9 || r.res.Signal == "" || r.res.TimedOut {
		t.Errorf("killed by SIGKILL: want exit 137 and the signal named:\n%s", r)
	}
}

func testStreams(t *testing.T, sb sandbox.Sandbox) {
	r := exec(t, context.Background(), sb, &sandbox.Cmd{Argv: sh("echo out; echo err >&2; echo out2; exit 3")})
	if r.err != nil || r.res.ExitCode != 3 || r.out != "out\nout2\n" || r.errout != "err\n" {
		t.Errorf("stdout and stderr to their own writers:\n%s", r)
	}
}

func testMergedOrder(t *testing.T, sb sandbox.Sandbox) {
	var both Buffer
	script := `i=0; while [ $i -lt 300 ]; do echo o$i; echo e$i >&2; i=$((i+1)); done`
	r := exec(t, context.Background(), sb, &sandbox.Cmd{Argv: sh(script), Stdout: &both, Stderr: &both})
	var want strings.Builder
	for i := 0; i < 300; i++ {
		fmt.Fprintf(&want, "o%d\ne%d\n", i, i)
	}
	if r.err != nil || r.res.ExitCode != 0 || both.String() != want.String() {
		t.Errorf("one writer for stdout and stderr: want the lines in the order written, got %d bytes (want %d):\n%.400s\n%s", len(both.String()), want.Len(), both.String(), r)
	}
}

func testNilWriters(t *testing.T, sb sandbox.Sandbox) {
	// Discarded, not closed: a write to a closed stdout would kill the
	// command with SIGPIPE.
	res, err := execRaw(t, sb, &sandbox.Cmd{Argv: sh("head -c 1000000 /dev/zero; head -c 1000000 /dev/zero >&2; echo end"), Env: []string{PATH}})
	if err != nil || res.ExitCode != 0 {
		t.Errorf("nil Stdout and Stderr discard the output: exit %d signal %q err %v", res.ExitCode, res.Signal, err)
	}
}

// execRaw runs c as it is (nil writers stay nil), bounded by wait.
func execRaw(t *testing.T, sb sandbox.Sandbox, c *sandbox.Cmd) (sandbox.Result, error) {
	t.Helper()
	type re struct {
		res sandbox.Result
		err error
	}
	done := make(chan re, 1)
	go func() {
		res, err := sb.Exec(context.Background(), c)
		done <- re{res, err}
	}()
	select {
	case r := <-done:
		return r.res, r.err
	case <-time.After(c.Timeout + wait):
		t.Fatalf("Exec %q did not return within %s", c.Argv, c.Timeout+wait)
		return sandbox.Result{}, nil
	}
}

func testStdinClosed(t *testing.T, sb sandbox.Sandbox) {
	r := exec(t, context.Background(), sb, &sandbox.Cmd{Argv: sh("cat; echo eof"), Timeout: 20 * time.Second})
	if r.err != nil || r.res.ExitCode != 0 || r.res.TimedOut || r.out != "eof\n" {
		t.Errorf("nil Stdin: want end of file at once (as /dev/null):\n%s", r)
	}
}

func testStdinGiven(t *testing.T, sb sandbox.Sandbox) {
	in := make([]byte, 300<<10)
	for i := range in {
		in[i] = byte('a' + i%26)
		if i%100 == 99 {
			in[i] = '\n'
		}
	}
	r := exec(t, context.Background(), sb, &sandbox.Cmd{Argv: []string{"cat"}, Stdin: bytes.NewReader(in)})
	if r.err != nil || r.res.ExitCode != 0 || r.out != string(in) {
		t.Errorf("Stdin of %d bytes through cat: got %d bytes back, exit %d, err %v", len(in), len(r.out), r.res.ExitCode, r.err)
	}
	// A command that reads none of its input still ends.
	r = exec(t, context.Background(), sb, &sandbox.Cmd{Argv: []string{"true"}, Stdin: bytes.NewReader(make([]byte, 4<<20))})
	if r.err != nil || r.res.ExitCode != 0 {
		t.Errorf("unread Stdin of 4 MiB:\n%s", r)
	}
}

func testExactEnv(t *testing.T, sb sandbox.Sandbox) {
	env := []string{PATH, "X=1", "WITH_SPACE=a b", "EMPTY="}
	r := exec(t, context.Background(), sb, &sandbox.Cmd{Argv: []string{"env"}, Env: env})
	got := strings.Split(strings.TrimSuffix(r.out, "\n"), "\n")
	slices.Sort(got)
	want := slices.Clone(env)
	slices.Sort(want)
	if r.err != nil || r.res.ExitCode != 0 || !slices.Equal(got, want) {
		t.Errorf("Env is the complete environment: got %q, want %q\n%s", got, want, r)
	}
}

func testDefaultPath(t *testing.T, sb sandbox.Sandbox) {
	// No PATH in Env: the program is still found (as execvp does, in
	// /usr/local/bin:/usr/bin:/bin) and the environment stays empty.
	r := exec(t, context.Background(), sb, &sandbox.Cmd{Argv: []string{"env"}, Env: []string{}})
	if r.err != nil || r.res.ExitCode != 0 || r.out != "" {
		t.Errorf("an empty Env: want env found on the default PATH and an empty environment:\n%s", r)
	}
}

func testDir(t *testing.T, sb sandbox.Sandbox) {
	for dir, want := range map[string]string{"": "/", "/tmp": "/tmp", "/": "/"} {
		r := exec(t, context.Background(), sb, &sandbox.Cmd{Argv: sh("pwd -P"), Dir: dir})
		if r.err != nil || r.res.ExitCode != 0 || r.out != want+"\n" {
			t.Errorf("Dir %q: want the command in %s:\n%s", dir, want, r)
		}
	}
}

// testDirFallback: a Dir that is there is where the command starts, with
// PWD naming it; one that is gone (or a file) starts it in DirFallback,
// after one line on its stderr that says so, and Result.FellBack.
func testDirFallback(t *testing.T, sb sandbox.Sandbox) {
	show := sh(`printf '%s %s\n' "$(pwd -P)" "$PWD"`)
	r := exec(t, context.Background(), sb, &sandbox.Cmd{Argv: show, Dir: "/tmp", DirFallback: "/", Env: []string{"PWD=/elsewhere"}})
	if r.err != nil || r.res.ExitCode != 0 || r.out != "/tmp /tmp\n" || r.errout != "" || r.res.FellBack {
		t.Errorf("Dir /tmp with a fallback: want the command in /tmp with PWD=/tmp, nothing on stderr, no FellBack:\n%s", r)
	}
	for _, gone := range []string{"/sbx-no-such-dir", "/bin/sh"} {
		r = exec(t, context.Background(), sb, &sandbox.Cmd{Argv: show, Dir: gone, DirFallback: "/tmp"})
		want := "sbx: " + gone + " no longer exists; running in /tmp\n"
		if r.err != nil || r.res.ExitCode != 0 || r.out != "/tmp /tmp\n" || r.errout != want || !r.res.FellBack {
			t.Errorf("Dir %s gone, fallback /tmp: want the command in /tmp with PWD=/tmp, stderr %q and FellBack (%v):\n%s", gone, want, r.res.FellBack, r)
		}
	}
}

func testFd3(t *testing.T, sb sandbox.Sandbox) {
	var fd3 Buffer
	r := exec(t, context.Background(), sb, &sandbox.Cmd{Argv: sh("echo out; cd /tmp && pwd >&3; echo err >&2"), Fd3: &fd3})
	if r.err != nil || r.res.ExitCode != 0 || fd3.String() != "/tmp\n" || r.out != "out\n" || r.errout != "err\n" {
		t.Errorf("fd 3: got %q, want %q, and stdout and stderr untouched:\n%s", fd3.String(), "/tmp\n", r)
	}
}

func testFd3Bound(t *testing.T, sb sandbox.Sandbox) {
	var fd3 Buffer
	r := exec(t, context.Background(), sb, &sandbox.Cmd{Argv: sh("head -c 3000000 /dev/zero >&3; echo rc=$?"), Fd3: &fd3})
	if r.err != nil || r.res.ExitCode != 0 || r.out != "rc=0\n" {
		t.Errorf("3 MB to fd 3: the backend drains what it does not keep (no SIGPIPE, same exit):\n%s", r)
	}
	if n := len(fd3.String()); n != sandbox.MaxFd3+1 {
		t.Errorf("3 MB to fd 3: the backend handed on %d bytes, want MaxFd3+1 = %d", n, sandbox.MaxFd3+1)
	}
}

func testFd4(t *testing.T, sb sandbox.Sandbox) {
	in := "binary \x00\xff bytes\n" + strings.Repeat("x", sandbox.MaxFd4-64)
	r := exec(t, context.Background(), sb, &sandbox.Cmd{Argv: sh("cat <&4; exec 4<&-; cat /proc/self/fd/4 2>/dev/null || echo closed >&2"), Fd4: []byte(in)})
	if r.err != nil || r.res.ExitCode != 0 || r.out != in || r.errout != "closed\n" {
		t.Errorf("fd 4: the command read %d bytes (want the %d given, exactly), then it was closed for it and its children:\n%s", len(r.out), len(in), r)
	}
	// A command that reads none of it ends as any other.
	r = exec(t, context.Background(), sb, &sandbox.Cmd{Argv: sh("exit 6"), Fd4: []byte(in)})
	if r.err != nil || r.res.ExitCode != 6 {
		t.Errorf("fd 4 left unread:\n%s", r)
	}
	// fd 3 is its own when fd 4 alone is given.
	r = exec(t, context.Background(), sb, &sandbox.Cmd{Argv: sh("[ -e /proc/self/fd/3 ] && echo open || echo closed; wc -c <&4"), Fd4: []byte("1234")})
	if r.err != nil || r.res.ExitCode != 0 || strings.Join(strings.Fields(r.out), " ") != "closed 4" {
		t.Errorf("fd 4 without fd 3: want fd 3 closed and fd 4's 4 bytes:\n%s", r)
	}
}

func testFd4Bound(t *testing.T, sb sandbox.Sandbox) {
	var out Buffer
	res, err := execRaw(t, sb, &sandbox.Cmd{Argv: sh("echo ran"), Env: []string{PATH}, Stdout: &out, Fd4: make([]byte, sandbox.MaxFd4+1)})
	if err == nil || out.String() != "" {
		t.Errorf("fd 4 of MaxFd4+1 bytes: want the command refused, not run; got exit %d, err %v, stdout %q", res.ExitCode, err, out.String())
	}
}

func testFallback(t *testing.T, sb sandbox.Sandbox) {
	var fd3 Buffer
	r := exec(t, context.Background(), sb, &sandbox.Cmd{Argv: []string{"/no/such/bash", "-c", "echo primary"},
		Fallback: sh("echo fallback; cat <&4 >&3; exit 9"), Fd4: []byte("four"), Fd3: &fd3})
	if r.err != nil || r.res.ExitCode != 9 || r.out != "fallback\n" || fd3.String() != "four" {
		t.Errorf("Argv[0] missing: want the fallback run, with fd 3 and fd 4; fd 3 got %q:\n%s", fd3.String(), r)
	}
	r = exec(t, context.Background(), sb, &sandbox.Cmd{Argv: sh("echo primary"), Fallback: sh("echo fallback")})
	if r.err != nil || r.res.ExitCode != 0 || r.out != "primary\n" {
		t.Errorf("Argv[0] present: want Argv run, not the fallback:\n%s", r)
	}
	r = exec(t, context.Background(), sb, &sandbox.Cmd{Argv: []string{"/dev/null"}, Fallback: sh("echo fallback")})
	if r.err != nil || r.out != "fallback\n" {
		t.Errorf("Argv[0] not an executable file: want the fallback run:\n%s", r)
	}
}

// survivors lists the sandbox's processes whose command line has tag,
// from a new command.
func survivors(t *testing.T, sb sandbox.Sandbox, tag string) string {
	t.Helper()
	// A survivor has an argument of the tag and one digit (sleep 3011):
	// a whole word, never part of one, since the cluster's exec wrapper
	// carries random hex ids in its own command line, and one of them
	// held "301" (a CI run's TimeoutKillsTree took the wrapper running
	// this very check for a survivor). The pattern is written so that it
	// does not match itself.
	pat := tag[:len(tag)-1] + "[" + tag[len(tag)-1:] + "][0-9]"
	r := exec(t, context.Background(), sb, &sandbox.Cmd{Argv: sh(`for f in /proc/[0-9]*/cmdline; do a=" $( { tr '\0' ' ' <"$f"; } 2>/dev/null) "; case "$a" in *" "` + pat + `" "*) echo "$f:$a" ;; esac; done; echo checked`)})
	if r.err != nil || !strings.HasSuffix(r.out, "checked\n") {
		t.Fatalf("list the sandbox's processes:\n%s", r)
	}
	return strings.TrimSuffix(r.out, "checked\n")
}

func testTimeout(t *testing.T, sb sandbox.Sandbox) {
	// A background job and a grandchild in a session of its own, both
	// holding stdout: the command's end waits for them unless they die.
	script := `sleep 3011 & (setsid sleep 3012 &); echo started; sleep 3013; echo not-reached`
	r := exec(t, context.Background(), sb, &sandbox.Cmd{Argv: sh(script), Timeout: time.Second})
	if r.err != nil || !r.res.TimedOut || r.res.ExitCode != sandbox.TimeoutExitCode || r.out != "started\n" {
		t.Errorf("Timeout: want TimedOut, exit %d and no error:\n%s", sandbox.TimeoutExitCode, r)
	}
	if left := survivors(t, sb, "301"); left != "" {
		t.Errorf("processes survived the timeout:\n%s", left)
	}
}

func testCancel(t *testing.T, sb sandbox.Sandbox) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	started := &onWrite{w: &Buffer{}, f: cancel}
	script := `sleep 3021 & (setsid sleep 3022 &); echo started; sleep 3023; echo not-reached`
	r := exec(t, ctx, sb, &sandbox.Cmd{Argv: sh(script), Stdout: started})
	if !errors.Is(r.err, context.Canceled) {
		t.Errorf("cancelled while it ran: want context.Canceled:\n%s", r)
	}
	if left := survivors(t, sb, "302"); left != "" {
		t.Errorf("processes survived the cancellation:\n%s", left)
	}
}

// testTimeoutResult: what a timeout returns (Run's TimeoutKillsTree also
// checks that nothing survives it).
func testTimeoutResult(t *testing.T, sb sandbox.Sandbox, p *Programs) {
	r := exec(t, context.Background(), sb, &sandbox.Cmd{Argv: p.Block, Timeout: time.Second})
	if r.err != nil || !r.res.TimedOut || r.res.ExitCode != sandbox.TimeoutExitCode || r.out != "started\n" {
		t.Errorf("Timeout: want TimedOut, exit %d and no error:\n%s", sandbox.TimeoutExitCode, r)
	}
}

// testCancelResult: what a cancellation returns.
func testCancelResult(t *testing.T, sb sandbox.Sandbox, p *Programs) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := exec(t, ctx, sb, &sandbox.Cmd{Argv: p.Block, Stdout: &onWrite{w: &Buffer{}, f: cancel}})
	if !errors.Is(r.err, context.Canceled) {
		t.Errorf("cancelled while it ran: want context.Canceled:\n%s", r)
	}
}

func testEmptyArgv(t *testing.T, sb sandbox.Sandbox) {
	if _, err := execRaw(t, sb, &sandbox.Cmd{}); err == nil {
		t.Error("an empty Argv: want an error")
	}
}

func testRelease(t *testing.T, sb sandbox.Sandbox, p *Programs) {
	if r := exec(t, context.Background(), sb, &sandbox.Cmd{Argv: p.Exit(0)}); r.err != nil {
		t.Fatalf("before release:\n%s", r)
	}
	for i := 0; i < 2; i++ {
		if err := sb.Release(context.Background()); err != nil {
			t.Fatalf("Release #%d: %v (Release is idempotent)", i+1, err)
		}
	}
	r := exec(t, context.Background(), sb, &sandbox.Cmd{Argv: p.Exit(0)})
	if !errors.Is(r.err, sandbox.ErrLost) {
		t.Errorf("Exec after Release: want ErrLost:\n%s", r)
	}
}

// startBlock starts p.Block and returns once it runs (it said so), with
// the channel of its end; what comes next is what the command must survive
// or not.
func startBlock(t *testing.T, sb sandbox.Sandbox, p *Programs, next string) <-chan result {
	t.Helper()
	started := make(chan struct{})
	done := execAsync(context.Background(), sb, &sandbox.Cmd{Argv: p.Block, Env: []string{PATH},
		Stdout: &onWrite{w: &Buffer{}, f: func() { close(started) }}, Stderr: &Buffer{}})
	select {
	case <-started:
	case r := <-done:
		t.Fatalf("the command ended before %s:\n%s", next, r)
	case <-time.After(wait):
		t.Fatal("the command did not start")
	}
	return done
}

func testReleaseRunning(t *testing.T, sb sandbox.Sandbox, p *Programs) {
	done := startBlock(t, sb, p, "it was released")
	if err := sb.Release(context.Background()); err != nil {
		t.Fatalf("Release while a command runs: %v", err)
	}
	select {
	case r := <-done:
		if !errors.Is(r.err, sandbox.ErrLost) {
			t.Errorf("a command running when its sandbox is released: want ErrLost:\n%s", r)
		}
	case <-time.After(wait):
		t.Fatalf("a command still ran %s after its sandbox was released", wait)
	}
}

func testLost(t *testing.T, b Backend, p *Programs) {
	sb := b.New(t, sandbox.Limits{})
	done := startBlock(t, sb, p, "its sandbox was lost")
	b.Lose(t, sb)
	select {
	case r := <-done:
		// It may have run: the engine must not run it again on its own.
		if !errors.Is(r.err, sandbox.ErrLost) || errors.Is(r.err, sandbox.ErrUnreachable) {
			t.Errorf("sandbox lost while a command ran: want ErrLost and not ErrUnreachable:\n%s", r)
		}
	case <-time.After(wait):
		t.Fatalf("a command still ran %s after its sandbox was lost", wait)
	}
	// Nothing of the next command runs: the engine may run it elsewhere.
	r := exec(t, context.Background(), sb, &sandbox.Cmd{Argv: p.Exit(0)})
	if !errors.Is(r.err, sandbox.ErrUnreachable) {
		t.Errorf("Exec on a sandbox found gone: want ErrUnreachable:\n%s", r)
	}
	if err := sb.Release(context.Background()); err != nil {
		t.Errorf("Release of a lost sandbox: %v", err)
	}
}

func testPids(t *testing.T, b Backend) {
	sb := b.New(t, sandbox.Limits{Pids: 32})
	spawn := func(n int) result {
		return exec(t, context.Background(), sb, &sandbox.Cmd{
			Argv:    sh(fmt.Sprintf(`n=0; while [ $n -lt %d ]; do sleep 3051 & n=$((n+1)); done; echo spawned $n`, n)),
			Timeout: 20 * time.Second})
	}
	if r := spawn(4); r.err != nil || r.res.ExitCode != 0 || r.out != "spawned 4\n" {
		t.Fatalf("Pids 32: 4 processes should start:\n%s", r)
	}
	if r := spawn(200); r.err == nil && r.res.ExitCode == 0 && r.out == "spawned 200\n" {
		t.Errorf("Pids 32: 200 processes at once started:\n%s", r)
	}
}

func testMemory(t *testing.T, b Backend) {
	sb := b.New(t, sandbox.Limits{MemoryBytes: 64 << 20})
	// tail keeps a line in memory until its end: a line of n bytes costs n.
	hold := func(size string) result {
		return exec(t, context.Background(), sb, &sandbox.Cmd{
			Argv: sh("head -c " + size + " /dev/zero | tail -n 1 | wc -c"), Timeout: 20 * time.Second})
	}
	if r := hold("1m"); r.err != nil || r.res.ExitCode != 0 || strings.TrimSpace(r.out) != "1048576" {
		t.Fatalf("MemoryBytes 64 MiB: 1 MiB should fit:\n%s", r)
	}
	if r := hold("512m"); r.err == nil && r.res.ExitCode == 0 && strings.TrimSpace(r.out) == "536870912" {
		t.Errorf("MemoryBytes 64 MiB: a command held 512 MiB:\n%s", r)
	}
}

// onWrite passes writes to w and calls f once, at the first.
type onWrite struct {
	w    io.Writer
	once sync.Once
	f    func()
}

func (o *onWrite) Write(p []byte) (int, error) {
	n, err := o.w.Write(p)
	o.once.Do(o.f)
	return n, err
}

// Buffer is a bytes.Buffer safe for concurrent writers (a backend's
// copying goroutines, a process's output), for this suite and other tests.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *Buffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *Buffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
