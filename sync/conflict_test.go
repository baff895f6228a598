package sync

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The conflict rules of the pull-back (applyOne), one row per case: the
// trees both sides start from, what the host does while the command runs,
// what the command does, and what the host must hold after.
func TestConflictRules(t *testing.T) {
	const absent, dir = "<absent>", "<dir>"
	link := func(t string) string { return "<link:" + t + ">" }
	rm := func(root, p string) { os.RemoveAll(filepath.Join(root, p)) }
	mkdir := func(root, p string) { os.MkdirAll(filepath.Join(root, p), 0o755) }
	ln := func(root, target, p string) { os.Symlink(target, filepath.Join(root, p)) }
	for _, c := range []struct {
		name    string
		start   map[string]string
		host    func(t *testing.T, h string)
		sandbox func(t *testing.T, s string)
		want    map[string]string
		report  string // in HostKept or Conflicts
	}{
		{"sandbox removes a dir, host edited a file in it",
			map[string]string{"d/a": "a", "d/b": "b"},
			func(t *testing.T, h string) { put(t, h+"/d/a", "host a") },
			func(t *testing.T, s string) { rm(s, "d") },
			map[string]string{"d/a": "host a", "d/b": absent}, "removed in the sandbox, but the host changed or added 1 path"},
		{"sandbox removes a dir, host added a file in it",
			map[string]string{"d/a": "a"},
			func(t *testing.T, h string) { put(t, h+"/d/sub/new", "new") },
			func(t *testing.T, s string) { rm(s, "d") },
			map[string]string{"d/a": absent, "d/sub/new": "new"}, "removed in the sandbox"},
		{"sandbox removes a dir, host deleted one file and added another",
			map[string]string{"d/a": "a", "d/b": "b"},
			func(t *testing.T, h string) { rm(h, "d/a"); put(t, h+"/d/c", "c") },
			func(t *testing.T, s string) { rm(s, "d") },
			map[string]string{"d/a": absent, "d/b": absent, "d/c": "c"}, "removed in the sandbox"},
		{"sandbox removes a dir nobody else touched",
			map[string]string{"d/a": "a", "d/e/f": "f"},
			nil,
			func(t *testing.T, s string) { rm(s, "d") },
			map[string]string{"d": absent}, ""},
		{"host removes a dir, sandbox edited a file in it",
			map[string]string{"d/a": "a", "d/b": "b"},
			func(t *testing.T, h string) { rm(h, "d") },
			func(t *testing.T, s string) { put(t, s+"/d/a", "sandbox a") },
			map[string]string{"d/a": absent, "d/b": absent, "d/a.sbx-conflict": "sandbox a"}, "removed on the host while the sandbox changed files in it"},
		{"host removes a dir, sandbox added a file in it",
			map[string]string{"d/a": "a"},
			func(t *testing.T, h string) { rm(h, "d") },
			func(t *testing.T, s string) { put(t, s+"/d/x/new", "new") },
			map[string]string{"d/a": absent, "d/x/new": "new"}, "made again"},
		{"sandbox makes a file a dir, host edited the file",
			map[string]string{"p": "p"},
			func(t *testing.T, h string) { put(t, h+"/p", "host p") },
			func(t *testing.T, s string) { rm(s, "p"); put(t, s+"/p/inner", "inner") },
			map[string]string{"p": "host p", "p.sbx-conflict/inner": "inner"}, "p.sbx-conflict"},
		{"sandbox makes a file a dir, host left it",
			map[string]string{"p": "p"},
			nil,
			func(t *testing.T, s string) { rm(s, "p"); put(t, s+"/p/inner", "inner") },
			map[string]string{"p/inner": "inner"}, ""},
		{"host makes a dir a file, sandbox wrote into the dir",
			map[string]string{"q/x": "x"},
			func(t *testing.T, h string) { rm(h, "q"); put(t, h+"/q", "host q") },
			func(t *testing.T, s string) { put(t, s+"/q/y", "y") },
			map[string]string{"q": "host q", "q.sbx-conflict/y": "y"}, "q.sbx-conflict"},
		{"host makes a dir a symlink, sandbox wrote into the dir",
			map[string]string{"q/x": "x", "other/z": "z"},
			func(t *testing.T, h string) { rm(h, "q"); ln(h, "other", "q") },
			func(t *testing.T, s string) { put(t, s+"/q/y", "y") },
			map[string]string{"q": link("other"), "other/y": absent, "other/z": "z", "q.sbx-conflict/y": "y"}, "q.sbx-conflict"},
		{"sandbox makes a dir a file, host edited in the dir",
			map[string]string{"d/a": "a", "d/b": "b"},
			func(t *testing.T, h string) { put(t, h+"/d/a", "host a") },
			func(t *testing.T, s string) { rm(s, "d"); put(t, s+"/d", "file d") },
			map[string]string{"d/a": "host a", "d/b": absent, "d.sbx-conflict": "file d"}, "a directory the sandbox replaced"},
		{"sandbox makes a dir a file, host left it",
			map[string]string{"d/a": "a"},
			nil,
			func(t *testing.T, s string) { rm(s, "d"); put(t, s+"/d", "file d") },
			map[string]string{"d": "file d"}, ""},
		{"sandbox makes a dir a symlink: no deletion goes through the link",
			map[string]string{"d/a": "a", "e/a": "ea"},
			nil,
			func(t *testing.T, s string) { rm(s, "d"); ln(s, "e", "d") },
			map[string]string{"d": link("e"), "e/a": "ea"}, ""},
		{"host makes a file a dir, sandbox edited the file",
			map[string]string{"p": "p"},
			func(t *testing.T, h string) { rm(h, "p"); put(t, h+"/p/in", "host in") },
			func(t *testing.T, s string) { put(t, s+"/p", "sandbox p") },
			map[string]string{"p/in": "host in", "p.sbx-conflict": "sandbox p"}, "p.sbx-conflict"},
		{"both edit a file",
			map[string]string{"f": "f"},
			func(t *testing.T, h string) { put(t, h+"/f", "host f") },
			func(t *testing.T, s string) { put(t, s+"/f", "sandbox f") },
			map[string]string{"f": "host f", "f.sbx-conflict": "sandbox f"}, "f.sbx-conflict"},
		{"sandbox deletes a file the host edited",
			map[string]string{"f": "f"},
			func(t *testing.T, h string) { put(t, h+"/f", "host f") },
			func(t *testing.T, s string) { rm(s, "f") },
			map[string]string{"f": "host f"}, "removed in the sandbox, but changed on the host meanwhile"},
		{"empty dir made on the host inside a dir the sandbox removes",
			map[string]string{"d/a": "a"},
			func(t *testing.T, h string) { mkdir(h, "d/empty") },
			func(t *testing.T, s string) { rm(s, "d") },
			map[string]string{"d/a": absent, "d/empty": dir}, "removed in the sandbox"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := newPair(t)
			p.h.MassDelete = &MassDelete{} // this table is about conflicts
			for path, content := range c.start {
				put(t, filepath.Join(p.host, path), content)
			}
			p.sync(nil)
			rep := p.sync(func() {
				c.sandbox(t, p.sandbox)
				if c.host != nil {
					c.host(t, p.host)
				}
			})
			for path, want := range c.want {
				if got := describe(filepath.Join(p.host, path)); got != want {
					t.Errorf("%s: %q, want %q", path, got, want)
				}
			}
			all := strings.Join(append(append([]string{}, rep.HostKept...), rep.Conflicts...), "\n")
			if c.report != "" && !strings.Contains(all, c.report) {
				t.Errorf("report %q does not say %q", all, c.report)
			}
			// Nothing wedges: the next round trips converge.
			p.sync(nil)
			p.sync(nil)
			p.same()
		})
	}
}

