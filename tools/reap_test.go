package tools

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sbx-sh/sbx/local"
	"github.com/sbx-sh/sbx/session"
)

func TestMain(m *testing.M) {
	local.Main()
	os.Exit(m.Run())
}

// A call that arrives while the idle reaper is taking its session away
// never loses its sandbox mid-call: it either keeps the session (it held it
// first) or waits for the release and gets a fresh one. Deterministic: the
// reaper runs once with a clock past the idle time, and its hook lets the
// call in exactly between the reaper's choice and the release.
func TestReaperAndArrivingCall(t *testing.T) {
	code, err := os.MkdirTemp("", "sbxr")
	if err != nil {
		t.Fatal(err)
	}
	state, err := os.MkdirTemp("", "sbxr")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(code); os.RemoveAll(state) })
	ttl := time.Hour
	p := NewSessions(Config{
		Manager:     session.NewManager(state, &local.Provider{Version: "test"}, nil),
		Params:      session.Params{CodeDirs: []string{code}, IdleTTL: ttl},
		DefaultName: "reap",
	})
	t.Cleanup(func() { p.Close(context.Background()) })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	exec := func(c *call, command string) (string, error) {
		var out strings.Builder
		_, err := c.sess.Exec(ctx, session.Run{Command: command, Stdout: &out, Stderr: &out})
		return out.String(), err
	}
	c, err := p.acquire(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec(c, "echo one > a"); err != nil {
		t.Fatalf("first call: %v %s", err, out)
	}
	c.done()

	type outcome struct {
		out string
		err error
	}
	acquired := make(chan *call, 1)
	waiting := make(chan struct{}, 1)
	proceed := make(chan struct{})
	result := make(chan outcome, 1)
	p.holdWaits = func(*entry) { waiting <- struct{}{} }
	p.reapPicked = func(*entry) {
		go func() {
			c, err := p.acquire(ctx, nil)
			if err != nil {
				result <- outcome{"", err}
				acquired <- nil
				return
			}
			acquired <- c
			<-proceed
			out, err := exec(c, "cat a; echo two > b")
			c.done()
			result <- outcome{out, err}
		}()
		// Let the reaper go on once the call has its session or waits.
		select {
		case <-waiting:
		case c := <-acquired:
			acquired <- c
		case <-ctx.Done():
		}
	}
	p.reapOnce(time.Now().Add(2*ttl), ttl)
	close(proceed)
	r := <-result
	if r.err != nil || r.out != "one\n" {
		t.Fatalf("the call that arrived during the reap: %v, output %q", r.err, r.out)
	}
	if b, _ := os.ReadFile(filepath.Join(code, "b")); string(b) != "two\n" {
		t.Fatalf("its change did not come back: %q", b)
	}
	c2 := <-acquired
	if c2 == nil || !strings.Contains(strings.Join(c2.notes, " "), "released after 1h0m0s without use") {
		t.Fatalf("the call was not told its sandbox is new: %v", c2)
	}

	// A session in use is never reaped.
	c3, err := p.acquire(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	p.reapPicked = func(*entry) { t.Error("the reaper picked a session in use") }
	p.reapOnce(time.Now().Add(2*ttl), ttl)
	if out, err := exec(c3, "cat b"); err != nil || out != "two\n" {
		t.Fatalf("call during a reap: %v %q", err, out)
	}
	c3.done()
}
