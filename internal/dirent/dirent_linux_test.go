//go:build linux

package dirent

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// list is Each's names of dir, and the type and size statx gives each.
func list(t testing.TB, dir string) []string {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	var names []string
	var st unix.Statx_t
	err = Each(fd, make([]byte, 512), func(name []byte, cname *byte, typ uint8) error {
		if got := unsafe.String(cname, len(name)); got != string(name) {
			t.Fatalf("cname %q, name %q", got, name)
		}
		if err := Statx(fd, cname, unix.STATX_TYPE|unix.STATX_SIZE, &st); err != nil {
			t.Fatalf("statx %q: %v", name, err)
		}
		names = append(names, string(name))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(names)
	return names
}

// Each lists what os.ReadDir lists (an independent reader), for any names:
// fuzzed names, one file each, in a buffer small enough that a directory
// takes several getdents64 calls.
func FuzzEachNames(f *testing.F) {
	f.Add("a/b/c")
	f.Add(".../..a/ \t/\xff\xfe/" + strings.Repeat("x", 255))
	f.Fuzz(func(t *testing.T, s string) {
		dir := t.TempDir()
		for i, name := range strings.Split(s, "/") {
			if name == "" || name == "." || name == ".." || len(name) > 255 || strings.IndexByte(name, 0) >= 0 {
				continue
			}
			if i%2 == 0 {
				os.WriteFile(filepath.Join(dir, name), nil, 0o644)
			} else {
				os.Mkdir(filepath.Join(dir, name), 0o755)
			}
		}
		ents, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		for _, e := range ents {
			want = append(want, e.Name())
		}
		slices.Sort(want)
		if got := list(t, dir); !slices.Equal(got, want) {
			t.Fatalf("Each lists %q, os.ReadDir %q", got, want)
		}
	})
}

// refParse is parse written independently (encoding/binary, no unsafe): the
// names a buffer holds, or false where parse must refuse it.
func refParse(b []byte) ([]string, bool) {
	var out []string
	for len(b) > 0 {
		if len(b) < 20 {
			return out, false
		}
		n := int(binary.NativeEndian.Uint16(b[16:18]))
		if n < 20 || n > len(b) {
			return out, false
		}
		name, _, ok := bytes.Cut(b[19:n], []byte{0})
		if !ok || len(name) == 0 {
			return out, false
		}
		if s := string(name); s != "." && s != ".." {
			out = append(out, s)
		}
		b = b[n:]
	}
	return out, true
}

// parse never reads past the buffer, and yields what the reference does on
// any bytes, however malformed.
func FuzzParse(f *testing.F) {
	rec := func(name string) []byte {
		n := (19 + len(name) + 1 + 7) &^ 7
		b := make([]byte, n)
		binary.NativeEndian.PutUint16(b[16:], uint16(n))
		copy(b[19:], name)
		return b
	}
	f.Add(append(append(rec("."), rec("..")...), rec("file")...))
	f.Add(rec("x")[:10])
	f.Fuzz(func(t *testing.T, b []byte) {
		b = slices.Clone(b) // parse may be given exactly this, and no more
		var got []string
		err := parse(b, func(name []byte, cname *byte, _ uint8) error {
			if *(*byte)(unsafe.Add(unsafe.Pointer(cname), len(name))) != 0 {
				t.Fatalf("name %q not NUL-terminated", name)
			}
			got = append(got, string(name))
			return nil
		})
		want, ok := refParse(b)
		if !slices.Equal(got, want) || (err == nil) != ok {
			t.Fatalf("parse yields %q (%v), the reference %q (ok %v)", got, err, want, ok)
		}
	})
}
