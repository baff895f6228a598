package inpod

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestReadPidFileRefusesWhatACommandPlants: the pid file sbx-inpod kill
// reads lives where a command can write; a fifo there does not hold the
// kill (the host's timeout would never end the command), a link is not
// followed, and a huge file is not read whole.
func TestReadPidFileRefusesWhatACommandPlants(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "cmd-a.pid")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := readPidFile(fifo); done <- err }()
	select {
	case err := <-done:
		if err == nil {
			t.Error("a fifo was read as a pid file")
		}
	case <-time.After(10 * time.Second):
		if w, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			w.Close()
		}
		t.Fatal("reading a fifo pid file waited for a writer")
	}
	target := filepath.Join(dir, "target")
	os.WriteFile(target, []byte("123\n"), 0o644)
	link := filepath.Join(dir, "cmd-b.pid")
	os.Symlink(target, link)
	if _, err := readPidFile(link); err == nil {
		t.Error("a link was followed")
	}
	big := filepath.Join(dir, "cmd-c.pid")
	os.WriteFile(big, []byte("42"+strings.Repeat(" ", 1<<20)), 0o644)
	if b, err := readPidFile(big); err != nil || len(b) != 32 || !strings.HasPrefix(string(b), "42") {
		t.Errorf("a big pid file: %d bytes, %v", len(b), err)
	}
}

// TestSelfHashIsTheRunningBinary: the greeting's hash is the executable
// that runs, read through /proc/self/exe, not whatever its path names now.
func TestSelfHashIsTheRunningBinary(t *testing.T) {
	f, err := os.Open("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	want, err := Hash(f)
	if err != nil || SelfHash() != want {
		t.Fatalf("SelfHash %s, the running binary %s (%v)", SelfHash(), want, err)
	}
}
