package sync

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	"github.com/sbx-sh/sbx/internal/testtree"
	"testing"
)

func benchTree(b *testing.B, n int) string { return testtree.Cached(b, n) }

// bareWalk is the floor of a no-change check: a parallel walk that only
// lists and lstats every entry, with the same primitive the scanner uses
// (readDir: an lstat relative to the open directory), so that the ratio is
// the sync's own cost above the walk.
func bareWalk(root string) int {
	var (
		wg  sync.WaitGroup
		mu  sync.Mutex
		n   int
		sem = make(chan struct{}, 8)
	)
	var walk func(dir string)
	walk = func(dir string) {
		defer wg.Done()
		sem <- struct{}{}
		ents, err := readDir(dir)
		<-sem
		if err != nil {
			return
		}
		mu.Lock()
		n += len(ents)
		mu.Unlock()
		for _, e := range ents {
			if e.e.Mode.IsDir() {
				wg.Add(1)
				go walk(filepath.Join(dir, e.name))
			}
		}
	}
	wg.Add(1)
	walk(root)
	wg.Wait()
	return n
}

// BenchmarkSync reports, for trees of 10k and 100k files, side by side:
//
//	walk        a bare parallel lstat walk (the floor)
//	nochange    the host side of a round trip with nothing changed (scan + diff)
//	onefile     the same with one file changed (scan + diff + its patch)
//	push        the initial push: patch the whole tree and apply it into an
//	            empty directory, against tar c | tar x of the same tree, the
//	            two run alternately in one loop (tar-ms, push-ms); and
//	            placed as a new local sandbox's first push is (Round.Place,
//	            then the helper's scan of the workspace: place-ms)
//
// x-walk is the ratio to the walk; x-tar the push's time over tar's.
func BenchmarkSync(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("files=%d", n), func(b *testing.B) {
			root := benchTree(b, n)
			var walk float64
			per := func(b *testing.B) float64 { return float64(b.Elapsed().Nanoseconds()) / float64(b.N) }
			b.Run("walk", func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					bareWalk(root)
				}
				walk = per(b)
			})
			state := b.TempDir()
			h, err := OpenHost(state, []HostDir{{Path: root}})
			if err != nil {
				b.Fatal(err)
			}
			// Establish the synced state: the manifest the host keeps.
			r, _, _ := h.Begin()
			r.Finish(HelperReply{Seq: r.Request.Seq})
			b.Run("nochange", func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					r, _, err := h.Begin()
					if err != nil || r.Changed() {
						b.Fatalf("changed=%v err=%v", r != nil && r.Changed(), err)
					}
					r.Finish(HelperReply{Seq: r.Request.Seq})
				}
				b.ReportMetric(per(b)/walk, "x-walk")
			})
			target := filepath.Join(root, "src", "pkg000", "sub00", "file00000.go")
			b.Run("onefile", func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					os.WriteFile(target, []byte(fmt.Sprintf("package x // %d\n", i)), 0o644)
					r, _, err := h.Begin()
					if err != nil || !r.Changed() {
						b.Fatal("change not seen", err)
					}
					if err := r.WritePush(io.Discard); err != nil {
						b.Fatal(err)
					}
					r.Finish(HelperReply{Seq: r.Request.Seq})
				}
				b.ReportMetric(per(b)/walk, "x-walk")
			})
			// tar and the push run alternately, each into its own new
			// directory, and every directory is kept until the end: ext4 makes
			// a file creation pay for each inode deleted in the last minute
			// (recently_deleted), so deleting one side's trees before the other
			// side runs would bias the ratio by the order of the runs.
			b.Run("push", func(b *testing.B) {
				keep := b.TempDir()
				var tarNS, pushNS, placeNS int64
				for i := 0; i < b.N; i++ {
					tarRun := func() {
						dst, _ := os.MkdirTemp(keep, "tar")
						t0 := time.Now()
						cmd := exec.Command("sh", "-c", `tar -C "$1" -cf - . | tar -C "$2" -xf -`, "sh", root, dst)
						if out, err := cmd.CombinedOutput(); err != nil {
							b.Fatalf("%v %s", err, out)
						}
						tarNS += time.Since(t0).Nanoseconds()
					}
					pushRun := func() {
						dst, _ := os.MkdirTemp(keep, "push")
						state, _ := os.MkdirTemp(keep, "state")
						hstate, _ := os.MkdirTemp(keep, "hstate")
						t0 := time.Now()
						hs, _ := OpenHost(hstate, []HostDir{{Path: root}})
						r, _, err := hs.Begin()
						if err != nil {
							b.Fatal(err)
						}
						req := r.Request
						req.StateDir, req.Dirs = state, []HelperDir{{Path: dst, Reset: true}}
						helper, err := NewHelper(req)
						if err != nil {
							b.Fatal(err)
						}
						pr, pw := io.Pipe()
						go func() { pw.CloseWithError(r.WritePush(pw)) }()
						if err := helper.Apply(pr); err != nil {
							b.Fatal(err)
						}
						pushNS += time.Since(t0).Nanoseconds()
					}
					// The first push of a new local sandbox: the host
					// places the tree into the workspace, the helper scans
					// it for its manifest (Round.Place).
					placeRun := func() {
						dst, _ := os.MkdirTemp(keep, "place")
						state, _ := os.MkdirTemp(keep, "state")
						hstate, _ := os.MkdirTemp(keep, "hstate")
						t0 := time.Now()
						hs, _ := OpenHost(hstate, []HostDir{{Path: root}})
						r, _, err := hs.Begin()
						if err != nil {
							b.Fatal(err)
						}
						if err := r.Place(0, dst); err != nil {
							b.Fatal(err)
						}
						req := r.Request
						req.StateDir = state
						req.Dirs = append([]HelperDir(nil), req.Dirs...)
						req.Dirs[0].Path = dst
						helper, err := NewHelper(req)
						if err != nil {
							b.Fatal(err)
						}
						pr, pw := io.Pipe()
						go func() { pw.CloseWithError(r.WritePush(pw)) }()
						if err := helper.Apply(pr); err != nil {
							b.Fatal(err)
						}
						placeNS += time.Since(t0).Nanoseconds()
					}
					runs := []func(){tarRun, pushRun, placeRun}
					for k := range runs {
						runs[(i+k)%len(runs)]()
					}
				}
				b.ReportMetric(float64(tarNS)/float64(b.N)/1e6, "tar-ms")
				b.ReportMetric(float64(pushNS)/float64(b.N)/1e6, "push-ms")
				b.ReportMetric(float64(pushNS)/float64(tarNS), "x-tar")
				b.ReportMetric(float64(placeNS)/float64(b.N)/1e6, "place-ms")
				b.ReportMetric(float64(placeNS)/float64(tarNS), "place-x-tar")
			})
		})
	}
}