func describe(p string) string {
	fi, err := os.Lstat(p)
	switch {
	case err != nil:
		return "<absent>"
	case fi.IsDir():
		return "<dir>"
	case fi.Mode()&fs.ModeSymlink != 0:
		t, _ := os.Readlink(p)
		return "<link:" + t + ">"
	}
	b, _ := os.ReadFile(p)
	return string(b)
}

// The rule that holds a pull-back's deletions, as a table over manifests.
func TestHoldReason(t *testing.T) {
	files := func(n int, prefix string) Manifest {
		m := Manifest{}
		for i := 0; i < n; i++ {
			m[fmt.Sprintf("%sf%d", prefix, i)] = Entry{Mode: 0o644}
		}
		return m
	}
	join := func(ms ...Manifest) Manifest {
		out := Manifest{}
		for _, m := range ms {
			for k, v := range m {
				out[k] = v
			}
		}
		return out
	}
	src := join(files(40, "src/"), Manifest{"src": {Mode: fs.ModeDir | 0o755}})
	git := join(files(3, ".git/objects/ab/"), Manifest{".git/HEAD": {Mode: 0o644}, ".git/refs/heads/main": {Mode: 0o644}})
	var half []string
	for i := 0; i < 21; i++ {
		half = append(half, fmt.Sprintf("src/f%d", i))
	}
	for _, c := range []struct {
		name       string
		m          Manifest
		dels, puts []string
		want       string
	}{
		{"nothing deleted", src, nil, nil, ""},
		{"one file", src, []string{"src/f1"}, nil, ""},
		{"the whole dir", join(src, Manifest{"README": {Mode: 0o644}}), []string{"src", "README"}, nil, "all 41 files"},
		{"more than half, at least 20", src, half, nil, "21 of the code dir's 40 files"},
		{"more than half but fewer than 20", files(10, ""), []string{"f0", "f1", "f2", "f3", "f4", "f5"}, nil, ""},
		{"all of a small tree", files(2, ""), []string{"f0", "f1"}, nil, "all 2 files"},
		{"the only file", files(1, ""), []string{"f0"}, nil, ""},
		{"git HEAD", join(src, git), []string{".git/HEAD"}, nil, ".git/HEAD"},
		{"git refs", join(src, git), []string{".git/refs"}, nil, ".git/refs"},
		{"one loose ref", join(src, git), []string{".git/refs/heads/main"}, nil, ""},
		{"all objects, none written", join(src, git), []string{".git/objects/ab"}, nil, "all 3 of git's objects and packs"},
		{"all objects, a pack written (git gc, or garbage)", join(src, git), []string{".git/objects/ab"}, []string{".git/objects/pack/pack-1.pack"}, "all 3 of git's objects and packs"},
		{"one pack of two", join(src, git, Manifest{".git/objects/pack/pack-1.pack": {Mode: 0o444}}), []string{".git/objects/pack/pack-1.pack"}, nil, ""},
		{".git files do not count as code", join(files(3, ""), files(30, ".git/logs/")), []string{".git/logs"}, nil, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := DefaultMassDelete.holdReason(c.m, c.dels, c.puts)
			if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
				t.Fatalf("holdReason = %q, want %q", got, c.want)
			}
		})
	}
}

