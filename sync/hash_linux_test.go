package sync

import (
	"bytes"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestHashFileAsPortable: the system-call hash gives the os.File hash for
// files of every size around the buffer's, and refuses what that refuses
// (a final symlink, a directory).
func TestHashFileAsPortable(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []int{0, 1, 4095, 64<<10 - 1, 64 << 10, 64<<10 + 1, 1<<20 + 7} {
		p := filepath.Join(dir, "f")
		os.WriteFile(p, bytes.Repeat([]byte{byte(n), 'x'}, n/2+1)[:n], 0o644)
		got, err := hashFile(p)
		want, werr := hashFilePortable(p)
		if err != nil || werr != nil || got != want {
			t.Errorf("%d bytes: hashFile %q %v, portable %q %v", n, got, err, want, werr)
		}
	}
	os.Symlink("f", filepath.Join(dir, "link"))
	os.Mkdir(filepath.Join(dir, "d"), 0o755)
	for _, name := range []string{"link", "d", "missing"} {
		if _, err := hashFile(filepath.Join(dir, name)); err == nil {
			t.Errorf("%s: hashed", name)
		}
		if _, err := hashFilePortable(filepath.Join(dir, name)); err == nil {
			t.Errorf("%s: hashed by the portable way", name)
		}
	}
	if _, err := hashFile(filepath.Join(dir, "missing")); !os.IsNotExist(err) {
		t.Errorf("a missing file: %v, want not-exist", err)
	}
}

// TestHashFileFifoRefused: a racy file the sandbox swapped for a fifo
// between the scan and the hash is refused at once; the open no longer
// waits for a writer that never comes (which held the helper's round trip
// for good).
func TestHashFileFifoRefused(t *testing.T) {
	p := filepath.Join(t.TempDir(), "racy.go")
	if err := syscall.Mkfifo(p, 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := hashFile(p); done <- err }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a fifo was hashed")
		}
	case <-time.After(10 * time.Second):
		// Unblock the open so the test binary can end.
		if f, err := os.OpenFile(p, os.O_WRONLY, 0); err == nil {
			f.Close()
		}
		t.Fatal("hashing a fifo waited for a writer")
	}
}
