package sync

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

type tarEntry struct {
	h    tar.Header
	body string
}

func tfile(name, body string) tarEntry {
	return tarEntry{tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(body)), Format: tar.FormatPAX}, body}
}

func tsymlink(name, target string) tarEntry {
	return tarEntry{h: tar.Header{Name: name, Typeflag: tar.TypeSymlink, Linkname: target, Mode: 0o777, Format: tar.FormatPAX}}
}

func mkTar(t *testing.T, entries ...tarEntry) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, e := range entries {
		h := e.h
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(e.body))
	}
	tw.Close()
	return b.Bytes()
}

func hashTree(t *testing.T, root string) string {
	h := sha256.New()
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		fi, _ := d.Info()
		l, _ := os.Readlink(p)
		fmt.Fprintf(h, "%s %v %s\n", p, fi.Mode(), l)
		if fi.Mode().IsRegular() {
			b, _ := os.ReadFile(p)
			h.Write(b)
		}
		return nil
	})
	return fmt.Sprintf("%x", h.Sum(nil))
}

func TestHostileStreamsAreRefusedWhole(t *testing.T) {
	long := tarEntry{tar.Header{Name: "big", Typeflag: tar.TypeReg, Mode: 0o644, Size: DefaultLimits.MaxFileSize + 1, Format: tar.FormatPAX}, ""}
	for _, c := range []struct {
		name    string
		stream  func(t *testing.T) []byte
		setup   func(host string)
		wantErr string
	}{
		{"absolute path", func(t *testing.T) []byte { return mkTar(t, tfile("ok.txt", "x"), tfile("/etc/passwd", "x")) }, nil, "absolute"},
		{"dot-dot", func(t *testing.T) []byte { return mkTar(t, tfile("ok.txt", "x"), tfile("../outside", "x")) }, nil, ".."},
		{"dot-dot inside", func(t *testing.T) []byte { return mkTar(t, tfile("a/../../x", "x")) }, nil, ".."},
		{"git config", func(t *testing.T) []byte {
			return mkTar(t, tfile("ok.txt", "x"), tfile(".git/config", "[core]\nsshCommand=x"))
		}, nil, ".git/config"},
		{"git hook", func(t *testing.T) []byte { return mkTar(t, tfile(".git/hooks/pre-commit", "#!/bin/sh")) }, nil, "hooks"},
		{"git alternates", func(t *testing.T) []byte { return mkTar(t, tfile(".git/objects/info/alternates", "/x")) }, nil, "alternates"},
		{"nested git", func(t *testing.T) []byte { return mkTar(t, tfile("sub/.git/config", "x")) }, nil, "nested .git"},
		{"git replaced by symlink", func(t *testing.T) []byte { return mkTar(t, tsymlink(".git", "/tmp")) }, nil, ".git"},
		{"symlink out", func(t *testing.T) []byte { return mkTar(t, tsymlink("etc", "/etc")) }, nil, "outside"},
		{"symlink up", func(t *testing.T) []byte { return mkTar(t, tsymlink("up", "../../x")) }, nil, "outside"},
		{"write through symlink in patch", func(t *testing.T) []byte { return mkTar(t, tsymlink("l", "sub"), tfile("l/x", "x")) }, nil, "symlink in the same patch"},
		{"write through host symlink to .git", func(t *testing.T) []byte { return mkTar(t, tfile("g/config", "x")) }, func(host string) { os.Symlink(".git", filepath.Join(host, "g")) }, "symlink on the host"},
		{"hardlink", func(t *testing.T) []byte {
			return mkTar(t, tarEntry{h: tar.Header{Name: "h", Typeflag: tar.TypeLink, Linkname: "/etc/shadow", Format: tar.FormatPAX}})
		}, nil, "never synced"},
		{"char device", func(t *testing.T) []byte {
			return mkTar(t, tarEntry{h: tar.Header{Name: "dev", Typeflag: tar.TypeChar, Devmajor: 1, Devminor: 3, Format: tar.FormatPAX}})
		}, nil, "never synced"},
		{"fifo", func(t *testing.T) []byte {
			return mkTar(t, tarEntry{h: tar.Header{Name: "p", Typeflag: tar.TypeFifo, Format: tar.FormatPAX}})
		}, nil, "never synced"},
		{"duplicate", func(t *testing.T) []byte { return mkTar(t, tfile("a", "1"), tfile("a", "2")) }, nil, "twice"},
		{"oversized", func(t *testing.T) []byte { return mkTar(t, long) }, nil, "limit"},
		{"trailing data", func(t *testing.T) []byte { return append(mkTar(t, tfile("a", "1")), []byte("garbage")...) }, nil, "trailing"},
		{"not a tar", func(t *testing.T) []byte {
			return []byte("hello, this is not a tar stream at all, but it is long enough to be read as a header block maybe")
		}, nil, "refused"},
		{"deletion with content", func(t *testing.T) []byte {
			e := tfile("a", "xx")
			e.h.PAXRecords = map[string]string{paxDeleted: "1"}
			return mkTar(t, e)
		}, nil, "deletion with content"},
		{"excluded path", func(t *testing.T) []byte { return mkTar(t, tfile(".sbx/quarantine/.mcp.json", "x")) }, nil, "excluded"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := newPair(t)
			put(t, filepath.Join(p.host, "keep.txt"), "keep")
			os.MkdirAll(filepath.Join(p.host, ".git"), 0o755)
			put(t, filepath.Join(p.host, ".git/config"), "[core]\n")
			if c.setup != nil {
				c.setup(p.host)
			}
			p.sync(nil)
			before := hashTree(t, p.host)
			r, _, err := p.h.Begin()
			if err != nil {
				t.Fatal(err)
			}
			stream := c.stream(t)
			err = r.ReadPull(bytes.NewReader(stream))
			var pe *PatchError
			if !errors.As(err, &pe) {
				t.Fatalf("want a *PatchError, got %v", err)
			}
			if !strings.Contains(err.Error(), c.wantErr) {
				t.Fatalf("error %q does not mention %q", err, c.wantErr)
			}
			if _, err := r.Finish(HelperReply{Seq: r.Request.Seq}); err != nil {
				t.Fatal(err)
			}
			if after := hashTree(t, p.host); after != before {
				t.Fatal("a refused stream changed the host tree")
			}
		})
	}
}

