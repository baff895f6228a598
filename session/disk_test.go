package session

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	sbxsync "github.com/sbx-sh/sbx/sync"
)

func makeTree(tb testing.TB, dir string, files int) {
	tb.Helper()
	for i := range files {
		d := filepath.Join(dir, fmt.Sprintf("d%03d", i%100), fmt.Sprintf("e%02d", i/100%10))
		if err := os.MkdirAll(d, 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, fmt.Sprintf("f%d", i)), []byte("content\n"), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
}

// diskUsage counts what the host will write: a hard-linked file once per
// name, a sparse file at its full length; and it stops early.
func TestDiskUsage(t *testing.T) {
	dir := t.TempDir()
	big := make([]byte, 1<<20)
	os.WriteFile(filepath.Join(dir, "a"), big, 0o644)
	os.Link(filepath.Join(dir, "a"), filepath.Join(dir, "b"))
	os.Mkdir(filepath.Join(dir, "s"), 0o755)
	f, _ := os.Create(filepath.Join(dir, "s", "sparse"))
	f.Truncate(1 << 30)
	f.Close()
	n, err := diskUsage(dir, 1<<40)
	if want := int64(1<<30 + 2<<20); err != nil || n < want || n > want+64<<10 {
		t.Fatalf("usage %d (%v): want %d, the 1 MiB file once per name and the sparse file at its length", n, err, want)
	}
	if n, err := diskUsage(dir, 1000); err != nil || n <= 1000 || n > 2<<20 {
		t.Fatalf("early stop: %d %v", n, err)
	}
	for _, c := range []struct {
		n    int64
		want string
	}{{512, "512"}, {1 << 20, "1MiB"}, {3 << 30, "3GiB"}, {1<<30 + 1, "1073741825"}, {20 << 30, "20GiB"}} {
		if got := sizeText(c.n); got != c.want {
			t.Errorf("sizeText(%d) = %q, want %q", c.n, got, c.want)
		}
	}
}

// BenchmarkWorkspaceCheck is the disk limit's check after each command, on
// a workspace of 10k files, against the host's own scan of the same tree
// (which each round trip does anyway) as the baseline.
func BenchmarkWorkspaceCheck(b *testing.B) {
	dir := b.TempDir()
	makeTree(b, dir, 10000)
	b.Run("host-scan", func(b *testing.B) {
		m := sbxsync.Manifest{}
		for b.Loop() {
			var err error
			if m, err = (&sbxsync.Scanner{}).Scan(dir, m); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("disk-usage", func(b *testing.B) {
		for b.Loop() {
			if _, err := diskUsage(dir, 1<<40); err != nil {
				b.Fatal(err)
			}
		}
	})
}