// The sandbox side follows the same rule: a host deletion (or a host file
// replacing a directory) that reaches the sandbox while a background job
// changed files there removes only what is unchanged; the job's files come
// back to the host with the pull.
func TestHostRemovalKeepsSandboxChanges(t *testing.T) {
	for _, c := range []struct {
		name string
		host func(t *testing.T, h string)
		want map[string]string
	}{
		{"host removes the dir", func(t *testing.T, h string) { os.RemoveAll(filepath.Join(h, "d")) },
			map[string]string{"d/a": "<absent>", "d/job": "job's file"}},
		{"host makes the dir a file", func(t *testing.T, h string) {
			os.RemoveAll(filepath.Join(h, "d"))
			put(t, filepath.Join(h, "d"), "host d")
		},
			map[string]string{"d": "host d", "d.sbx-conflict/job": "job's file"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := newPair(t)
			p.h.MassDelete = &MassDelete{}
			put(t, filepath.Join(p.host, "d/a"), "a")
			put(t, filepath.Join(p.host, "keep"), "k")
			p.sync(nil)
			// A background job writes in the sandbox between round trips.
			put(t, filepath.Join(p.sandbox, "d/job"), "job's file")
			c.host(t, p.host)
			rep := p.sync(nil)
			for path, want := range c.want {
				if got := describe(filepath.Join(p.host, path)); got != want {
					t.Errorf("%s: %q, want %q (report %+v)", path, got, want, rep)
				}
			}
			p.sync(nil)
			p.same()
		})
	}
}
