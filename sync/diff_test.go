package sync

import (
	"io/fs"
	"math/rand"
	"path"
	"slices"
	"strings"
	"testing"
)

// Diff against a plain statement of its rule, over random pairs of
// manifests (same trees, added, removed and retyped paths): creations and
// modifications in lexical order, then the deletions that are not below a
// deleted path or below what is now a file, deepest first.
func TestDiffAgainstItsRule(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	names := []string{"a", "b", "c"}
	randPath := func() string {
		var parts []string
		for range 1 + rng.Intn(3) {
			parts = append(parts, names[rng.Intn(len(names))])
		}
		return strings.Join(parts, "/")
	}
	randEntry := func() Entry {
		switch rng.Intn(3) {
		case 0:
			return Entry{Mode: fs.ModeDir | 0o755}
		case 1:
			return Entry{Mode: 0o644, Size: int64(rng.Intn(2)), MTime: int64(rng.Intn(2))}
		}
		return Entry{Mode: fs.ModeSymlink | 0o777, Link: names[rng.Intn(2)]}
	}
	for iter := range 20000 {
		old, cur := Manifest{}, Manifest{}
		for range rng.Intn(8) {
			old[randPath()] = randEntry()
		}
		switch rng.Intn(3) {
		case 0: // the same paths, some entries changed
			for p, e := range old {
				if rng.Intn(3) == 0 {
					e = randEntry()
				}
				cur[p] = e
			}
		default:
			for p, e := range old {
				if rng.Intn(2) == 0 {
					cur[p] = e
				}
			}
			for range rng.Intn(4) {
				cur[randPath()] = randEntry()
			}
		}
		var wantPuts, wantDels []string
		for p, e := range cur {
			if o, ok := old[p]; !ok || !o.Same(e) {
				wantPuts = append(wantPuts, p)
			}
		}
		gone := func(p string) bool { _, inOld := old[p]; _, inCur := cur[p]; return inOld && !inCur }
		for p := range old {
			parent := path.Dir(p)
			pe, parentInCur := cur[parent]
			if gone(p) && !gone(parent) && !(parentInCur && !pe.Mode.IsDir()) {
				wantDels = append(wantDels, p)
			}
		}
		slices.Sort(wantPuts)
		slices.Sort(wantDels)
		slices.Reverse(wantDels)
		var gotPuts, gotDels []string
		for _, c := range Diff(old, cur) {
			if c.Deleted {
				gotDels = append(gotDels, c.Path)
				if c.Entry != old[c.Path] {
					t.Fatalf("iteration %d: deletion of %s carries %+v, want the old entry", iter, c.Path, c.Entry)
				}
			} else {
				if len(gotDels) > 0 {
					t.Fatalf("iteration %d: a put after the deletions", iter)
				}
				gotPuts = append(gotPuts, c.Path)
				if c.Entry != cur[c.Path] {
					t.Fatalf("iteration %d: put of %s carries %+v, want the new entry", iter, c.Path, c.Entry)
				}
			}
		}
		if !slices.Equal(gotPuts, wantPuts) || !slices.Equal(gotDels, wantDels) {
			t.Fatalf("iteration %d: old %v cur %v:\nputs %q want %q\ndeletions %q want %q", iter, old, cur, gotPuts, wantPuts, gotDels, wantDels)
		}
	}
}
