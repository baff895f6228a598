//go:build linux

package local

import (
	"testing"
	"time"
)

// BenchmarkKernelLayers measures what the syscall filter and Landlock cost a
// command, end to end through `sbx exec`: the same commands, in one run,
// through a build with the layers and one without (tag sbx_nokernellayers),
// alternating so that drift hits both. "fresh" starts and releases a
// sandbox per command (the worker installs the layers at its start); the
// others run in a kept, warm sandbox.
func BenchmarkKernelLayers(b *testing.B) {
	on, _ := kernelTools(b)
	off, err := buildSbx(toolsDir, "sbx-nolayers", "-tags", "sbx_nokernellayers")
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct{ name, script string }{
		{"warm/true", "true"},
		{"warm/200-execs", "for i in $(seq 200); do /bin/true; done"},
		{"warm/find-usr", "find /usr -maxdepth 4 >/dev/null 2>&1; true"},
		{"fresh/true", ""},
	} {
		b.Run(bc.name, func(b *testing.B) {
			worlds := []*sbxWorld{newSbxWorld(b, on), newSbxWorld(b, off)}
			args := func() []string {
				if bc.script == "" {
					return []string{"exec", "--", "true"}
				}
				return []string{"exec", "--keep", "--session", "bench", "--", bc.script}
			}
			for _, w := range worlds { // warm up: claim, first sync
				if out, code := w.run(b, args()...); code != 0 {
					b.Fatalf("exit %d: %s", code, out)
				}
			}
			var spent [2]time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				for j, w := range worlds {
					start := time.Now()
					if out, code := w.run(b, args()...); code != 0 {
						b.Fatalf("exit %d: %s", code, out)
					}
					spent[j] += time.Since(start)
				}
			}
			b.StopTimer()
			onMS := float64(spent[0].Microseconds()) / 1000 / float64(b.N)
			offMS := float64(spent[1].Microseconds()) / 1000 / float64(b.N)
			b.ReportMetric(onMS, "layers-ms/op")
			b.ReportMetric(offMS, "none-ms/op")
			b.ReportMetric(onMS-offMS, "cost-ms/op")
			b.ReportMetric(onMS/offMS, "ratio")
		})
	}
}
