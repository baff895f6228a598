//go:build linux

package local

import (
	"os"
	"path/filepath"
	"testing"
)

// A loss is said to be the OOM killer's only when its count rose since the
// box last looked: an OOM kill of an earlier command does not make a later,
// unrelated loss one.
func TestLostToOOMCountsOnlyNewKills(t *testing.T) {
	v2, v1 := t.TempDir(), t.TempDir()
	events := func(n string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(v2, "memory.events"), []byte("low 0\nhigh 0\nmax 12\noom 3\noom_kill "+n+"\noom_group_kill 0\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	control := func(n string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(v1, "memory.oom_control"), []byte("oom_kill_disable 0\nunder_oom 0\noom_kill "+n+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	events("2")
	control("1")
	b := &box{st: state{Cgroups: []string{v2, v1, filepath.Join(v1, "missing")}}}
	if got := oomKills(b.st.Cgroups); got != 3 {
		t.Fatalf("oomKills = %d, want 3 (2 in memory.events, 1 in memory.oom_control)", got)
	}
	b.oomSeen.Store(oomKills(b.st.Cgroups))
	if b.lostToOOM() {
		t.Fatal("a loss was blamed on OOM kills that came before the box was opened")
	}
	events("3")
	if !b.lostToOOM() {
		t.Fatal("a new OOM kill in memory.events was not seen")
	}
	if b.lostToOOM() {
		t.Fatal("the same OOM kill was blamed for a second loss")
	}
	control("2")
	if !b.lostToOOM() {
		t.Fatal("a new OOM kill in memory.oom_control was not seen")
	}
	// "oom" (the limit was hit) is not "oom_kill" (a process was ended).
	os.WriteFile(filepath.Join(v2, "memory.events"), []byte("oom 9\noom_kill 3\n"), 0o600)
	if b.lostToOOM() {
		t.Fatal("memory.events' oom line was read as kills")
	}
}
