package sync

import (
	"archive/tar"
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// FuzzPullBackKeepsHostVersions applies a fuzzed pull-back to a host tree
// that the host changed during the command (an edit, a new file, a file
// made a directory, a directory removed), and judges by content alone, not
// with the rules under test: every file content the host had just before
// the pull-back is afterwards in the host tree (at its path, beside it, in
// the quarantine) or in the journal; nothing outside the code dir changed;
// and the next round trip still works (no wedge).
func FuzzPullBackKeepsHostVersions(f *testing.F) {
	seed := func(entries ...tarEntry) []byte {
		var b bytes.Buffer
		tw := tar.NewWriter(&b)
		for _, e := range entries {
			h := e.h
			tw.WriteHeader(&h)
			tw.Write([]byte(e.body))
		}
		tw.Close()
		return b.Bytes()
	}
	del := func(name string) tarEntry {
		return tarEntry{h: tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o600, Format: tar.FormatPAX, PAXRecords: map[string]string{paxDeleted: "1"}}}
	}
	tdir := func(name string) tarEntry {
		return tarEntry{h: tar.Header{Name: name, Typeflag: tar.TypeDir, Mode: 0o755, Format: tar.FormatPAX}}
	}
	f.Add(seed(del("d")))
	f.Add(seed(tfile("d", "file d"), del("d/a")))
	f.Add(seed(tdir("p"), tfile("p/inner", "x")))
	f.Add(seed(tfile("q/y", "y")))
	f.Add(seed(tfile("gone/x", "sandbox x")))
	f.Add(seed(tsymlink("d", "q"), del("d/a")))
	f.Add(seed(tfile("d/a", "sandbox a"), tfile("d/b", "sandbox b"), tfile("p", "sandbox p")))
	f.Add(seed(del("d"), del("p"), del("q"), del("gone"), del("keep")))
	f.Fuzz(func(t *testing.T, stream []byte) {
		base := fastTempDir(t)
		host, state, outside := filepath.Join(base, "host"), filepath.Join(base, "state"), filepath.Join(base, "outside")
		for _, d := range []string{host, state, outside} {
			os.MkdirAll(d, 0o755)
		}
		write := func(rel, content string) {
			p := filepath.Join(host, rel)
			os.MkdirAll(filepath.Dir(p), 0o755)
			os.WriteFile(p, []byte(content), 0o644)
		}
		write("d/a", "a")
		write("d/b", "b")
		write("d/sub/c", "c")
		write("p", "p")
		write("q/x", "x")
		write("gone/x", "gx")
		write("keep", "keep")
		os.WriteFile(filepath.Join(outside, "o"), []byte("o"), 0o644)
		os.Symlink(outside, filepath.Join(host, "out"))
		j := &Journal{Dir: filepath.Join(base, "journal")}
		h, err := OpenHost(state, []HostDir{{Path: host}})
		if err != nil {
			t.Fatal(err)
		}
		h.Journal = j
		r, _, err := h.Begin()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.Finish(HelperReply{Seq: r.Request.Seq}); err != nil {
			t.Fatal(err)
		}
		r, _, err = h.Begin()
		if err != nil {
			t.Fatal(err)
		}
		// The host changes while the command runs.
		write("d/a", "host a")
		write("d/new", "host new")
		os.Remove(filepath.Join(host, "p"))
		write("p/host", "host p/host")
		os.RemoveAll(filepath.Join(host, "gone"))
		before := contentSet(host)
		if err := r.ReadPull(bytes.NewReader(stream)); err != nil {
			var pe *PatchError
			if !errors.As(err, &pe) {
				t.Fatalf("error of type %T: %v", err, err)
			}
		}
		if _, err := r.Finish(HelperReply{Seq: r.Request.Seq}); err != nil {
			t.Fatalf("the pull-back failed (a wedge: every later command would fail): %v", err)
		}
		after, kept := contentSet(host), contentSet(j.Dir)
		for c := range before {
			if !after[c] && !kept[c] {
				t.Fatalf("the host's %q is neither in the tree nor in the journal", c)
			}
		}
		if b, err := os.ReadFile(filepath.Join(outside, "o")); err != nil || string(b) != "o" {
			t.Fatalf("outside changed: %q %v", b, err)
		}
		if ents, _ := os.ReadDir(outside); len(ents) != 1 {
			t.Fatalf("wrote outside: %v", ents)
		}
		r, _, err = h.Begin()
		if err != nil {
			t.Fatalf("the next round trip: %v", err)
		}
		if _, err := r.Finish(HelperReply{Seq: r.Request.Seq}); err != nil {
			t.Fatalf("the next round trip: %v", err)
		}
	})
}

// contentSet is the set of regular files' contents under root (the journal's
// own records aside).
func contentSet(root string) map[string]bool {
	out := map[string]bool{}
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() && d.Name() != "entries.json" && d.Name() != "held.json" {
			b, _ := os.ReadFile(p)
			out[string(b)] = true
		}
		return nil
	})
	return out
}
