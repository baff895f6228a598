package local

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// children lists the processes whose parent is pid.
func children(pid int) []int {
	var kids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p))
		if err != nil {
			continue
		}
		s := string(raw)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			kids = append(kids, p)
		}
	}
	slices.Sort(kids)
	return kids
}

// workersSettle waits until the init has want workers and returns them.
func workersSettle(t *testing.T, init, want int) []int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		kids := children(init)
		if len(kids) == want {
			return kids
		}
		if time.Now().After(deadline) {
			t.Fatalf("the init (pid %d) has %d workers %v, want %d", init, len(kids), kids, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// An idle sandbox keeps one worker (each is a Go process of its own:
// memory), sequential commands reuse it instead of starting one each, a
// trim leaves the init alone, and the next command starts a worker on
// demand and works as before.
func TestIdleWorkerPool(t *testing.T) {
	sb, work := claim(t, nil)
	b := sb.(*box)
	t.Cleanup(func() {
		if t.Failed() {
			log, _ := os.ReadFile(filepath.Join(b.dir, "init.log"))
			t.Logf("init.log: %s", log)
		}
	})
	init := b.st.Pid
	if out, res := run(t, sb, "echo one"); out != "one\n" || res.ExitCode != 0 {
		t.Fatalf("first command: %q %+v", out, res)
	}
	first := workersSettle(t, init, 1)
	for i := range 5 {
		if out, _ := run(t, sb, fmt.Sprintf("echo %d", i)); out != fmt.Sprintf("%d\n", i) {
			t.Fatalf("command %d: %q", i, out)
		}
		if got := workersSettle(t, init, 1); !slices.Equal(got, first) {
			t.Fatalf("command %d ran in a new worker %v, not the idle one %v", i, got, first)
		}
	}

	// Two commands at once: the second starts a worker of its own; once
	// both end, one worker stays.
	var wg sync.WaitGroup
	outs := make([]string, 2)
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			outs[i], _ = run(t, sb, fmt.Sprintf("sleep 0.3; echo c%d", i))
		}()
	}
	wg.Wait()
	if outs[0] != "c0\n" || outs[1] != "c1\n" {
		t.Fatalf("concurrent commands: %q", outs)
	}
	workersSettle(t, init, 1)

	var r reply
	if err := b.call(context.Background(), request{Op: "trim"}, &r); err != nil || r.Trimmed != 1 {
		t.Fatalf("trim: %v, stopped %d workers, want 1", err, r.Trimmed)
	}
	workersSettle(t, init, 0)
	if out, res := run(t, sb, "echo after; cat /proc/self/status | grep -c ^Pid"); out != "after\n1\n" || res.ExitCode != 0 {
		t.Fatalf("command after the trim: %q %+v", out, res)
	}
	workersSettle(t, init, 1)
	// A trim while a command runs stops nothing: the command's worker is
	// busy, and the sandbox is in use.
	done := make(chan string)
	go func() { out, _ := run(t, sb, "touch started; sleep 0.5; echo long"); done <- out }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(work, "started")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the long command never started")
		}
		time.Sleep(5 * time.Millisecond)
	}
	var r2 reply
	if err := b.call(context.Background(), request{Op: "trim"}, &r2); err != nil || r2.Trimmed != 0 {
		t.Fatalf("trim during a command: %v, stopped %d workers", err, r2.Trimmed)
	}
	if out := <-done; out != "long\n" {
		t.Fatalf("a trim during a command broke it: %q", out)
	}
	workersSettle(t, init, 1)
}
