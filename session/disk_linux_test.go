//go:build linux

package session

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// duOracle is the disk sum by the standard library's walk: an independent
// computation of what diskUsage must find.
func duOracle(t *testing.T, dir string) int64 {
	t.Helper()
	var total int64
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == dir {
			return nil
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		n := st.Blocks * 512
		if fi.Mode().IsRegular() {
			n = max(n, fi.Size())
		}
		total += n
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return total
}

// The parallel walk finds what a plain walk finds, on a tree wide and deep
// enough that every walker has directories to take.
func TestDiskUsageMatchesAWalk(t *testing.T) {
	dir := t.TempDir()
	makeTree(t, dir, 3000)
	deep := dir
	for i := range 60 {
		deep = filepath.Join(deep, "n"+strconv.Itoa(i))
	}
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(deep, "leaf"), make([]byte, 5000), 0o644)
	for range 5 {
		n, err := diskUsage(dir, 1<<50)
		if want := duOracle(t, dir); err != nil || n != want {
			t.Fatalf("diskUsage = %d (%v), a walk of the same tree sums %d", n, err, want)
		}
	}
}

// Over the limit in a tree of many directories, the walk stops early (far
// below the whole) and says it is over; a check with a limit refuses.
func TestDiskUsageOverTheLimitStops(t *testing.T) {
	dir := t.TempDir()
	for i := range 200 {
		d := filepath.Join(dir, "d"+strconv.Itoa(i))
		os.Mkdir(d, 0o755)
		if err := os.WriteFile(filepath.Join(d, "f"), make([]byte, 100<<10), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	whole := duOracle(t, dir)
	n, err := diskUsage(dir, 1<<20)
	if err != nil || n <= 1<<20 || n >= whole {
		t.Fatalf("diskUsage over a 1 MiB stop = %d (%v): want over 1 MiB and below the whole tree's %d", n, err, whole)
	}
	s := &Session{dir: t.TempDir()}
	s.params.CodeDirs = make([]string, 1)
	s.params.Limits.DiskBytes = 1 << 20
	if err := os.MkdirAll(filepath.Dir(s.workDir(0)), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(dir, s.workDir(0)); err != nil {
		t.Fatal(err)
	}
	// The workspace itself a link: refused (not followed), not measured as empty.
	if err := s.checkWorkspace(); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Fatalf("a workspace that is a symbolic link: %v", err)
	}
	os.Remove(s.workDir(0))
	if err := os.Rename(dir, s.workDir(0)); err != nil {
		t.Fatal(err)
	}
	err = s.checkWorkspace()
	if err == nil || !strings.Contains(err.Error(), "over the disk limit of 1MiB") {
		t.Fatalf("a workspace of %d bytes against a limit of 1 MiB: %v", whole, err)
	}
	s.params.Limits.DiskBytes = whole + 1
	if err := s.checkWorkspace(); err != nil {
		t.Fatalf("a workspace of %d bytes against a limit one byte more: %v", whole, err)
	}
}

// Symbolic links are counted as links, never followed: a loop ends, and a
// link to a large file or a directory outside costs only itself.
func TestDiskUsageDoesNotFollowLinks(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	big := filepath.Join(outside, "big")
	f, _ := os.Create(big)
	f.Truncate(1 << 40)
	f.Close()
	os.Mkdir(filepath.Join(dir, "sub"), 0o755)
	for name, target := range map[string]string{"loop": ".", "sub/up": "..", "a": "b", "b": "a", "big": big, "out": outside} {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	n, err := diskUsage(dir, 1<<39)
	if want := duOracle(t, dir); err != nil || n != want || n > 1<<20 {
		t.Fatalf("diskUsage = %d (%v): want %d, the links' own blocks only", n, err, want)
	}
}

// A directory the walk cannot read is an error naming it, not a sum that
// leaves it out. The walk runs in a child process without root's right to
// read anything (as nobody), since this test runs as root.
func TestDiskUsageUnreadableDir(t *testing.T) {
	if dir := os.Getenv("SBX_TEST_DU_DIR"); dir != "" {
		n, err := diskUsage(dir, 1<<40)
		os.Stdout.WriteString(strconv.FormatInt(n, 10) + " " + errString(err) + "\n")
		return
	}
	base, err := os.MkdirTemp("", "sbx-du-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(filepath.Join(base, "w", "a", "locked"), 0o755); os.RemoveAll(base) })
	os.Chmod(base, 0o755)
	locked := filepath.Join(base, "w", "a", "locked")
	if err := os.MkdirAll(locked, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(locked, "hidden"), make([]byte, 1<<20), 0o644)
	for i := range 50 {
		os.MkdirAll(filepath.Join(base, "w", "b"+strconv.Itoa(i)), 0o755)
	}
	if err := os.Chmod(locked, 0o311); err != nil { // searchable, not listable
		t.Fatal(err)
	}
	// The test binary where nobody can run it.
	bin := filepath.Join(base, "session.test")
	if b, err := os.ReadFile(os.Args[0]); err != nil || os.WriteFile(bin, b, 0o755) != nil {
		t.Fatalf("copy the test binary: %v", err)
	}
	run := func() string {
		cmd := exec.Command(bin, "-test.run=^TestDiskUsageUnreadableDir$", "-test.count=1")
		cmd.Env = append(os.Environ(), "SBX_TEST_DU_DIR="+filepath.Join(base, "w"))
		if os.Getuid() == 0 {
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("the walk as nobody: %v\n%s", err, out)
		}
		return string(out)
	}
	out := run()
	if !strings.Contains(out, "list "+locked+": permission denied") && !strings.Contains(out, "open "+locked+": permission denied") {
		t.Fatalf("an unreadable directory: want an error naming %s, got:\n%s", locked, out)
	}
	// Listable but not searchable: its entries cannot be stat'ed, and are
	// not taken for nothing (the 1 MiB file in it would escape the limit).
	os.Chmod(locked, 0o644)
	if out := run(); !strings.Contains(out, "stat "+locked+"/hidden: permission denied") {
		t.Fatalf("a directory listable but not searchable: want an error naming %s/hidden, got:\n%s", locked, out)
	}
	// Not listable at all (no search either): the open fails.
	os.Chmod(locked, 0o000)
	if out := run(); !strings.Contains(out, "open "+locked+": permission denied") {
		t.Fatalf("an unopenable directory: want an error naming %s, got:\n%s", locked, out)
	}
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}
