package sync

import (
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// contents lists the content of every regular file under root, by content.
func contents(root string) map[string][]string {
	out := map[string][]string{}
	filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			b, _ := os.ReadFile(p)
			rel, _ := filepath.Rel(root, p)
			out[string(b)] = append(out[string(b)], rel)
		}
		return nil
	})
	return out
}

// files maps each regular file's relative path to its content.
func files(root string) map[string]string {
	out := map[string]string{}
	for c, ps := range contents(root) {
		for _, p := range ps {
			out[p] = c
		}
	}
	return out
}

type mutator struct {
	rng  *rand.Rand
	n    *int
	side string
}

var names = []string{"a", "b", "c", "d/e", "d/f", "g/h/i"}

// step applies one random operation under root.
func (m mutator) step(t *testing.T, root string) {
	name := names[m.rng.Intn(len(names))]
	p := filepath.Join(root, name)
	*m.n++
	switch m.rng.Intn(10) {
	case 0, 1, 2: // write new content (sometimes the same size, same tick)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if fi, err := os.Lstat(p); err == nil && fi.IsDir() {
			os.RemoveAll(p)
		}
		os.WriteFile(p, []byte(fmt.Sprintf("%s-v%04d", m.side, *m.n)), 0o644)
	case 3: // delete
		os.RemoveAll(p)
	case 4: // chmod
		os.Chmod(p, 0o700|os.FileMode(m.rng.Intn(2))*0o055)
	case 5: // symlink to a sibling
		os.RemoveAll(p)
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.Symlink(filepath.Base(names[m.rng.Intn(len(names))]), p)
	case 6: // rename
		q := filepath.Join(root, names[m.rng.Intn(len(names))])
		if fi, err := os.Lstat(q); err == nil && fi.IsDir() {
			return
		}
		os.MkdirAll(filepath.Dir(q), 0o755)
		os.Rename(p, q)
	case 7: // remove a directory tree
		os.RemoveAll(filepath.Join(root, dirNames[m.rng.Intn(len(dirNames))]))
	case 8: // a directory where a file (or nothing) was
		os.RemoveAll(p)
		os.MkdirAll(p, 0o755)
		os.WriteFile(filepath.Join(p, "x"), []byte(fmt.Sprintf("%s-v%04d", m.side, *m.n)), 0o644)
	case 9: // a file where a directory was
		q := filepath.Join(root, dirNames[m.rng.Intn(len(dirNames))])
		os.RemoveAll(q)
		os.MkdirAll(filepath.Dir(q), 0o755)
		os.WriteFile(q, []byte(fmt.Sprintf("%s-v%04d", m.side, *m.n)), 0o644)
	}
}

var dirNames = []string{"d", "g", "g/h"}

// journaled lists the contents the journal keeps.
func journaled(dir string) map[string]bool {
	out := map[string]bool{}
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() && filepath.Base(p) != "entries.json" {
			b, _ := os.ReadFile(p)
			out[string(b)] = true
		}
		return nil
	})
	return out
}

// TestPropertyNothingLost runs random operations on both sides with syncs
// between and checks, after each round trip, that no version is lost: what
// the sandbox had when its command ended is on the host (at its path or in a
// conflict copy), what the host changed meanwhile is still at its path, and
// after a quiet round trip both trees are the same.
func TestPropertyNothingLost(t *testing.T) {
	seeds := 30
	if testing.Short() {
		seeds = 3
	}
	for seed := 0; seed < seeds; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			rng := rand.New(rand.NewSource(int64(seed)))
			n := 0
			host := mutator{rng, &n, "host"}
			sbox := mutator{rng, &n, "sandbox"}
			p := newPair(t)
			for i := 0; i < 25; i++ {
				for k := rng.Intn(3); k > 0; k-- {
					host.step(t, p.host)
				}
				var sandboxEnd, hostBefore, hostEnd map[string]string
				t.Logf("round %d: host before push: %v", i, files(p.host))
				rep := p.sync(func() {
					hostBefore = files(p.host)
					for k := rng.Intn(4); k > 0; k-- {
						sbox.step(t, p.sandbox)
					}
					// Sometimes the host changes during the command too.
					for k := rng.Intn(2); k > 0; k-- {
						host.step(t, p.host)
					}
					sandboxEnd = files(p.sandbox)
					hostEnd = files(p.host)
				})
				t.Logf("round %d: sandbox end %v host end %v report %+v", i, sandboxEnd, hostEnd, rep)
				for _, r := range rep.Refused {
					if rel, err := filepath.Rel(p.sandbox, r.Path); err == nil {
						if p.ignore == nil {
							p.ignore = map[string]bool{}
						}
						p.ignore[filepath.ToSlash(rel)] = true
						delete(sandboxEnd, filepath.ToSlash(rel))
					}
				}
				after := files(p.host)
				have := contents(p.host)
				kept := journaled(p.h.Journal.Dir)
				for path, c := range hostEnd {
					if _, ok := have[c]; !ok && !kept[c] {
						t.Fatalf("round %d: the host's %s (%q) is neither in the tree nor in the journal", i, path, c)
					}
				}
				for path, c := range sandboxEnd {
					if hostBefore[path] == c {
						continue // what the push brought; the host may change it
					}
					if _, ok := have[c]; !ok {
						t.Fatalf("round %d: the sandbox's %s (%q) is nowhere on the host", i, path, c)
					}
				}
				for path, c := range hostEnd {
					if hostBefore[path] != c && after[path] != c {
						t.Fatalf("round %d: the host's change to %s (%q) was overwritten by %q", i, path, c, after[path])
					}
				}
				if len(rep.Held) > 0 {
					// Held deletions: accepted or rejected at random; either
					// way nothing the host changed is lost.
					if rng.Intn(2) == 0 {
						res, err := AcceptDeletions(p.h.Journal.Dir, p.h.Journal)
						t.Logf("round %d: accepted %+v %v", i, res, err)
					} else {
						n, err := RejectDeletions(p.h.Journal.Dir)
						t.Logf("round %d: rejected %d %v", i, n, err)
					}
				}
				rep = p.sync(nil)
				t.Logf("round %d: quiet %+v", i, rep)
				p.same()
				if t.Failed() {
					dump(t, p)
					t.FailNow()
				}
			}
		})
	}
}

func dump(t *testing.T, p *pair) {
	for _, side := range []string{p.host, p.sandbox} {
		var lines []string
		for path, c := range files(side) {
			lines = append(lines, path+"="+c)
		}
		sort.Strings(lines)
		t.Logf("%s:\n%s", side, strings.Join(lines, "\n"))
	}
}
