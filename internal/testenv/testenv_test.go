package testenv

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestWaitFor(t *testing.T) {
	var n atomic.Int32
	if !WaitFor(10*time.Second, func() bool { return n.Add(1) >= 3 }) {
		t.Fatal("a condition that comes true: WaitFor said it did not")
	}
	start := time.Now()
	if WaitFor(50*time.Millisecond, func() bool { return false }) {
		t.Fatal("a condition that never holds: WaitFor said it held")
	}
	if d := time.Since(start); d < 50*time.Millisecond {
		t.Fatalf("WaitFor gave up after %s, before its deadline", d)
	}
}

func TestHostProcsFindsThisTest(t *testing.T) {
	me := "/proc/" + strconv.Itoa(os.Getpid()) + "/cmdline: "
	found := HostProcs(filepath.Base(os.Args[0]))
	for _, p := range found {
		if strings.HasPrefix(p, me) {
			return
		}
	}
	t.Fatalf("HostProcs(%q) = %q: this process is missing", filepath.Base(os.Args[0]), found)
}

func TestCancelOnAcrossWrites(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := &CancelOn{Word: "started", Cancel: cancel}
	w.Write([]byte("sta"))
	if ctx.Err() != nil {
		t.Fatal("cancelled before the word was complete")
	}
	w.Write([]byte("rted\n"))
	if ctx.Err() == nil {
		t.Fatal("not cancelled once the word, split over two writes, was complete")
	}
}

func TestBuildSaysWhy(t *testing.T) {
	err := Build(filepath.Join(t.TempDir(), "x"), "github.com/sbx-sh/sbx/no/such/package")
	if err == nil || !strings.Contains(err.Error(), "no/such/package") {
		t.Fatalf("building a missing package: %v", err)
	}
	out := filepath.Join(t.TempDir(), "sbx-inpod")
	if err := BuildStatic(out, "github.com/sbx-sh/sbx/cmd/sbx-inpod"); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(out); err != nil || fi.Mode()&0o111 == 0 {
		t.Fatalf("the built binary: %v %v", fi, err)
	}
}
