package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sbx-sh/sbx/internal/testenv"
)

// The end of an unkept `sbx exec` (session/release.go): the command's round
// trip stands for the last pull-back, and the workspace is removed after
// sbx has answered.

// TestExecReleaseOneRoundTrip: `sbx exec` without --keep makes one round
// trip (the command's, a full scan on both sides), not a second one for the
// release's last pull-back; what the command changed comes back.
func TestExecReleaseOneRoundTrip(t *testing.T) {
	w := newWorld(t)
	r := w.sbxEnv(t, w.code, []string{"SBX_DEBUG=1"}, "exec", "--", "echo made > out.txt")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if b, _ := os.ReadFile(filepath.Join(w.code, "out.txt")); string(b) != "made\n" {
		t.Fatalf("change not brought back: %q", b)
	}
	if n := strings.Count(r.stderr, `msg="round trip"`); n != 1 || !strings.Contains(r.stderr, "folded into the command's round trip") {
		t.Fatalf("%d round trips (want 1, the last pull-back folded into the command's):\n%s", n, r.stderr)
	}
}

// TestExecReleaseBringsBackMmapWrites: a write through a shared mmap makes
// no inotify event; with the last pull-back folded into the command's
// round, that round's pull-back must still scan in full after the command
// (the first round of a new sandbox, whose placed push armed the watch
// just before it), or the write is lost with the sandbox.
func TestExecReleaseBringsBackMmapWrites(t *testing.T) {
	const python = "/usr/bin/python3"
	if _, err := os.Stat(python); err != nil {
		t.Fatalf("this test writes through mmap with %s: install python3 (%v)", python, err)
	}
	w := newWorld(t)
	db := filepath.Join(w.code, "db")
	os.WriteFile(db, []byte("aaaaaaaa"), 0o644)
	old := time.Now().Add(-time.Hour)
	os.Chtimes(db, old, old)
	script := python + ` -c 'import mmap,os
fd = os.open("db", os.O_RDWR)
m = mmap.mmap(fd, 8)
os.close(fd)
m[:] = b"bbbbbbbb"
m.flush()
m.close()'`
	r := w.sbxEnv(t, w.code, []string{"SBX_DEBUG=1"}, "exec", "--", script)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if b, _ := os.ReadFile(db); string(b) != "bbbbbbbb" {
		t.Fatalf("a write through mmap in the last command: the host has %q\n%s", b, r.stderr)
	}
}

// TestReleaseRemovesWorkspaceAfterwards: the released workspace goes
// (on disk: set aside, removed by a detached remover; in memory: removed
// in line), with nothing followed out of it: a link the sandbox left to a
// host directory is removed, not what it points at, and a directory it
// made unwritable goes too.
func TestReleaseRemovesWorkspaceAfterwards(t *testing.T) {
	for _, where := range []string{"disk", "auto"} {
		t.Run(where, func(t *testing.T) {
			w := newWorld(t)
			rt, err := os.MkdirTemp("/dev/shm", "sbxrt")
			if err != nil {
				t.Fatal(err)
			}
			defer os.RemoveAll(rt)
			victim := tempDir(t)
			os.WriteFile(filepath.Join(victim, "keep.txt"), []byte("host\n"), 0o644)
			// The link and the locked directory are excluded from the pull-back by
			// .sbxignore, so they stay in the workspace for the removal.
			os.WriteFile(filepath.Join(w.code, ".sbxignore"), []byte("trap/\n"), 0o644)
			script := "mkdir -p trap/locked/deep && echo x > trap/locked/deep/f && ln -s " + victim + " trap/link && ln -s " + victim + "/keep.txt trap/flink && chmod 0 trap/locked && stat -f -c %T ."
			r := w.sbxEnv(t, w.code, []string{"SBX_WORKSPACE=" + where, "XDG_RUNTIME_DIR=" + rt}, "exec", "--", script)
			if r.code != 0 {
				t.Fatalf("exit %d: %s", r.code, r.stderr)
			}
			if inMemory := strings.TrimSpace(r.stdout) == "tmpfs"; inMemory != (where == "auto") {
				t.Fatalf("workspace = %s: the workspace was on %q", where, r.stdout)
			}
			sessions := filepath.Join(w.state, "sbx", "sessions")
			trash := sessions + ".trash"
			own := filepath.Join(rt, "sbx-"+strconv.Itoa(os.Geteuid()))
			// In memory the workspace is set aside into own's trash dir,
			// which is all that is left there once its remover is done.
			ownTrash := filepath.Join(own, "trash")
			if !testenv.WaitFor(20*time.Second, func() bool {
				entries, err := os.ReadDir(trash)
				left, _ := os.ReadDir(own)
				aside, _ := os.ReadDir(ownTrash)
				onlyTrash := len(left) == 0 || len(left) == 1 && left[0].Name() == "trash"
				return (err == nil && len(entries) == 0 || where == "auto" && os.IsNotExist(err)) && onlyTrash && len(aside) == 0
			}) {
				entries, _ := os.ReadDir(trash)
				left, _ := os.ReadDir(own)
				aside, _ := os.ReadDir(ownTrash)
				t.Fatalf("the released workspace is still there after 20s: in %s %v, in %s %v, in %s %v", trash, entries, own, left, ownTrash, aside)
			}
			if _, err := os.Stat(filepath.Join(sessions, "default")); !os.IsNotExist(err) {
				t.Fatalf("the session's state dir is still there: %v", err)
			}
			if b, err := os.ReadFile(filepath.Join(victim, "keep.txt")); err != nil || string(b) != "host\n" {
				t.Fatalf("the host file a workspace link named: %q, %v", b, err)
			}
		})
	}
}

