package sync

import (
	"archive/tar"
	"bytes"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// withDeadline runs f and fails the test when it has not returned within
// 10 s; both ends of every fifo in fifos are then opened so a blocked
// open ends.
func withDeadline(t *testing.T, what string, fifos []string, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		// A reader and a writer: whichever end the blocked open waits for.
		var ends []*os.File
		for _, p := range fifos {
			for _, flag := range []int{os.O_RDONLY, os.O_WRONLY} {
				if f, err := os.OpenFile(p, flag|syscall.O_NONBLOCK, 0); err == nil {
					ends = append(ends, f)
				}
			}
		}
		<-done
		for _, f := range ends {
			f.Close()
		}
		t.Fatalf("%s waited on a fifo", what)
		return nil
	}
}

// TestFifoSwappedInIsNotWaitedOn: a file the sandbox's scan found (a change
// to pack into the pull, a racy file to hash) that a process still running
// there swaps for a fifo before it is read is not opened as a reader that
// waits for a writer: the open would hold the helper's round trip, and the
// host's session with it, for good. The packer sends it as deleted (the
// next scan sees the fifo), the hash is refused.
func TestFifoSwappedInIsNotWaitedOn(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "main.go")
	if err := syscall.Mkfifo(p, 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	// Both ways writeEntry opens a file: by its directory's descriptor
	// (packFileAt), and through the root.
	for _, dirs := range []*dirRoots{{base: r, m: map[string]*os.Root{}}, nil} {
		var out bytes.Buffer
		tw := tar.NewWriter(&out)
		err = withDeadline(t, "packing", []string{p}, func() error {
			return writeEntry(tw, r, dirs, Change{Path: "main.go", Entry: Entry{Mode: 0o644, Size: 3}}, nil)
		})
		if err != nil {
			t.Errorf("packing a file now a fifo (by descriptor: %v): %v, want it sent as deleted", dirs != nil, err)
		}
		tw.Close()
		err = ReadPatch(&out, DefaultLimits, func(it *Item) error {
			if !it.Deleted {
				t.Errorf("packing a file now a fifo (by descriptor: %v): sent %+v, want it sent as deleted", dirs != nil, it)
			}
			return nil
		})
		if err != nil {
			t.Error(err)
		}
		if dirs != nil {
			dirs.close()
		}
	}
	err = withDeadline(t, "hashing", []string{p}, func() error {
		_, err := hashIn(r, "main.go")
		return err
	})
	if err == nil {
		t.Error("a fifo was hashed")
	}
}

// TestHelperStateFifoNotWaitedOn: the helper's state file (in the
// sandbox's /run/sbx, which a command there can write) swapped for a fifo
// is not waited on when the next round trip loads it: it is taken as no
// state (the round trip then scans in full).
func TestHelperStateFifoNotWaitedOn(t *testing.T) {
	state, code := t.TempDir(), t.TempDir()
	req := HelperRequest{Version: ProtocolVersion, Seq: 1, StateDir: state, Dirs: []HelperDir{{Path: code}}}
	h, err := NewHelper(req)
	if err != nil {
		t.Fatal(err)
	}
	file := h.dirs[0].file
	os.Remove(file)
	if err := syscall.Mkfifo(file, 0o600); err != nil {
		t.Fatal(err)
	}
	req.Seq = 2
	withDeadline(t, "loading the helper's state", []string{file}, func() error {
		_, err := NewHelper(req)
		return err
	})
}

// TestHelperStateSaveFifoNotWaitedOn: a fifo planted at the name the
// helper writes its state through (X.state.tmp) does not hold the save
// (an open for writing waits for a reader); nor does a link there lead the
// write elsewhere.
func TestHelperStateSaveFifoNotWaitedOn(t *testing.T) {
	state, code, elsewhere := t.TempDir(), t.TempDir(), t.TempDir()
	req := HelperRequest{Version: ProtocolVersion, Seq: 1, StateDir: state, Dirs: []HelperDir{{Path: code}}}
	h, err := NewHelper(req)
	if err != nil {
		t.Fatal(err)
	}
	hd := h.dirs[0]
	tmp := hd.file + ".tmp"
	if err := syscall.Mkfifo(tmp, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := withDeadline(t, "saving the helper's state", []string{tmp}, hd.save); err != nil {
		t.Fatalf("save beside a planted fifo: %v", err)
	}
	target := filepath.Join(elsewhere, "victim")
	os.WriteFile(target, []byte("keep"), 0o600)
	os.Symlink(target, tmp)
	if err := hd.save(); err != nil {
		t.Fatalf("save beside a planted link: %v", err)
	}
	if b, _ := os.ReadFile(target); string(b) != "keep" {
		t.Errorf("the save wrote through a planted link: %q", b)
	}
}
