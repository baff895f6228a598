package sync

import (
	"path/filepath"
	"testing"
)

// TestNoChangePushStartsNoApplyWorkers: the push of a round trip with
// nothing to apply (every warm command's) starts no apply workers (they
// were four goroutines per code dir per round trip, each a wake-up of
// another thread in the local worker); a push with a small file still goes
// through them and lands.
func TestNoChangePushStartsNoApplyWorkers(t *testing.T) {
	p := newPair(t)
	put(t, filepath.Join(p.host, "a.txt"), "a\n")
	p.sync(nil)
	before := parWorkersStarted.Load()
	for range 3 {
		p.sync(nil)
	}
	if n := parWorkersStarted.Load() - before; n != 0 {
		t.Fatalf("three no-change round trips started %d apply workers, want none", n)
	}
	put(t, filepath.Join(p.host, "b.txt"), "b\n")
	p.sync(nil)
	if n := parWorkersStarted.Load() - before; n != applyParWorkers {
		t.Fatalf("a push of one small file started %d apply workers, want %d", n, applyParWorkers)
	}
	if got := read(t, filepath.Join(p.sandbox, "b.txt")); got != "b\n" {
		t.Fatalf("b.txt in the sandbox: %q", got)
	}
	p.same()
}