// TestLeftoverTrashRemovedByNextStart: a workspace whose remover was killed
// (an unlocked trash entry) is removed by the next sbx that opens a
// session (in memory: the next whose workspaces go to memory); one whose
// remover still runs (locked) is left to it.
func TestLeftoverTrashRemovedByNextStart(t *testing.T) {
	for _, where := range []string{"disk", "memory"} {
		t.Run(where, func(t *testing.T) { leftoverTrashRemoved(t, where) })
	}
}

func leftoverTrashRemoved(t *testing.T, where string) {
	w := newWorld(t)
	trash := filepath.Join(w.state, "sbx", "sessions.trash")
	w.env = append(w.env, "SBX_WORKSPACE=disk")
	if where == "memory" {
		rt, err := os.MkdirTemp("/dev/shm", "sbxrt")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(rt)
		w.env = append(w.env, "XDG_RUNTIME_DIR="+rt, "SBX_WORKSPACE=auto")
		trash = filepath.Join(rt, "sbx-"+strconv.Itoa(os.Geteuid()), "trash")
		os.MkdirAll(trash, 0o700)
		os.Chmod(filepath.Dir(trash), 0o700)
	}
	dead, busy := filepath.Join(trash, "work.dead"), filepath.Join(trash, "work.busy")
	for _, d := range []string{dead, busy} {
		os.MkdirAll(filepath.Join(d, "0", "sub"), 0o755)
		os.WriteFile(filepath.Join(d, "0", "sub", "f"), []byte("x"), 0o644)
	}
	lk, err := os.Open(busy)
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Close()
	if err := unix.Flock(int(lk.Fd()), unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	r := w.sbx(t, w.code, "exec", "--", "stat -f -c %T .")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if inMemory := strings.TrimSpace(r.stdout) == "tmpfs"; inMemory != (where == "memory") {
		t.Fatalf("the workspaces of the %s case were on %q", where, r.stdout)
	}
	if !testenv.WaitFor(20*time.Second, func() bool {
		_, err := os.Lstat(dead)
		return os.IsNotExist(err)
	}) {
		t.Fatalf("a killed remover's leftover %s is still there 20s after the next sbx exec", dead)
	}
	if _, err := os.Stat(filepath.Join(busy, "0", "sub", "f")); err != nil {
		t.Fatalf("an entry whose remover runs (locked) was touched: %v", err)
	}
	// Its remover killed (a dead process's flock is released): the next
	// start removes it.
	lk.Close()
	cmd := exec.Command(sbxBin, "exec", "--", "true")
	cmd.Dir, cmd.Env = w.code, w.env
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("sbx exec: %v %s", err, out)
	}
	if !testenv.WaitFor(20*time.Second, func() bool {
		_, err := os.Lstat(busy)
		return os.IsNotExist(err)
	}) {
		t.Fatalf("an entry unlocked again (its remover gone) is still there 20s after the next sbx exec: %s", busy)
	}
}

