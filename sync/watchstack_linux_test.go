package sync

import (
	"runtime"
	gosync "sync"
	"testing"
)

// TestWatchTakeKeepsStacksSmall: taking a watch's events (each round trip
// does, in sbx-mcp on a new goroutine for each MCP call) does not grow the
// goroutine's stack past 64 KiB: the queue's 64 KiB read buffer was a local
// array, which grew every such goroutine's stack to 128 KiB first.
func TestWatchTakeKeepsStacksSmall(t *testing.T) {
	n, err := newInotify(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer n.close()
	const g = 32
	var ready, hold gosync.WaitGroup
	ready.Add(g)
	hold.Add(1)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range g {
		go func() {
			if _, broken := n.take(); broken != "" {
				t.Errorf("take: %s", broken)
			}
			if _, broken := n.pending(); broken {
				t.Error("pending: broken")
			}
			ready.Done()
			hold.Wait() // alive, with its stack, until measured
		}()
	}
	ready.Wait()
	runtime.ReadMemStats(&after)
	hold.Done()
	if grew := int64(after.StackInuse) - int64(before.StackInuse); grew > g*64<<10 {
		t.Fatalf("%d goroutines that took a watch's events hold %d KiB more of stack, %d KiB each: over 64 KiB each", g, grew>>10, grew/g>>10)
	}
}