func TestSetuidBitsNeverTravel(t *testing.T) {
	p := newPair(t)
	p.sync(nil)
	r, _, _ := p.h.Begin()
	e := tfile("tool", "#!/bin/sh")
	e.h.Mode = 0o6755
	if err := r.ReadPull(bytes.NewReader(mkTar(t, e))); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Finish(HelperReply{Seq: r.Request.Seq}); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(p.host, "tool"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&(fs.ModeSetuid|fs.ModeSetgid) != 0 || fi.Mode().Perm() != 0o755 {
		t.Fatalf("mode %v", fi.Mode())
	}
}

// FuzzReadPatch applies two fuzzed pull-backs in a row (a link planted in
// one round trip can change where one of the other round trip resolves) to
// a host tree holding the user's own link to outside, and judges the result
// in the real tree, not with the rules under test: nothing outside was
// written, every symlink resolves inside (followed component by component
// with os.Lstat and os.Readlink, and cross-checked with
// filepath.EvalSymlinks), no .git spelling but the top-level .git came
// back, nothing dangerous landed in .git, and nothing protected landed
// outside the quarantine.
func FuzzReadPatch(f *testing.F) {
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
	none := seed()
	f.Add(seed(tfile("a", "1")), none)
	f.Add(seed(tsymlink("l", "x"), tfile("l/y", "2")), none)
	f.Add(seed(tfile(".git/config", "x")), none)
	f.Add(seed(tfile("../x", "x")), none)
	f.Add([]byte("garbage"), none)
	f.Add(seed(tsymlink("U", "."), tsymlink("keylink", "U/U/U/U/../../../../outside/secret")), none)
	f.Add(seed(tsymlink("keylink", "z/z/z/z/../../../../outside/secret")), seed(tsymlink("z", ".")))
	f.Add(seed(tsymlink("k", "out/secret")), none)
	f.Add(seed(tfile(".GIT/hooks/pre-commit", "x")), seed(tfile("sub/.Git/config", "x")))
	f.Add(seed(tfile("pkg/.claude/settings.json", "{}")), seed(tfile(".git/rebase-merge/git-rebase-todo", "exec x")))
	f.Fuzz(func(t *testing.T, stream1, stream2 []byte) {
		base := fastTempDir(t)
		host, state, outside := filepath.Join(base, "host"), filepath.Join(base, "state"), filepath.Join(base, "outside")
		for _, d := range []string{host, state, outside, filepath.Join(host, ".git/hooks"), filepath.Join(host, "d")} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		os.WriteFile(filepath.Join(host, ".git/config"), []byte("[core]\n"), 0o644)
		os.WriteFile(filepath.Join(outside, "secret"), []byte("s"), 0o644)
		os.Symlink(outside, filepath.Join(host, "out")) // the user's own link
		for _, stream := range [][]byte{stream1, stream2} {
			h, err := OpenHost(state, []HostDir{{Path: host}})
			if err != nil {
				t.Fatal(err)
			}
			r, _, err := h.Begin()
			if err != nil {
				t.Fatal(err)
			}
			if err := r.ReadPull(bytes.NewReader(stream)); err != nil {
				var pe *PatchError
				if !errors.As(err, &pe) {
					t.Fatalf("error of type %T: %v", err, err)
				}
			}
			r.Finish(HelperReply{Seq: r.Request.Seq})
		}
		if entries, _ := os.ReadDir(outside); len(entries) != 1 {
			t.Fatalf("wrote outside the code dir: %v", entries)
		}
		if b, _ := os.ReadFile(filepath.Join(host, ".git/config")); string(b) != "[core]\n" {
			t.Fatalf(".git/config changed: %q", b)
		}
		realHost, err := filepath.EvalSymlinks(host)
		if err != nil {
			t.Fatal(err)
		}
		filepath.WalkDir(host, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			rel, _ := filepath.Rel(host, p)
			if rel == "." || rel == "out" {
				return nil
			}
			if rel == QuarantineDir || strings.HasPrefix(rel, QuarantineDir+"/") {
				return fs.SkipDir
			}
			els := strings.Split(rel, "/")
			for i, el := range els {
				if oracleGitName(el) && (i > 0 || el != ".git") {
					t.Fatalf("a .git spelling came back: %q", rel)
				}
				for _, prot := range []string{".claude", ".envrc", ".mcp.json", ".husky", ".npmrc"} {
					if strings.EqualFold(el, prot) {
						t.Fatalf("protected %q came back outside the quarantine", rel)
					}
				}
			}
			if els[0] == ".git" && len(els) > 1 {
				switch strings.ToLower(els[1]) {
				case "hooks", "info", "modules", "worktrees", "commondir", "config.worktree", "rebase-merge", "rebase-apply", "sequencer":
					if rel != ".git/hooks" {
						t.Fatalf("wrote %s", rel)
					}
				}
				if strings.EqualFold(rel, ".git/objects/info/alternates") || strings.EqualFold(rel, ".git/objects/info/http-alternates") {
					t.Fatalf("wrote %s", rel)
				}
			}
			if d.Type()&fs.ModeSymlink != 0 {
				if !oracleResolvesInside(realHost, filepath.Join(realHost, rel)) {
					target, _ := os.Readlink(p)
					t.Fatalf("planted %s -> %s, which resolves outside the code dir", rel, target)
				}
				if real, err := filepath.EvalSymlinks(p); err == nil && real != realHost && !strings.HasPrefix(real, realHost+"/") {
					t.Fatalf("planted %s, which EvalSymlinks resolves to %s", rel, real)
				}
			}
			return nil
		})
	})
}

