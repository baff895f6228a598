package cli

import (
	"math"
	"runtime/debug"
	"testing"
)

// TestOneShotGC: a one-shot command sets GOGC=400 and a 1 GiB soft limit,
// and leaves both alone when the environment names either.
func TestOneShotGC(t *testing.T) {
	prevPct := debug.SetGCPercent(100)
	prevLim := debug.SetMemoryLimit(math.MaxInt64)
	defer func() {
		debug.SetGCPercent(prevPct)
		debug.SetMemoryLimit(prevLim)
	}()
	for _, env := range []map[string]string{{"GOGC": "50"}, {"GOMEMLIMIT": "100MiB"}} {
		if oneShotGC(func(k string) string { return env[k] }) {
			t.Errorf("with %v in the environment, oneShotGC changed the collector", env)
		}
		if p := debug.SetGCPercent(100); p != 100 {
			t.Errorf("with %v: GC percent %d, want it left at 100", env, p)
		}
		if l := debug.SetMemoryLimit(-1); l != math.MaxInt64 {
			t.Errorf("with %v: memory limit %d, want it left unset", env, l)
		}
	}
	if !oneShotGC(func(string) string { return "" }) {
		t.Fatal("without GOGC or GOMEMLIMIT, oneShotGC did nothing")
	}
	if p := debug.SetGCPercent(100); p != oneShotGCPercent {
		t.Errorf("GC percent %d, want %d", p, oneShotGCPercent)
	}
	if l := debug.SetMemoryLimit(-1); l != oneShotMemLimit {
		t.Errorf("memory limit %d, want %d", l, oneShotMemLimit)
	}
}
