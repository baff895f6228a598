package sync

import (
	"fmt"
	"testing"
)

// BenchmarkHostSaveChanged: the host's save after a round that changed
// 1,000 of a 100k-entry manifest, as a record of the log (what a watching
// process writes now) and whole (what every large save wrote before).
//
//	go test ./sync -run '^$' -bench HostSaveChanged -benchtime 20x
func BenchmarkHostSaveChanged(b *testing.B) {
	for _, whole := range []bool{false, true} {
		b.Run(fmt.Sprint("whole=", whole), func(b *testing.B) {
			state := b.TempDir()
			dirs := []HostDir{{Path: b.TempDir()}}
			h, err := OpenHost(state, dirs)
			if err != nil {
				b.Fatal(err)
			}
			h.Watch(nil)
			defer h.Close()
			m := h.st.Manifests[0]
			for i := range 100_000 {
				m[fmt.Sprintf("src/pkg%03d/dir%02d/file%05d.go", i%500, i%17, i)] = Entry{Mode: 0o644, Size: int64(i), MTime: 1e18 + int64(i), CTime: 1e18 + int64(i), Ino: uint64(i), Hash: fmt.Sprintf("%032x", i), Verified: true}
			}
			h.replaced(0)
			if err := h.save(true); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for n := range b.N {
				b.StopTimer()
				paths := make([]string, 0, 1000)
				for i := range 1000 {
					p := fmt.Sprintf("src/pkg%03d/dir%02d/file%05d.go", i%500, i%17, i)
					e := m[p]
					e.Size, e.MTime = int64(n), e.MTime+1
					m[p] = e
					paths = append(paths, p)
				}
				h.changing(0, paths...)
				if whole {
					h.log.saved = nil
				}
				b.StartTimer()
				if err := h.save(true); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkWholeDelta: what a process that does not watch (sbx exec
// without its daemon) adds to a round that changed one file of 100k: the
// whole comparison of its scan with the manifest it loaded.
//
//	go test ./sync -run '^$' -bench WholeDelta -benchtime 20x
func BenchmarkWholeDelta(b *testing.B) {
	old, cur := Manifest{}, Manifest{}
	for i := range 100_000 {
		p := fmt.Sprintf("src/pkg%03d/dir%02d/file%05d.go", i%500, i%17, i)
		e := Entry{Mode: 0o644, Size: int64(i), MTime: 1e18 + int64(i), Hash: fmt.Sprintf("%032x", i), Verified: true}
		old[p] = e
		if i == 7 {
			e.Size++
		}
		cur[p] = e
	}
	b.ResetTimer()
	for range b.N {
		if d := wholeDelta(old, cur); len(d.Put) != 1 {
			b.Fatalf("%d entries changed, want 1", len(d.Put))
		}
	}
}
