package sync

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkPullBackJournal measures one round trip in which the sandbox
// overwrites 100 files and deletes 10 (recreated on the host between rounds),
// without a journal (the baseline) and with one (hard links).
func BenchmarkPullBackJournal(b *testing.B) {
	for _, withJournal := range []bool{false, true} {
		name := "no-journal"
		if withJournal {
			name = "journal"
		}
		b.Run(name, func(b *testing.B) {
			t := &testing.T{}
			p := &pair{t: t, host: b.TempDir(), sandbox: b.TempDir(), hstate: b.TempDir()}
			p.open()
			if !withJournal {
				p.h.Journal = nil
			}
			for i := 0; i < 110; i++ {
				os.WriteFile(filepath.Join(p.host, fmt.Sprintf("f%03d", i)), []byte("host"), 0o644)
			}
			p.sync(nil)
			b.ResetTimer()
			for n := 0; n < b.N; n++ {
				p.sync(func() {
					for i := 0; i < 100; i++ {
						os.WriteFile(filepath.Join(p.sandbox, fmt.Sprintf("f%03d", i)), []byte(fmt.Sprint("sandbox ", n)), 0o644)
					}
					for i := 100; i < 110; i++ {
						os.Remove(filepath.Join(p.sandbox, fmt.Sprintf("f%03d", i)))
					}
				})
				b.StopTimer()
				for i := 100; i < 110; i++ {
					os.WriteFile(filepath.Join(p.host, fmt.Sprintf("f%03d", i)), []byte("host"), 0o644)
				}
				p.sync(nil)
				b.StartTimer()
			}
		})
	}
}