// sandboxCgroups returns the host paths of the cgroups a sandbox command
// runs in, read from its /proc/self/cgroup (v1: /sys/fs/cgroup/CONTROLLER/PATH,
// v2: /sys/fs/cgroup/PATH), only those sbx made (named sbx).
func sandboxCgroups(t *testing.T, out string) []string {
	t.Helper()
	var dirs []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 || !strings.Contains(parts[2], "sbx") {
			continue
		}
		ctl := parts[1]
		if strings.HasPrefix(ctl, "name=") {
			continue
		}
		if i := strings.IndexByte(ctl, ','); i >= 0 {
			ctl = ctl[:i] // cpu,cpuacct: mounted under either name
		}
		dirs = append(dirs, filepath.Join("/sys/fs/cgroup", ctl, parts[2]))
	}
	return dirs
}

// TestSameNamedSessionsOwnCgroups: two sandboxes of sessions with the same
// name (two users' or two state dirs' "default") each get cgroups of their
// own: one group shared would share its memory and pids limits, and the
// release of one could not remove it while the other runs (it waited a
// second per controller for it, then left it behind).
func TestSameNamedSessionsOwnCgroups(t *testing.T) {
	a, b := newWorld(t), newWorld(t)
	if r := a.sbx(t, a.code, "exec", "--keep", "--", "true"); r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	ra := a.sbx(t, a.code, "exec", "--", "cat /proc/self/cgroup")
	rb := b.sbx(t, b.code, "exec", "--", "cat /proc/self/cgroup")
	if ra.code != 0 || rb.code != 0 {
		t.Fatalf("exit %d, %d: %s %s", ra.code, rb.code, ra.stderr, rb.stderr)
	}
	ga, gb := sandboxCgroups(t, ra.stdout), sandboxCgroups(t, rb.stdout)
	if len(ga) == 0 || len(gb) == 0 {
		t.Fatalf("no sbx cgroup around the sandbox (this test needs sbx to make cgroups: run it as root on a host with cgroups):\n%s\n%s", ra.stdout, rb.stdout)
	}
	for _, d := range gb {
		for _, e := range ga {
			if d == e {
				t.Fatalf("two sandboxes of sessions named default share the cgroup %s", d)
			}
		}
		// b's session was released when its exec returned: its group is
		// gone, while a's sandbox still runs.
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Fatalf("the released sandbox's cgroup %s is still there: %v", d, err)
		}
	}
	for _, d := range ga {
		if _, err := os.Stat(d); err != nil {
			t.Fatalf("the running sandbox's cgroup %s: %v", d, err)
		}
	}
}

// hostUID is the host uid w's next kept sandbox runs as (its backend's
// record, local.json), released again after.
func hostUID(t *testing.T, w *world) int {
	t.Helper()
	if r := w.sbx(t, w.code, "exec", "--keep", "--session", "uid", "--", "true"); r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	b, err := os.ReadFile(filepath.Join(w.state, "sbx", "sessions", "uid", "local.json"))
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		HostUID int `json:"host_uid"`
	}
	if err := json.Unmarshal(b, &st); err != nil || st.HostUID == 0 {
		t.Fatalf("local.json: %v %s", err, b)
	}
	if r := w.sbx(t, w.code, "release", "--session", "uid"); r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	return st.HostUID
}

// TestNewSessionKeepsItsHostUID: as root each sandbox runs as a host uid of
// its own, and the package caches are kept per host uid; a new session of
// the same state root takes its root's home slot when it is free, not the
// lowest free one, or it found its caches cold whenever another sandbox
// had come and gone in between (25 s instead of 0.3 s for a cached go test
// ./... on a busy host).
func TestNewSessionKeepsItsHostUID(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test is about the host uids sbx picks as root: run it as root")
	}
	a, b := newWorld(t), newWorld(t)
	// a holds the lowest free slot while b's first sandbox runs: b's is
	// above it.
	if r := a.sbx(t, a.code, "exec", "--keep", "--", "true"); r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	first := hostUID(t, b)
	// a's slot is free again, below b's.
	if r := a.sbx(t, a.code, "release", "--all"); r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if again := hostUID(t, b); again != first {
		t.Fatalf("b's next session ran as host uid %d, its last as %d (free): its caches were someone else's", again, first)
	}
}
