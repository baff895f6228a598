package session

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sbx-sh/sbx/internal/testenv"
	"github.com/sbx-sh/sbx/local"
	"github.com/sbx-sh/sbx/sandbox/sandboxtest"
)

func TestMain(m *testing.M) {
	local.Main()
	os.Exit(m.Run())
}

// tempDir is a temp dir with a short path (unix sockets live in state dirs).
func tempDir(t testing.TB) string {
	t.Helper()
	d, err := os.MkdirTemp("", "sbxs")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

type fixture struct {
	root string // state root
	code string // a code dir on the host
	mgr  *Manager
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{root: filepath.Join(tempDir(t), "st"), code: filepath.Join(tempDir(t), "code")}
	if err := os.MkdirAll(filepath.Join(f.code, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(f.code, "keep.txt"), "keep\n", 0o644)
	write(t, filepath.Join(f.code, "mod.txt"), "old\n", 0o644)
	write(t, filepath.Join(f.code, "del.txt"), "bye\n", 0o644)
	write(t, filepath.Join(f.code, "run.sh"), "#!/bin/sh\necho run\n", 0o644)
	f.mgr = f.manager()
	return f
}

func (f *fixture) manager() *Manager {
	return NewManager(f.root, &local.Provider{Version: "test"}, nil)
}

func (f *fixture) open(t *testing.T, name string, keep bool) *Session {
	t.Helper()
	s, err := f.manager().Open(context.Background(), name, Params{CodeDirs: []string{f.code}, Keep: keep, IdleTTL: time.Hour})
	if err != nil {
		t.Fatalf("open %s: %v", name, err)
	}
	t.Cleanup(func() { s.Release(context.Background()) })
	return s
}

func write(t *testing.T, p, content string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}

func sh(t *testing.T, s *Session, command string) (string, Outcome) {
	t.Helper()
	var out bytes.Buffer
	o, err := s.Exec(context.Background(), Run{Command: command, Stdout: &out, Stderr: &out, Timeout: 30 * time.Second})
	if err != nil {
		t.Fatalf("exec %q: %v", command, err)
	}
	return out.String(), o
}

func TestChangesComeBack(t *testing.T) {
	f := newFixture(t)
	s := f.open(t, "changes", false)
	out, o := sh(t, s, "echo new > new.txt && mkdir -p d/e && echo deep > d/e/f.txt && echo changed > mod.txt && rm del.txt && chmod +x run.sh && ln -s keep.txt link && mkdir empty")
	if o.ExitCode != 0 {
		t.Fatalf("exit %d: %s", o.ExitCode, out)
	}
	for p, want := range map[string]string{"new.txt": "new\n", "d/e/f.txt": "deep\n", "mod.txt": "changed\n", "keep.txt": "keep\n"} {
		got, err := os.ReadFile(filepath.Join(f.code, p))
		if err != nil || string(got) != want {
			t.Errorf("%s on host: %q, %v; want %q", p, got, err, want)
		}
	}
	if _, err := os.Stat(filepath.Join(f.code, "del.txt")); !os.IsNotExist(err) {
		t.Errorf("deleted file still on host: %v", err)
	}
	if fi, err := os.Stat(filepath.Join(f.code, "run.sh")); err != nil || fi.Mode().Perm()&0o111 == 0 {
		t.Errorf("mode change not brought back: %v %v", fi.Mode(), err)
	}
	if target, err := os.Readlink(filepath.Join(f.code, "link")); err != nil || target != "keep.txt" {
		t.Errorf("symlink inside the code dir not brought back: %q %v", target, err)
	}
	if fi, err := os.Stat(filepath.Join(f.code, "empty")); err != nil || !fi.IsDir() {
		t.Errorf("empty directory not brought back: %v", err)
	}
	if o.Sync.Applied == 0 {
		t.Error("outcome counts no applied changes")
	}
}

func TestPlantedSymlinkNeverWrittenThrough(t *testing.T) {
	f := newFixture(t)
	outside := tempDir(t)
	write(t, filepath.Join(outside, "victim"), "safe\n", 0o644)
	s := f.open(t, "planted", false)
	// The sandbox plants links out of the code dir, and writes "through" them
	// in its own view. Nothing may change outside the code dir on the host.
	out, _ := sh(t, s, "ln -s "+outside+" out && ln -s "+outside+"/victim victim && ln -s ../../.. up && mkdir -p "+outside+" && echo owned > "+outside+"/victim; echo owned > out/new; rm -rf sub && ln -s "+outside+" sub")
	got, _ := os.ReadFile(filepath.Join(outside, "victim"))
	if string(got) != "safe\n" {
		t.Fatalf("host file outside the code dir changed to %q (%s)", got, out)
	}
	if _, err := os.Stat(filepath.Join(outside, "new")); err == nil {
		t.Fatal("a file appeared outside the code dir")
	}
	for _, p := range []string{"out", "victim", "up", "sub"} {
		if fi, err := os.Lstat(filepath.Join(f.code, p)); err == nil && fi.Mode()&os.ModeSymlink != 0 {
			t.Errorf("escaping symlink %s was brought back to the host", p)
		}
	}
	// The refusal is reported on the command that made it.
	refused := map[string]bool{}
	_, o2 := sh(t, s, "ln -s /etc/passwd pw")
	for _, r := range o2.Sync.Refused {
		refused[filepath.Base(r.Path)] = true
	}
	if !refused["pw"] {
		t.Errorf("refusal of an escaping symlink not reported: %+v", o2.Sync.Refused)
	}
}

func TestGitInternalsAllowlist(t *testing.T) {
	f := newFixture(t)
	os.MkdirAll(filepath.Join(f.code, ".git", "hooks"), 0o755)
	write(t, filepath.Join(f.code, ".git", "config"), "[core]\n", 0o644)
	write(t, filepath.Join(f.code, ".git", "HEAD"), "ref: refs/heads/main\n", 0o644)
	s := f.open(t, "git", false)
	_, o := sh(t, s, "echo '#!/bin/sh' > .git/hooks/pre-push; chmod +x .git/hooks/pre-push; printf '[core]\\nhooksPath=x\\n' > .git/config; mkdir -p .git/refs/heads && echo abc > .git/refs/heads/main; echo 'ref: refs/heads/dev' > .git/HEAD; mkdir -p vendor/x/.git && echo evil > vendor/x/.git/config")
	if _, err := os.Stat(filepath.Join(f.code, ".git", "hooks", "pre-push")); err == nil {
		t.Error("a hook came back to the host")
	}
	if b, _ := os.ReadFile(filepath.Join(f.code, ".git", "config")); string(b) != "[core]\n" {
		t.Errorf(".git/config changed on the host: %q", b)
	}
	if _, err := os.Stat(filepath.Join(f.code, "vendor", "x", ".git")); err == nil {
		t.Error("a nested .git came back to the host")
	}
	if b, _ := os.ReadFile(filepath.Join(f.code, ".git", "refs", "heads", "main")); string(b) != "abc\n" {
		t.Errorf("a ref did not come back: %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(f.code, ".git", "HEAD")); string(b) != "ref: refs/heads/dev\n" {
		t.Errorf("HEAD did not come back: %q", b)
	}
	if len(o.Sync.Refused) < 3 {
		t.Errorf("refusals not reported: %+v", o.Sync.Refused)
	}
}

func TestKeepReuseAndCwd(t *testing.T) {
	f := newFixture(t)
	s := f.open(t, "keep", true)
	sh(t, s, "echo from-call-1 > /tmp/scratch; cd sub")
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	// A new manager, as a later sbx invocation would have.
	s2 := f.open(t, "keep", false)
	out, o := sh(t, s2, "cat /tmp/scratch; pwd")
	if o.ExitCode != 0 || !strings.Contains(out, "from-call-1") {
		t.Fatalf("sandbox state from call 1 not seen in call 2: %q", out)
	}
	if !strings.Contains(out, filepath.Join(f.code, "sub")) {
		t.Fatalf("cwd did not persist: %q", out)
	}
	// Variables do not persist.
	sh(t, s2, "export FOO=bar")
	if out, _ := sh(t, s2, "echo \"[$FOO]\""); strings.TrimSpace(out) != "[]" {
		t.Fatalf("a variable persisted: %q", out)
	}
	if len(s2.Notices()) != 0 {
		t.Fatal("unexpected notices on reattach")
	}
}

func TestReleaseRemovesEverything(t *testing.T) {
	f := newFixture(t)
	s := f.open(t, "rel", true)
	sh(t, s, "true")
	pid := initPid(t, f, "rel")
	if err := f.manager().Release(context.Background(), "rel"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(f.root, "rel")); !os.IsNotExist(err) {
		t.Fatalf("state dir left after release: %v", err)
	}
	if !testenv.WaitFor(10*time.Second, func() bool { return gone(pid) }) {
		t.Fatalf("init %d still running 10s after release", pid)
	}
	if err := f.manager().Release(context.Background(), "rel"); err == nil {
		t.Fatal("releasing a released session gave no error")
	}
	// The host tree is untouched by the release.
	if b, _ := os.ReadFile(filepath.Join(f.code, "keep.txt")); string(b) != "keep\n" {
		t.Fatal("host file changed by release")
	}
}

func TestIdleExpiry(t *testing.T) {
	f := newFixture(t)
	s, err := f.manager().Open(context.Background(), "idle", Params{CodeDirs: []string{f.code}, Keep: true, IdleTTL: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	sh(t, s, "echo x > /tmp/mark")
	pid := initPid(t, f, "idle")
	s.Close(context.Background())
	// The sandbox releases itself once idle past its idle_ttl: its init ends.
	if !testenv.WaitFor(20*time.Second, func() bool { return gone(pid) }) {
		t.Fatalf("init %d still running 20s into an idle_ttl of 300ms", pid)
	}
	s2, err := f.manager().Open(context.Background(), "idle", Params{CodeDirs: []string{f.code}, IdleTTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Release(context.Background())
	notes := strings.Join(s2.Notices(), "\n")
	if !strings.Contains(notes, "expired") {
		t.Fatalf("no expiry notice, got %q", notes)
	}
	if out, _ := sh(t, s2, "cat /tmp/mark 2>&1 || echo gone"); !strings.Contains(out, "gone") {
		t.Fatalf("expired sandbox was reused: %q", out)
	}
}

func TestStaleSessionCleanedUp(t *testing.T) {
	f := newFixture(t)
	s := f.open(t, "stale", true)
	sh(t, s, "echo x > /tmp/mark")
	pid := initPid(t, f, "stale")
	killSandbox(t, pid)
	s2 := f.open(t, "stale", false)
	notes := strings.Join(s2.Notices(), "\n")
	if !strings.Contains(notes, "is gone") || !strings.Contains(notes, "cleaned up") {
		t.Fatalf("stale session not reported: %q", notes)
	}
	if out, _ := sh(t, s2, "cat /tmp/mark 2>&1 || echo fresh"); !strings.Contains(out, "fresh") {
		t.Fatalf("stale sandbox reused: %q", out)
	}
}

func TestSessionsIsolatedFromEachOther(t *testing.T) {
	f := newFixture(t)
	a := f.open(t, "a", false)
	b := f.open(t, "b", false)
	sh(t, a, "echo secret-a > /tmp/a")
	m := "sbx-session-a-" + strconv.Itoa(os.Getpid())
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.Exec(context.Background(), Run{Command: "exec -a " + m + " sleep 300", Shell: "/bin/bash", Timeout: 60 * time.Second})
	}()
	// a's command runs (the host sees it) while b looks.
	if !testenv.WaitFor(20*time.Second, func() bool { return len(testenv.HostProcs(m)) > 0 }) {
		t.Fatalf("session a's command %s did not start", m)
	}
	out, _ := sh(t, b, "cat /tmp/a 2>&1; ps -eo args")
	if strings.Contains(out, "secret-a") || strings.Contains(out, m) {
		t.Fatalf("session b sees session a:\n%s", out)
	}
	// b did look: it read its own /tmp and listed its own processes.
	if !strings.Contains(out, "/tmp/a: No such file") || !strings.Contains(out, "ps -eo args") {
		t.Fatalf("session b's look at /tmp and its processes failed:\n%s", out)
	}
	a.Release(context.Background())
	<-done
}

func TestSpawnRunsBesideCommands(t *testing.T) {
	f := newFixture(t)
	s := f.open(t, "bg", false)
	var out sandboxtest.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	job, err := s.Spawn(ctx, Run{Command: "echo started; sleep 30", Stdout: &out, Stderr: &out})
	if err != nil {
		t.Fatal(err)
	}
	// The job's output streams while it runs (waiting for it also makes sure
	// the job is running, not just spawned, when the rest begins).
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(out.String(), "started"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("job output: %q", out.String())
		}
	}
	// A foreground command runs while the job does.
	if o, _ := sh(t, s, "echo fg"); !strings.Contains(o, "fg") {
		t.Fatal("foreground command blocked by a background job")
	}
	cancel()
	select {
	case <-job.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("cancelled job did not end")
	}
	if !strings.Contains(out.String(), "started") {
		t.Fatalf("job output: %q", out.String())
	}
}

func TestCodeDirMismatchRefused(t *testing.T) {
	f := newFixture(t)
	s := f.open(t, "cd", true)
	sh(t, s, "true")
	_, err := f.manager().Open(context.Background(), "cd", Params{CodeDirs: []string{tempDir(t)}})
	if err == nil || !strings.Contains(err.Error(), "release it first") {
		t.Fatalf("want a code dir mismatch error, got %v", err)
	}
}

func TestBadNames(t *testing.T) {
	f := newFixture(t)
	for _, name := range []string{"", "../x", "a/b", ".hidden", strings.Repeat("x", 49), "a b", "-x"} {
		if _, err := f.mgr.Open(context.Background(), name, Params{}); err == nil {
			t.Errorf("name %q accepted", name)
		}
	}
}

func TestListShowsKeptSessions(t *testing.T) {
	f := newFixture(t)
	s := f.open(t, "listed", true)
	sh(t, s, "true")
	infos, err := f.manager().List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 1 || infos[0].Name != "listed" || infos[0].Backend != "local" || infos[0].Stale != "" {
		t.Fatalf("list: %+v", infos)
	}
}

// initPid is the pid of the session's sandbox init, from the local
// backend's test hook (which checks it is that process still), checked
// against the process itself: a test that kills it kills that init, never
// pid 0 (the test's own process group) or a stranger.
func initPid(t *testing.T, f *fixture, name string) int {
	t.Helper()
	pid, err := local.InitPid(filepath.Join(f.root, name))
	if err != nil || pid <= 0 {
		t.Fatalf("the sandbox init of session %s: pid %d, %v", name, pid, err)
	}
	if b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline"); err != nil || !strings.HasPrefix(string(b), "sbx-init\x00") {
		t.Fatalf("pid %d is not a sandbox init: %q %v", pid, b, err)
	}
	return pid
}

// killSandbox kills a sandbox's init and waits until it and every process
// it had started are gone (the kernel ends the rest of its namespaces after
// the init, not at once).
func killSandbox(t *testing.T, pid int) {
	t.Helper()
	procs := append(descendants(pid), pid)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill init %d: %v", pid, err)
	}
	if !testenv.WaitFor(10*time.Second, func() bool { return !slices.ContainsFunc(procs, func(p int) bool { return !gone(p) }) }) {
		t.Fatalf("the sandbox's processes %v still there 10s after its init %d was killed", procs, pid)
	}
}

// descendants lists the live descendants of pid, from /proc.
func descendants(pid int) []int {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	children := map[int][]int{}
	for _, st := range stats {
		raw, err := os.ReadFile(st)
		if err != nil {
			continue // ended meanwhile
		}
		s := string(raw)
		i := strings.LastIndexByte(s, ')')
		f := strings.Fields(s[i+1:]) // state, ppid, ...
		if i < 0 || len(f) < 2 {
			continue
		}
		p, _ := strconv.Atoi(filepath.Base(filepath.Dir(st)))
		pp, _ := strconv.Atoi(f[1])
		children[pp] = append(children[pp], p)
	}
	var out []int
	for queue := children[pid]; len(queue) > 0; queue = queue[1:] {
		out = append(out, queue[0])
		queue = append(queue, children[queue[0]]...)
	}
	return out
}

// gone reports whether a process has ended and been reaped (this process
// reaps the inits it started).
func gone(pid int) bool {
	_, err := os.Stat("/proc/" + strconv.Itoa(pid))
	return os.IsNotExist(err)
}

func TestHostChangesReachAKeptSandbox(t *testing.T) {
	f := newFixture(t)
	s := f.open(t, "push", true)
	sh(t, s, "true")
	write(t, filepath.Join(f.code, "mod.txt"), "edited on the host\n", 0o644)
	os.Remove(filepath.Join(f.code, "del.txt"))
	out, o := sh(t, s, "cat mod.txt; ls")
	if !strings.Contains(out, "edited on the host") || strings.Contains(out, "del.txt") {
		t.Fatalf("host changes not in the sandbox:\n%s", out)
	}
	if o.Sync.Pushed != 2 {
		t.Fatalf("pushed %d changes, want 2", o.Sync.Pushed)
	}
}

func TestProtectedFilesQuarantined(t *testing.T) {
	f := newFixture(t)
	s := f.open(t, "quar", false)
	_, o := sh(t, s, "mkdir -p .claude && echo '{\"hooks\":{}}' > .claude/settings.json && echo '{}' > .mcp.json")
	for _, p := range []string{".claude/settings.json", ".mcp.json"} {
		if _, err := os.Stat(filepath.Join(f.code, p)); err == nil {
			t.Errorf("%s reached the host", p)
		}
		if _, err := os.Stat(filepath.Join(f.code, ".sbx/quarantine", p)); err != nil {
			t.Errorf("%s not quarantined: %v", p, err)
		}
	}
	if len(o.Sync.Quarantined) != 2 {
		t.Fatalf("quarantine not reported: %+v", o.Sync)
	}
}

func TestDeletedCwdFallsBackToTheCodeDir(t *testing.T) {
	f := newFixture(t)
	s := f.open(t, "cwdgone", false)
	sh(t, s, "mkdir -p gone && cd gone")
	sh(t, s, "rmdir ../gone; true")
	out, o := sh(t, s, "pwd")
	if o.ExitCode != 0 || !strings.Contains(out, "no longer exists") || !strings.HasSuffix(strings.TrimSpace(out), f.code) {
		t.Fatalf("exit %d:\n%s", o.ExitCode, out)
	}
}

func TestLostSandboxIsReplaced(t *testing.T) {
	f := newFixture(t)
	s := f.open(t, "lost", true)
	sh(t, s, "echo x > /tmp/mark")
	pid := initPid(t, f, "lost")
	killSandbox(t, pid)
	write(t, filepath.Join(f.code, "host-edit.txt"), "made while the sandbox was dead\n", 0o644)
	out, o := sh(t, s, "cat /tmp/mark 2>/dev/null || echo new-sandbox; cat host-edit.txt")
	if o.ExitCode != 0 || !strings.Contains(out, "new-sandbox") || !strings.Contains(out, "made while the sandbox was dead") {
		t.Fatalf("exit %d:\n%s", o.ExitCode, out)
	}
	if notes := strings.Join(s.Notices(), "\n"); !strings.Contains(notes, "new one was claimed") {
		t.Fatalf("replacement not reported: %q", notes)
	}
}

func TestReleaseBringsBackRunningJobs(t *testing.T) {
	f := newFixture(t)
	s, err := f.manager().Open(context.Background(), "jobrel", Params{CodeDirs: []string{f.code}})
	if err != nil {
		t.Fatal(err)
	}
	var out sandboxtest.Buffer
	job, err := s.Spawn(context.Background(), Run{Command: "echo from-job > job.txt; echo wrote; sleep 60", Stdout: &out})
	if err != nil {
		t.Fatal(err)
	}
	if !testenv.WaitFor(20*time.Second, func() bool { return strings.Contains(out.String(), "wrote") }) {
		t.Fatalf("the job did not write its file: output %q", out.String())
	}
	if err := s.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	<-job.Done()
	if b, _ := os.ReadFile(filepath.Join(f.code, "job.txt")); string(b) != "from-job\n" {
		t.Fatalf("a running job's change was lost on release: %q", b)
	}
}

// TestChangeAfterOpenReachesTheFirstCommand: a file written on the host
// after Open and before the first command is in the sandbox for that
// command, unless the caller asked for the prewalk (sbx exec, which runs
// its command right after Open). CI's TestCwdWithShellCharacters lost
// its file to a prewalk every Open started.
func TestChangeAfterOpenReachesTheFirstCommand(t *testing.T) {
	f := newFixture(t)
	s := f.open(t, "afteropen", false)
	if s.sync.Prewalking() {
		t.Fatal("Open started the first scan's walk for a caller that did not ask for it")
	}
	write(t, filepath.Join(f.code, "late.txt"), "late\n", 0o644)
	if out, o := sh(t, s, "cat late.txt"); o.ExitCode != 0 || out != "late\n" {
		t.Fatalf("the first command after Open: exit %d, %q; want late.txt's content", o.ExitCode, out)
	}

	p, err := f.manager().Open(context.Background(), "prewalked", Params{CodeDirs: []string{f.code}, IdleTTL: time.Hour, Prewalk: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Release(context.Background()) })
	if !p.sync.Prewalking() {
		t.Fatal("Params.Prewalk: Open started no walk")
	}
	if out, o := sh(t, p, "cat late.txt keep.txt"); o.ExitCode != 0 || out != "late\nkeep\n" {
		t.Fatalf("a prewalked session's first command: exit %d, %q", o.ExitCode, out)
	}
}
