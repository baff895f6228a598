//go:build linux

package session

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sbx-sh/sbx/internal/testenv"
	"github.com/sbx-sh/sbx/internal/workroot"
	"github.com/sbx-sh/sbx/sandbox"
)

// memoryRuntime points XDG_RUNTIME_DIR at a new directory on /dev/shm (a
// tmpfs), so that the test's workspaces in memory are its own, and returns
// it.
func memoryRuntime(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("/dev/shm", "sbxrt")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	t.Setenv("XDG_RUNTIME_DIR", d)
	return d
}

func (f *fixture) openMemory(t *testing.T, name string, keep bool, l sandbox.Limits) *Session {
	t.Helper()
	s, err := f.manager().Open(context.Background(), name, Params{CodeDirs: []string{f.code}, Keep: keep, IdleTTL: time.Hour,
		MemoryWorkspace: true, Limits: l})
	if err != nil {
		t.Fatalf("open %s: %v", name, err)
	}
	t.Cleanup(func() {
		s.Release(context.Background())
		if left := testenv.EndSandboxes(f.root); len(left) > 0 {
			t.Errorf("left after the release: %v", left)
		}
	})
	return s
}

// fsTypeInSandbox is the file system type of the sandbox's code dir, as
// the sandbox's own stat(1) names it.
func fsTypeInSandbox(t *testing.T, s *Session) string {
	t.Helper()
	out, _ := sh(t, s, "stat -f -c %T .")
	return strings.TrimSpace(out)
}

// A small tree's workspaces are in memory, in the user's own directory on
// the runtime tmpfs: the sandbox works there as anywhere, its changes come
// back, a later process of the kept session finds them, and the release
// removes them.
func TestWorkspaceInMemory(t *testing.T) {
	rt := memoryRuntime(t)
	f := newFixture(t)
	s := f.openMemory(t, "mem", true, sandbox.Limits{MemoryBytes: 1 << 30})
	if typ := fsTypeInSandbox(t, s); typ != "tmpfs" {
		t.Fatalf("the sandbox's code dir is on %q, want tmpfs", typ)
	}
	own := filepath.Join(rt, "sbx-"+strconv.Itoa(os.Geteuid()))
	if fi, err := os.Lstat(own); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		t.Fatalf("the user's directory on the tmpfs: %v %v", fi, err)
	}
	w, ok := workroot.Of(filepath.Join(f.root, "mem"))
	if !ok || filepath.Dir(w) != own {
		t.Fatalf("the workroot record says %q (%v), want a directory in %s", w, ok, own)
	}
	if b, err := os.ReadFile(filepath.Join(w, "0", "keep.txt")); err != nil || string(b) != "keep\n" {
		t.Fatalf("the placed file in memory: %q %v", b, err)
	}
	sh(t, s, "echo made > made.txt")
	if b, err := os.ReadFile(filepath.Join(f.code, "made.txt")); err != nil || string(b) != "made\n" {
		t.Fatalf("a change in the memory workspace did not come back: %q %v", b, err)
	}
	s.Close(context.Background())

	// Another process of the kept session (a new manager) uses them.
	again, err := f.manager().Open(context.Background(), "mem", Params{CodeDirs: []string{f.code}, Keep: true, IdleTTL: time.Hour,
		MemoryWorkspace: true, Limits: sandbox.Limits{MemoryBytes: 1 << 30}})
	if err != nil {
		t.Fatal(err)
	}
	if out, _ := sh(t, again, "cat made.txt && stat -f -c %T ."); out != "made\ntmpfs\n" {
		t.Fatalf("the reattached session's workspace: %q", out)
	}
	if got := again.workDir(0); got != filepath.Join(w, "0") {
		t.Fatalf("the reattached session's workspace is %s, want %s", got, filepath.Join(w, "0"))
	}
	if err := again.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(w); !os.IsNotExist(err) {
		t.Fatalf("the workspaces in memory are left after the release: %v", err)
	}
	if _, err := os.Stat(filepath.Join(f.root, "mem")); !os.IsNotExist(err) {
		t.Fatalf("the state dir is left after the release: %v", err)
	}
}

