package sync

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fastCase is one state of a name before a push writes a small file there.
type fastCase struct {
	name string
	// prepare makes what is at dir/f before the write; exists is what the
	// caller's lstat would say.
	prepare func(t *testing.T, dir string)
	exists  bool
	// handled is whether writeSmallAt should do the write itself.
	handled bool
}

// TestWriteSmallAtAsWriteItem: writeSmallAt leaves the tree and returns the
// entry that writeItem does for the same item, whatever is at the name (the
// oracle is writeItem on a twin directory); where it does not take the
// write (handled false) it leaves nothing behind, and writeItem's result
// stands. Nothing is written through a link, and a hard link's other name
// keeps its content, as with a rename.
func TestWriteSmallAtAsWriteItem(t *testing.T) {
	outside := filepath.Join(t.TempDir(), "victim")
	put(t, outside, "outside\n")
	cases := []fastCase{
		{name: "new file", prepare: func(*testing.T, string) {}, handled: true},
		{name: "replace a file", prepare: func(t *testing.T, d string) { put(t, filepath.Join(d, "f"), "old content\n") }, exists: true, handled: true},
		{name: "replace an executable", prepare: func(t *testing.T, d string) {
			put(t, filepath.Join(d, "f"), "#!/bin/sh\n")
			os.Chmod(filepath.Join(d, "f"), 0o755)
		}, exists: true, handled: true},
		{name: "replace a link leading out", prepare: func(t *testing.T, d string) {
			if err := os.Symlink(outside, filepath.Join(d, "f")); err != nil {
				t.Fatal(err)
			}
		}, exists: true, handled: true},
		{name: "replace one name of a hard link", prepare: func(t *testing.T, d string) {
			put(t, filepath.Join(d, "other"), "shared\n")
			if err := os.Link(filepath.Join(d, "other"), filepath.Join(d, "f")); err != nil {
				t.Fatal(err)
			}
		}, exists: true, handled: true},
		{name: "a link appeared where nothing was", prepare: func(t *testing.T, d string) {
			if err := os.Symlink(outside, filepath.Join(d, "f")); err != nil {
				t.Fatal(err)
			}
		}, exists: false, handled: false},
		{name: "a fifo (not an entry: lstatEntry says nothing)", prepare: func(t *testing.T, d string) {
			if err := syscall.Mkfifo(filepath.Join(d, "f"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, exists: false, handled: false},
	}
	for _, racy := range []bool{false, true} {
		for _, perm := range []os.FileMode{0o644, 0o600, 0o755} {
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					mt := time.Now().Add(-time.Hour).UnixNano()
					if racy {
						mt = time.Now().UnixNano()
					}
					body := []byte(strings.Repeat("new content\n", 100))
					item := func() *Item {
						return &Item{Path: "d/f", Entry: Entry{Mode: perm, Size: int64(len(body)), MTime: mt}, Body: bytes.NewReader(body)}
					}
					fast, slow := t.TempDir(), t.TempDir()
					c.prepare(t, fast)
					c.prepare(t, slow)
					dirs := openDirRoots(t, fast)
					e, err, handled := writeSmallAt(dirs.fd("."), "f", item(), body, c.exists)
					if handled != c.handled {
						t.Fatalf("handled %v, want %v (err %v)", handled, c.handled, err)
					}
					if !handled {
						if left := entryNames(t, fast); !equalNames(left, entryNames(t, slow)) {
							t.Fatalf("not handled, but the directory changed: %v, want %v", left, entryNames(t, slow))
						}
						e, err = writeItem(dirs.base, item(), "f", true)
					}
					if err != nil {
						t.Fatal(err)
					}
					sr, err := os.OpenRoot(slow)
					if err != nil {
						t.Fatal(err)
					}
					defer sr.Close()
					want, err := writeItem(sr, item(), "f", true)
					if err != nil {
						t.Fatal(err)
					}
					// What a scan will find: the entry whole, its inode
					// and change time included (as after the rename).
					fi, err := os.Lstat(filepath.Join(fast, "f"))
					if err != nil {
						t.Fatal(err)
					}
					disk, _ := entryOf(fi)
					got := e
					got.Hash = ""
					if got != disk {
						t.Errorf("on disk %+v, the entry says %+v", disk, e)
					}
					// The two trees differ in inode and change time only.
					e.Ino, e.CTime, want.Ino, want.CTime = 0, 0, 0, 0
					if e != want {
						t.Errorf("entry %+v, writeItem's %+v", e, want)
					}
					if got := read(t, filepath.Join(fast, "f")); got != string(body) {
						t.Errorf("content %q", got)
					}
					if got, want := entryNames(t, fast), entryNames(t, slow); !equalNames(got, want) {
						t.Errorf("the directory holds %v, writeItem's %v", got, want)
					}
					if got := read(t, outside); got != "outside\n" {
						t.Errorf("written through a link: the file outside holds %q", got)
					}
					if _, err := os.Lstat(filepath.Join(fast, "other")); err == nil {
						if got := read(t, filepath.Join(fast, "other")); got != "shared\n" {
							t.Errorf("the hard link's other name holds %q", got)
						}
					}
				})
			}
		}
	}
}

func openDirRoots(t *testing.T, dir string) *dirRoots {
	t.Helper()
	r, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	d := &dirRoots{base: r, m: map[string]*os.Root{}}
	t.Cleanup(func() { d.close(); r.Close() })
	return d
}

func entryNames(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

func equalNames(a, b []string) bool {
	return strings.Join(a, "\x00") == strings.Join(b, "\x00")
}
