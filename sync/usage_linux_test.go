package sync

import (
	"fmt"
	"io/fs"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// duOracle is the workspace check's rule, by a plain walk.
func duOracle(root string) int64 {
	var total int64
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == root {
			return nil
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return nil
		}
		n := fi.Sys().(*syscall.Stat_t).Blocks * 512
		if fi.Mode().IsRegular() {
			n = max(n, fi.Size())
		}
		total += n
		return nil
	})
	return total
}

// TestUsageFollowsTheTree: after random operations (files written, grown,
// truncated, hard-linked, sparse; directories made, removed, renamed;
// parents swapped for links out of the tree and back), the count kept from
// events is what a full walk finds, and most counts used the events.
func TestUsageFollowsTheTree(t *testing.T) {
	for seed := int64(0); seed < usageSeeds; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { usageRun(t, seed) })
	}
}

// FuzzUsage is TestUsageFollowsTheTree with the fuzzer's seeds: the sequence
// of operations is the seed's, the oracle a plain walk.
func FuzzUsage(f *testing.F) {
	f.Add(int64(61))
	f.Fuzz(func(t *testing.T, seed int64) { usageRun(t, seed) })
}

func usageRun(t *testing.T, seed int64) {
	rng := rand.New(rand.NewSource(seed))
	root := t.TempDir()
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "big"), make([]byte, 1<<20), 0o644)
	u := NewUsage(root)
	defer u.Close()
	dirs := []string{"a", "a/b", "c", "c/d/e"}
	inc := 0
	for i := 0; i < 60; i++ {
		dir := filepath.Join(root, dirs[rng.Intn(len(dirs))])
		f := filepath.Join(dir, fmt.Sprintf("f%d", rng.Intn(3)))
		op := rng.Intn(10)
		switch op {
		case 0, 1:
			os.MkdirAll(dir, 0o755)
			os.WriteFile(f, make([]byte, rng.Intn(20000)), 0o644)
		case 2:
			os.Truncate(f, int64(rng.Intn(1<<22))) // sparse when grown
		case 3:
			os.Remove(f)
		case 4:
			os.RemoveAll(dir)
		case 5:
			// A second name, in the tree (a link from outside a
			// mount is EXDEV, as the sandbox's workspace is one).
			if real, err := filepath.EvalSymlinks(f); err == nil && strings.HasPrefix(real, root+"/") {
				os.Link(f, filepath.Join(root, fmt.Sprintf("link%d", rng.Intn(3))))
			}
		case 9:
			// Written through a descriptor after its name went:
			// the other name grows.
			if fh, err := os.OpenFile(f, os.O_WRONLY, 0); err == nil {
				os.Remove(f)
				fh.Write(make([]byte, 100000))
				fh.Close()
			}
		case 6:
			os.Rename(dir, filepath.Join(root, fmt.Sprintf("moved%d", rng.Intn(2))))
		case 7:
			// A parent swapped for a link out of the tree.
			os.RemoveAll(dir)
			os.MkdirAll(filepath.Dir(dir), 0o755)
			os.Symlink(outside, dir)
		case 8:
			os.Remove(dir) // the link (or an empty directory) goes
			os.MkdirAll(dir, 0o755)
		}
		if rng.Intn(2) == 0 {
			continue
		}
		watchingBefore := u.n != nil && u.cost != nil
		got, err := u.Total()
		if err != nil {
			t.Fatal(err)
		}
		if watchingBefore {
			inc++
		}
		if want := duOracle(root); got != want {
			t.Fatalf("step %d: the count is %d, a walk finds %d", i, got, want)
		}
	}
	if inc == 0 {
		t.Fatal("no count used the events")
	}
}

var usageSeeds = int64(100)

// TestUsageTempRename: a file written under a temporary name and renamed
// into place (how the sync's apply writes) is counted from its events, not
// taken for a write to an unlinked file (a full count).
func TestUsageTempRename(t *testing.T) {
	root := t.TempDir()
	put(t, filepath.Join(root, "d", "f"), "old")
	u := NewUsage(root)
	defer u.Close()
	if _, err := u.Total(); err != nil {
		t.Fatal(err)
	}
	n := u.n
	put(t, filepath.Join(root, "d", ".tmp"), string(make([]byte, 50000)))
	if err := os.Rename(filepath.Join(root, "d", ".tmp"), filepath.Join(root, "d", "f")); err != nil {
		t.Fatal(err)
	}
	got, err := u.Total()
	if err != nil {
		t.Fatal(err)
	}
	if u.n != n {
		t.Fatal("a temporary name renamed into place made a full count")
	}
	if want := duOracle(root); got != want {
		t.Fatalf("the count is %d, a walk finds %d", got, want)
	}
}