// Every reason not to use memory keeps the workspaces on disk, in the
// state dir, and the session works as before: a tree over the bounds, no
// memory limit to bound the sandbox's writes, workspace = "disk".
func TestWorkspaceOnDisk(t *testing.T) {
	memoryRuntime(t)
	cases := []struct {
		name   string
		memory bool
		limits sandbox.Limits
		files  int
	}{
		{"large", true, sandbox.Limits{MemoryBytes: 1 << 30}, 3},
		{"nolimit", true, sandbox.Limits{}, MemoryWorkspaceFiles},
		{"disk", false, sandbox.Limits{MemoryBytes: 1 << 30}, MemoryWorkspaceFiles},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			defer func(n int) { MemoryWorkspaceFiles = n }(MemoryWorkspaceFiles)
			MemoryWorkspaceFiles = c.files // the fixture's tree has 5 entries
			f := newFixture(t)
			s, err := f.manager().Open(context.Background(), c.name, Params{CodeDirs: []string{f.code}, IdleTTL: time.Hour,
				MemoryWorkspace: c.memory, Limits: c.limits})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Release(context.Background())
			if typ := fsTypeInSandbox(t, s); typ == "tmpfs" {
				t.Fatalf("the sandbox's code dir is on tmpfs")
			}
			if _, ok := workroot.Of(filepath.Join(f.root, c.name)); ok {
				t.Fatal("a workroot record for workspaces on disk")
			}
			if got, want := s.workDir(0), filepath.Join(f.root, c.name, "work", "0"); got != want {
				t.Fatalf("the workspace is %s, want %s", got, want)
			}
		})
	}
}

// Attack: another user of /dev/shm plants sbx-<uid> before sbx makes it
// (a directory of theirs, or a link into a place they read). sbx keeps the
// workspaces on disk and writes nothing through the plant.
func TestPlantedMemoryRootRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test plants a directory of another uid: run it as root (CI does)")
	}
	for _, plant := range []string{"foreign-dir", "link", "open-mode"} {
		t.Run(plant, func(t *testing.T) {
			rt := memoryRuntime(t)
			own := filepath.Join(rt, "sbx-"+strconv.Itoa(os.Geteuid()))
			elsewhere := filepath.Join(rt, "theirs")
			if err := os.Mkdir(elsewhere, 0o777); err != nil {
				t.Fatal(err)
			}
			switch plant {
			case "foreign-dir":
				os.Mkdir(own, 0o700)
				if err := os.Chown(own, 4242, 4242); err != nil {
					t.Fatal(err)
				}
			case "link":
				if err := os.Symlink(elsewhere, own); err != nil {
					t.Fatal(err)
				}
			case "open-mode":
				os.Mkdir(own, 0o700)
				if err := os.Chmod(own, 0o777); err != nil {
					t.Fatal(err)
				}
			}
			f := newFixture(t)
			s := f.openMemory(t, "planted", false, sandbox.Limits{MemoryBytes: 1 << 30})
			if typ := fsTypeInSandbox(t, s); typ == "tmpfs" {
				t.Fatalf("workspaces in memory despite the planted %s", own)
			}
			// Through the link, own reads as elsewhere: both must be empty.
			for _, d := range []string{own, elsewhere} {
				if entries, _ := os.ReadDir(d); len(entries) > 0 {
					t.Fatalf("sbx wrote into the planted place %s: %v", d, entries)
				}
			}
		})
	}
}

// Attack: the sandbox writes more into a workspace in memory than its
// memory limit. The memory cgroup, charged for the tmpfs pages the
// sandbox's processes write, stops it near the limit: the host's memory
// holds at most about the limit, not what the command asked for, and the
// release gives it back.
func TestMemoryWorkspaceBoundedByMemoryLimit(t *testing.T) {
	memoryRuntime(t)
	f := newFixture(t)
	const limit = 64 << 20
	s := f.openMemory(t, "flood", true, sandbox.Limits{MemoryBytes: limit})
	if typ := fsTypeInSandbox(t, s); typ != "tmpfs" {
		t.Fatalf("the sandbox's code dir is on %q, want tmpfs", typ)
	}
	w, _ := workroot.Of(filepath.Join(f.root, "flood"))
	var out strings.Builder
	// 256 MiB asked for, in 1 MiB files (each under any per-file bound).
	o, err := s.Exec(context.Background(), Run{Command: "mkdir -p flood && i=0; while [ $i -lt 256 ]; do head -c 1048576 /dev/zero > flood/$i || exit 1; i=$((i+1)); done; echo wrote all",
		Stdout: &out, Stderr: &out, Timeout: 60 * time.Second})
	if err == nil && o.ExitCode == 0 && strings.Contains(out.String(), "wrote all") {
		t.Fatalf("the sandbox wrote 256 MiB into memory under a limit of 64 MiB: %q", out.String())
	}
	if err != nil && !strings.Contains(err.Error(), "ran out of memory") {
		t.Errorf("the flood's error does not say the sandbox ran out of memory: %v", err)
	}
	held := duOracle(t, w)
	if held > limit+limit/2 {
		t.Fatalf("the workspace in memory holds %d bytes, over the memory limit %d", held, limit)
	}
	t.Logf("the flood ended with %v (exit %d), %d bytes held in memory", err, o.ExitCode, held)
	if err := s.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(w); !os.IsNotExist(err) {
		t.Fatalf("the flood's workspace is left after the release: %v", err)
	}
}

