package inpod

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sbx-sh/sbx/internal/testenv"
)

// TestBelowParentsFirst: the kill order lists each process after its
// parent, nothing outside pid's tree, and not pid itself.
func TestBelowParentsFirst(t *testing.T) {
	parent := map[int]int{10: 1, 20: 10, 30: 20, 31: 20, 40: 30, 11: 1, 50: 11, 21: 10}
	got := below(parent, 10)
	if want := []int{20, 21, 30, 31, 40}; !slices.Equal(got, want) {
		t.Fatalf("below(10) = %v, want %v", got, want)
	}
	at := map[int]int{}
	for i, p := range got {
		at[p] = i
	}
	for p, i := range at {
		if q, ok := at[parent[p]]; ok && q > i {
			t.Fatalf("%d listed before its parent %d: %v", p, parent[p], got)
		}
	}
}

// TestKillTreeRunsNothingMore: after a tree is killed, no shell of it ran
// the command after the one that was running (`sleep; echo not-reached`):
// with a child killed before its shell, the shell went on to its next
// command before its own kill came (TestTimeoutKillsTree under gVisor).
func TestKillTreeRunsNothingMore(t *testing.T) {
	dir := t.TempDir()
	mark := filepath.Join(dir, "not-reached")
	// Forty subshells, each in a sleep; all of them running before the kill.
	cmd := exec.Command("sh", "-c", `for i in $(seq 40); do (sleep 300; echo "$i" >> "$1") & done; wait`, "sh", mark)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	top := os.Getpid()
	if !testenv.WaitEvery(20*time.Second, 20*time.Millisecond, func() bool {
		n := 0
		for _, p := range descendants(top) {
			if b, err := os.ReadFile("/proc/" + itoa(p) + "/cmdline"); err == nil && strings.HasPrefix(string(b), "sleep\x00300") {
				n++
			}
		}
		return n == 40
	}) {
		t.Fatal("the 40 sleeps did not start")
	}
	killTree(cmd.Process.Pid)
	cmd.Wait()
	if b, err := os.ReadFile(mark); err == nil {
		t.Fatalf("shells ran their next command after the kill: %q", b)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
