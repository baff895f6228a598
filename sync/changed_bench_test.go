package sync

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"testing"
	"time"

	"github.com/sbx-sh/sbx/internal/testtree"
)

// BenchmarkApplyChanged measures the sandbox side of one push of 1,000
// changed small files into a synced 10,000-file tree (Helper.Apply, the
// push read from memory): the cost the "1,000 files changed" row of
// bench/matrix pays beyond the empty round trip.
//
// With watch=true both sides watch their trees, as sbx-mcp and the local
// worker do (the matrix's path); watch=false scans both in full each time.
//
//	go test ./sync -run '^$' -bench ApplyChanged -benchtime 5x
func BenchmarkApplyChanged(b *testing.B) {
	for _, watch := range []bool{false, true} {
		b.Run(fmt.Sprintf("watch=%v", watch), func(b *testing.B) {
			if watch && !watchSupported {
				b.Fatal("no watch on this platform")
			}
			defer func(was bool) { WatchHelper = was }(WatchHelper)
			WatchHelper = watch
			benchApplyChanged(b, watch)
		})
	}
}

func benchApplyChanged(b *testing.B, watch bool) {
	p := &pair{t: &testing.T{}, host: b.TempDir(), sandbox: b.TempDir(), hstate: b.TempDir()}
	testtree.Make(b, p.host, 10_000)
	p.open()
	if watch {
		p.h.Watch(nil)
	}
	first := func() {
		os.MkdirAll(p.hstate+"-host", 0o700)
	}
	first()
	var prof *os.File
	if f := os.Getenv("SBX_APPLY_PROFILE"); f != "" {
		prof, _ = os.Create(f)
	}
	var parts [5]time.Duration // host begin, pack, collect, host finish (Apply is the benchmark's time)
	roundTrip := func(timed bool) {
		t0 := time.Now()
		r, _, err := p.h.Begin()
		if err != nil {
			b.Fatal(err)
		}
		req := r.Request
		req.StateDir = p.hstate
		req.Dirs = append([]HelperDir(nil), req.Dirs...)
		req.Dirs[0].Path = p.sandbox
		helper, err := NewHelper(req)
		if err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		var push bytes.Buffer
		if err := r.WritePush(&push); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		if timed {
			b.StartTimer()
			if prof != nil {
				pprof.StartCPUProfile(prof)
			}
		}
		if err := helper.Apply(&push); err != nil {
			b.Fatal(err)
		}
		if timed {
			if prof != nil {
				pprof.StopCPUProfile()
			}
			b.StopTimer()
		}
		t3 := time.Now()
		var pull bytes.Buffer
		reply := helper.Collect(&pull)
		t4 := time.Now()
		if err := r.ReadPull(&pull); err != nil {
			b.Fatal(err)
		}
		if _, err := r.Finish(reply); err != nil {
			b.Fatal(err)
		}
		if timed {
			parts[0] += t1.Sub(t0)
			parts[1] += t2.Sub(t1)
			parts[2] += t4.Sub(t3)
			parts[3] += time.Since(t4)
		}
	}
	roundTrip(false)
	var files []string
	filepath.WalkDir(p.host, func(q string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() && len(files) < 1000 {
			files = append(files, q)
		}
		return nil
	})
	b.ResetTimer()
	b.StopTimer()
	for i := 0; i < b.N; i++ {
		for _, f := range files {
			os.WriteFile(f, []byte(fmt.Sprintf("package x // %d\n", i)), 0o644)
		}
		roundTrip(true)
		got, err := os.ReadFile(filepath.Join(p.sandbox, mustRel(b, p.host, files[999])))
		if err != nil || string(got) != fmt.Sprintf("package x // %d\n", i) {
			b.Fatalf("not applied: %q %v", got, err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/1000, "us/file")
	// The rest of the round trip, untimed above: the host's scan of the
	// 1,000 (Begin), packing the push, the helper's Collect, the host's
	// ReadPull and Finish.
	for i, name := range []string{"begin-us/file", "pack-us/file", "collect-us/file", "finish-us/file"} {
		b.ReportMetric(float64(parts[i].Microseconds())/float64(b.N)/1000, name)
	}
}

func mustRel(b *testing.B, base, p string) string {
	r, err := filepath.Rel(base, p)
	if err != nil {
		b.Fatal(err)
	}
	return r
}
