//go:build linux

package session

import (
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	sbxsync "github.com/sbx-sh/sbx/sync"
)

// BenchmarkTreeWalks times, interleaved in each iteration on one aged tree
// (SBX_BENCH_FILES files, 100k by default), the two walks a no-change
// `sbx exec --keep` without the host daemon makes: the host's scan of the
// code dir (Scanner.Scan against the last manifest, what Host.Begin runs)
// and the disk limit's sum of the workspace (diskUsage); against the
// baseline, a `find -printf '%s %T@'` stat walk of the same tree.
//
//	go test ./session -run '^$' -bench BenchmarkTreeWalks -benchtime 10x
func BenchmarkTreeWalks(b *testing.B) {
	files := 100000
	if v := os.Getenv("SBX_BENCH_FILES"); v != "" {
		files, _ = strconv.Atoi(v)
	}
	dir := b.TempDir()
	makeTree(b, dir, files)
	old := time.Now().Add(-time.Hour)
	// Aged past the racy window, so no scan hashes.
	if err := sbxWalkChtimes(dir, old); err != nil {
		b.Fatal(err)
	}
	prev, err := (&sbxsync.Scanner{}).Scan(dir, nil)
	if err != nil {
		b.Fatal(err)
	}
	var find, scan, du time.Duration
	b.ResetTimer()
	for b.Loop() {
		t0 := time.Now()
		cmd := exec.Command("find", ".", "-printf", "%s %T@\n")
		cmd.Dir = dir
		if err := cmd.Run(); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		m, err := (&sbxsync.Scanner{}).Scan(dir, prev)
		if err != nil || len(m) != len(prev) {
			b.Fatalf("scan: %d entries (%v), want %d", len(m), err, len(prev))
		}
		t2 := time.Now()
		if _, err := diskUsage(dir, 1<<50); err != nil {
			b.Fatal(err)
		}
		t3 := time.Now()
		find, scan, du = find+t1.Sub(t0), scan+t2.Sub(t1), du+t3.Sub(t2)
	}
	n := float64(b.N)
	b.ReportMetric(float64(find.Milliseconds())/n, "find-ms")
	b.ReportMetric(float64(scan.Milliseconds())/n, "scan-ms")
	b.ReportMetric(float64(du.Milliseconds())/n, "disk-ms")
	b.ReportMetric(float64(scan)/float64(find), "scan/find")
	b.ReportMetric(float64(du)/float64(find), "disk/find")
}

func sbxWalkChtimes(dir string, t time.Time) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		p := dir + "/" + e.Name()
		if e.IsDir() {
			if err := sbxWalkChtimes(p, t); err != nil {
				return err
			}
		}
		if err := os.Chtimes(p, t, t); err != nil {
			return err
		}
	}
	return nil
}
