package sync

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestScanSkipsWhatItCannotRead: a directory the walk cannot open (EACCES,
// ELOOP, EIO...) and a path past PATH_MAX are left out with a reason, and
// what the last sync knew below the unreadable directory is kept as it was
// (not taken for deleted); everything else is scanned.
func TestScanSkipsWhatItCannotRead(t *testing.T) {
	root := t.TempDir()
	put(t, filepath.Join(root, "ok/a"), "a\n")
	put(t, filepath.Join(root, "locked/b"), "b\n")
	mkDeep(t, root)
	m, err := (&Scanner{}).Scan(root, nil)
	if err != nil {
		t.Fatal(err)
	}
	prev := m
	old := readDirFunc
	t.Cleanup(func() { readDirFunc = old })
	readDirFunc = func(full string) ([]dirEntry, error) {
		if full == filepath.Join(root, "locked") {
			return nil, &os.PathError{Op: "open", Path: full, Err: syscall.EACCES}
		}
		return old(full)
	}
	sc := &Scanner{}
	m, err = sc.Scan(root, prev)
	if err != nil {
		t.Fatalf("the scan failed as a whole: %v", err)
	}
	if _, ok := m["ok/a"]; !ok {
		t.Fatal("a readable file is missing")
	}
	if _, ok := m["locked/b"]; !ok {
		t.Fatal("a file below an unreadable directory is taken for deleted")
	}
	var reasons []string
	for _, s := range sc.Skipped {
		reasons = append(reasons, s.Path+": "+s.Reason)
	}
	got := strings.Join(reasons, "\n")
	if !strings.Contains(got, "locked: cannot be read: permission denied") || strings.Count(got, "path too long") != 1 {
		t.Fatalf("skipped:\n%s", got)
	}
	for p := range m {
		if len(root)+1+len(p) > maxFullPath {
			t.Fatalf("a path past PATH_MAX is in the manifest: %d bytes", len(p))
		}
	}
}

// TestTooLongOnBothSidesDoesNotWedge: a path past PATH_MAX in the sandbox
// and one on the host: each side reports it once, everything else syncs.
func TestTooLongOnBothSidesDoesNotWedge(t *testing.T) {
	p := newPair(t)
	p.sync(nil)
	mk := func(root string) { mkDeep(t, root) }
	rep := p.sync(func() { mk(p.sandbox); put(t, filepath.Join(p.sandbox, "important.txt"), "keep\n") })
	if read(t, filepath.Join(p.host, "important.txt")) != "keep\n" {
		t.Fatal("important.txt did not come back")
	}
	n := 0
	for _, r := range rep.Refused {
		if strings.Contains(r.Reason, "path too long") {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("refused %+v", rep.Refused)
	}
	rep = p.sync(func() { put(t, filepath.Join(p.sandbox, "second.txt"), "2\n") })
	if read(t, filepath.Join(p.host, "second.txt")) != "2\n" || len(rep.Refused) != 0 {
		t.Fatalf("second round: refused %+v", rep.Refused)
	}
	os.RemoveAll(filepath.Join(p.host, "deep"))
	mk(p.host)
	rep = p.sync(nil)
	if len(rep.Refused) != 1 || !strings.Contains(rep.Refused[0].Reason, "on the host: path too long") {
		t.Fatalf("host side: refused %+v", rep.Refused)
	}
	rep = p.sync(func() { put(t, filepath.Join(p.sandbox, "third.txt"), "3\n") })
	if read(t, filepath.Join(p.host, "third.txt")) != "3\n" {
		t.Fatal("third.txt did not come back")
	}
}

// mkDeep makes root/deep/nnn.../nnn... past PATH_MAX, one directory at a
// time relative to the last (a full path that long cannot be opened).
func mkDeep(t *testing.T, root string) {
	t.Helper()
	wd, _ := os.Getwd()
	defer os.Chdir(wd)
	if err := os.Mkdir(filepath.Join(root, "deep"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chdir(filepath.Join(root, "deep")); err != nil {
		t.Fatal(err)
	}
	n := strings.Repeat("n", 200)
	for depth := len(root) + 5; depth <= maxFullPath+300; depth += 201 {
		if err := os.Mkdir(n, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chdir(n); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile("f", []byte("deep\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}
