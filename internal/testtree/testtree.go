// Package testtree makes the generated source trees that sbx's benchmarks
// sync: source-like files of 1-8 KiB (60%) and a node_modules-like subtree of
// many small packages (40%). Trees are deterministic and cached in the temp
// dir between runs.
package testtree

import (
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"testing"
)

// Make writes a tree of n files under root.
func Make(tb testing.TB, root string, n int) {
	tb.Helper()
	rng := rand.New(rand.NewSource(1))
	buf := make([]byte, 8<<10)
	rng.Read(buf)
	for i := 0; i < n; i++ {
		var p string
		if i%5 < 3 {
			p = filepath.Join(root, "src", fmt.Sprintf("pkg%03d", i/400), fmt.Sprintf("sub%02d", (i/20)%20), fmt.Sprintf("file%05d.go", i))
		} else {
			p = filepath.Join(root, "node_modules", fmt.Sprintf("dep%04d", i/15), "lib", fmt.Sprintf("m%05d.js", i))
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(p, buf[:1024+rng.Intn(7<<10)], 0o644); err != nil {
			tb.Fatal(err)
		}
	}
}

// Cached returns a tree of n files in the temp dir, made on first use.
func Cached(tb testing.TB, n int) string {
	tb.Helper()
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("sbx-bench-tree-%d", n))
	if _, err := os.Stat(filepath.Join(dir, ".complete")); err != nil {
		os.RemoveAll(dir)
		Make(tb, dir, n)
		if err := os.WriteFile(filepath.Join(dir, ".complete"), nil, 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	return dir
}

// RegularFiles counts the regular files under root (a tree that came
// back, or was copied); what cannot be read is not counted.
func RegularFiles(root string) int {
	n := 0
	filepath.WalkDir(root, func(_ string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			n++
		}
		return nil
	})
	return n
}
