package session

import (
	"context"
	"fmt"
	"testing"

	"github.com/sbx-sh/sbx/internal/testtree"
	"github.com/sbx-sh/sbx/local"
)

// BenchmarkRoundTrip measures a full `true` round trip on the local backend
// (sync in, run, sync out) with code dirs of 0, 10k and 100k files, on a warm
// session; x-empty is the ratio to the empty code dir.
func BenchmarkRoundTrip(b *testing.B) {
	var empty float64
	for _, n := range []int{0, 10_000, 100_000} {
		b.Run(fmt.Sprintf("files=%d", n), func(b *testing.B) {
			code := tempDir(b)
			if n > 0 {
				code = testtree.Cached(b, n)
			}
			mgr := NewManager(tempDir(b), &local.Provider{Version: "bench"}, nil)
			s, err := mgr.Open(context.Background(), "bench", Params{CodeDirs: []string{code}})
			if err != nil {
				b.Fatal(err)
			}
			// Releasing removes the sandbox's copy of the tree (seconds at
			// 100k files): outside the timed part.
			defer func() { b.StopTimer(); s.Release(context.Background()) }()
			run := Run{Command: "true"}
			for i := 0; i < 2; i++ { // claim, push everything, settle the racy window
				if _, err := s.Exec(context.Background(), run); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := s.Exec(context.Background(), run); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			per := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
			if n == 0 {
				empty = per
			} else if empty > 0 {
				b.ReportMetric(per/empty, "x-empty")
			}
		})
	}
}