// oracleResolvesInside follows the symlink at the absolute path link in the
// real file system, one component at a time, and reports whether every
// place the walk passes stays inside root. A component that does not exist
// ends the walk (the kernel would fail there).
func oracleResolvesInside(root, link string) bool {
	inside := func(p string) bool { return p == root || strings.HasPrefix(p, root+"/") }
	cur := filepath.Dir(link)
	todo := []string{filepath.Base(link)}
	for hops := 0; len(todo) > 0; {
		c := todo[0]
		todo = todo[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			cur = filepath.Dir(cur)
			if !inside(cur) {
				return false
			}
			continue
		}
		next := filepath.Join(cur, c)
		fi, err := os.Lstat(next)
		if err != nil {
			return true
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			cur = next
			continue
		}
		if hops++; hops > 40 {
			return true // ELOOP: resolves nowhere
		}
		t, err := os.Readlink(next)
		if err != nil {
			return false
		}
		if filepath.IsAbs(t) {
			cur = "/"
			if !inside(cur) {
				return false
			}
		}
		todo = append(strings.Split(t, "/"), todo...)
	}
	return inside(cur)
}

// fastTempDir is a temporary directory on a tmpfs when the machine has one
// (/dev/shm): the pull-back fsyncs its spool and state, which on a busy
// disk costs seconds per fuzz input and left FuzzReadPatch at 0.5 execs/s.
func fastTempDir(t *testing.T) string {
	t.Helper()
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		if d, err := os.MkdirTemp("/dev/shm", "sbx-fuzz-"); err == nil {
			t.Cleanup(func() { os.RemoveAll(d) })
			return d
		}
	}
	return t.TempDir()
}
