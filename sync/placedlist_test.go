package sync

import (
	"bytes"
	"io/fs"
	"maps"
	"path"
	"strings"
	"testing"
)

func placedSeed(t testing.TB, m Manifest) []byte {
	var b bytes.Buffer
	if err := writePlacedList(&b, m); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

var placedSample = Manifest{
	"a.txt":      {Mode: 0o644, Size: 3, MTime: 1700000000123456789, CTime: 1700000001000000000, Ino: 42},
	"d":          {Mode: fs.ModeDir | 0o755},
	"d/b":        {Mode: 0o600, Size: 0, MTime: -5, CTime: 7, Ino: 1 << 40},
	"d/e":        {Mode: fs.ModeDir | 0o555},
	"d/e/link":   {Mode: fs.ModeSymlink | 0o777, Link: "../b"},
	"d-sibling":  {Mode: 0o755, Size: 1 << 33},
	"empty-dir":  {Mode: fs.ModeDir},
	"x/../y.bad": {}, // dropped below: not clean
}

// TestPlacedListRoundTrip: a list reads back as written; a stream that
// follows it is not read; what is malformed is refused.
func TestPlacedListRoundTrip(t *testing.T) {
	m := maps.Clone(placedSample)
	delete(m, "x/../y.bad")
	raw := placedSeed(t, m)
	r := bytes.NewReader(append(append([]byte{}, raw...), "NEXT"...))
	got, err := readPlacedList(r)
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(got, m) {
		t.Fatalf("read back %v, want %v", got, m)
	}
	if rest, _ := r.ReadByte(); rest != 'N' {
		t.Fatalf("the reader took bytes past the list (next %q)", rest)
	}
	for name, bad := range map[string]Manifest{
		"not clean":        {"a/./b": {Mode: 0o644}},
		"absolute":         {"/etc/passwd": {Mode: 0o644}},
		"dot dot":          {"../x": {Mode: 0o644}},
		"no parent":        {"d/b": {Mode: 0o644}},
		"parent a file":    {"d": {Mode: 0o644}, "d/b": {Mode: 0o644}},
		"a fifo":           {"p": {Mode: fs.ModeNamedPipe | 0o644}},
		"setuid":           {"s": {Mode: fs.ModeSetuid | 0o755}},
		"link no target":   {"l": {Mode: fs.ModeSymlink | 0o777}},
		"file with target": {"f": {Mode: 0o644, Link: "x"}},
	} {
		if _, err := readPlacedList(bytes.NewReader(placedSeed(t, bad))); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := readPlacedList(bytes.NewReader(raw[:len(raw)-1])); err == nil {
		t.Error("a short list: accepted")
	}
}

// FuzzPlacedList: whatever the reader accepts is a manifest whose every
// path is clean, relative, below a listed directory, of a synced type,
// and which writes back to a list that reads back the same.
func FuzzPlacedList(f *testing.F) {
	m := maps.Clone(placedSample)
	delete(m, "x/../y.bad")
	f.Add(placedSeed(f, m))
	f.Add(placedSeed(f, Manifest{}))
	f.Add(placedSeed(f, Manifest{"a": {Mode: fs.ModeDir}, "a/b": {Mode: fs.ModeSymlink | 0o777, Link: "/"}}))
	f.Fuzz(func(t *testing.T, raw []byte) {
		got, err := readPlacedList(bytes.NewReader(raw))
		if err != nil {
			return
		}
		for p, e := range got {
			if p == "" || strings.HasPrefix(p, "/") || path.Clean(p) != p || p == ".." || strings.HasPrefix(p, "../") {
				t.Fatalf("accepted path %q", p)
			}
			if d := path.Dir(p); d != "." && !got[d].Mode.IsDir() {
				t.Fatalf("accepted %q without its directory", p)
			}
			switch {
			case e.Mode.IsDir(), e.Mode.IsRegular():
				if e.Link != "" {
					t.Fatalf("%q: a target for a %v", p, e.Mode)
				}
			case e.Mode&fs.ModeType == fs.ModeSymlink:
				if e.Link == "" {
					t.Fatalf("%q: a symlink without a target", p)
				}
			default:
				t.Fatalf("%q: accepted type %v", p, e.Mode)
			}
			if e.Mode&^(fs.ModeType|fs.ModePerm) != 0 {
				t.Fatalf("%q: accepted mode %v", p, e.Mode)
			}
		}
		again, err := readPlacedList(bytes.NewReader(placedSeed(t, got)))
		if err != nil || !maps.Equal(again, got) {
			t.Fatalf("written back and read again: %v, %v", again, err)
		}
	})
}