// The disk limit's check after each command counts a workspace in memory
// as it counts one on disk.
func TestDiskLimitCountsMemoryWorkspace(t *testing.T) {
	memoryRuntime(t)
	f := newFixture(t)
	s := f.openMemory(t, "du", true, sandbox.Limits{MemoryBytes: 1 << 30, DiskBytes: 1 << 20})
	var out strings.Builder
	_, err := s.Exec(context.Background(), Run{Command: "for i in 1 2 3; do head -c 600000 /dev/zero > big$i; done; stat -f -c %T .",
		Stdout: &out, Stderr: &out, Timeout: 30 * time.Second})
	if !strings.Contains(out.String(), "tmpfs") {
		t.Fatalf("the workspace is not in memory: %q", out.String())
	}
	if err == nil || !strings.Contains(err.Error(), "over the disk limit") {
		t.Fatalf("1.8 MB in a workspace in memory under a disk limit of 1 MiB: %v", err)
	}
	if _, err := os.Stat(filepath.Join(f.code, "big1")); !os.IsNotExist(err) {
		t.Fatalf("a file over the limit came back: %v", err)
	}
}

// Only a path of the shape sbx gives is ever removed as workspaces in
// memory: a workroot record that names anything else is not followed.
func TestValidMemoryWork(t *testing.T) {
	uid := strconv.Itoa(os.Geteuid())
	for p, want := range map[string]bool{
		"/dev/shm/sbx-" + uid + "/0123456789abcdef":       true,
		"/run/user/1000/sbx-" + uid + "/fedcba9876543210": true,
		"/dev/shm/sbx-" + uid + "/0123456789abcde":        false,
		"/dev/shm/sbx-" + uid + "/0123456789abcdeg":       false,
		"/dev/shm/sbx-" + uid + "/0123456789ABCDEF":       false,
		"/dev/shm/sbx-" + uid + "9/0123456789abcdef":      false,
		"/dev/shm/sbx-" + uid + "/../0123456789abcdef":    false,
		"dev/shm/sbx-" + uid + "/0123456789abcdef":        false,
		"/home/user": false,
		"/":          false,
		"":           false,
		"/dev/shm/sbx-" + uid + "/0123456789abcdef/":       false,
		"/dev/shm/other/sbx-" + uid + "x/0123456789abcdef": false,
	} {
		if got := workroot.Valid(p); got != want {
			t.Errorf("workroot.Valid(%q) = %v, want %v", p, got, want)
		}
	}
}

// A runtime tmpfs mounted noexec (a hardened host's) is not used: a bind
// from it keeps the flag and the workspace's own scripts would not run.
// The workspaces go to the next tmpfs (here /dev/shm), where they run.
func TestNoexecTmpfsNotUsed(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test mounts a noexec tmpfs: run it as root (CI does)")
	}
	rt := t.TempDir()
	if err := syscall.Mount("tmpfs", rt, "tmpfs", syscall.MS_NOEXEC, "size=16m"); err != nil {
		t.Fatalf("mount a noexec tmpfs: %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(rt, syscall.MNT_DETACH) })
	t.Setenv("XDG_RUNTIME_DIR", rt)
	f := newFixture(t)
	os.Chmod(filepath.Join(f.code, "run.sh"), 0o755)
	s := f.openMemory(t, "noexec", false, sandbox.Limits{MemoryBytes: 1 << 30})
	if out, _ := sh(t, s, "./run.sh && stat -f -c %T ."); out != "run\ntmpfs\n" {
		t.Fatalf("the workspace's script in a workspace in memory: %q", out)
	}
	w, _ := workroot.Of(filepath.Join(f.root, "noexec"))
	if strings.HasPrefix(w, rt+"/") {
		t.Fatalf("the workspaces are on the noexec tmpfs: %s", w)
	}
	if entries, _ := os.ReadDir(rt); len(entries) > 0 {
		t.Fatalf("sbx wrote into the noexec runtime dir: %v", entries)
	}
}
