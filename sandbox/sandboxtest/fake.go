package sandboxtest

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sbx-sh/sbx/sandbox"
)

// Fake is a backend with no processes and no file system, for unit tests of
// what drives a backend (the session engine, the MCP pool): a command is a
// Go func (Fake.Run), a test can hold one at its start and let it go
// (Block), and lose a sandbox on the spot (FakeSandbox.Lose), so a test of
// "claim on first use", "reap on idle" or "re-claim after the sandbox is
// gone" waits on channels and checks counts, never sleeps or kills.
//
// It keeps the parts of the contract that are about the contract rather
// than about processes (RunContract: exit codes, timeout and cancellation,
// Release, ErrLost and ErrUnreachable). Its sandbox changes no files: a
// round trip of the sync (Cmd.Sync) drains the push and answers with an
// empty pull, one empty patch a code dir.
type Fake struct {
	// Run runs one command in place of a process; nil: every command exits
	// 0 and prints nothing. It may block until ctx ends (the command's
	// timeout, a cancellation, a Release or a Lose), and then returns
	// ctx.Err(). Set before the first command; no lock.
	Run func(ctx context.Context, cmd *sandbox.Cmd) (sandbox.Result, error)

	mu       sync.Mutex
	claims   int
	attaches int
	boxes    []*FakeSandbox
	blocks   []*Gate
}

// Name is "fake".
func (f *Fake) Name() string { return "fake" }

// Claim hands out a new sandbox.
func (f *Fake) Claim(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.claims++
	s := &FakeSandbox{f: f, spec: spec, gone: make(chan struct{}), done: make(chan struct{})}
	f.boxes = append(f.boxes, s)
	return s, nil
}

// Attach finds the sandbox last claimed with spec.StateDir: ErrNotFound
// when there is none or it was released, a *StaleError when it was lost.
func (f *Fake) Attach(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.attaches++
	for i := len(f.boxes) - 1; i >= 0; i-- {
		s := f.boxes[i]
		if s.spec.StateDir != spec.StateDir {
			continue
		}
		s.mu.Lock()
		lost, released := s.lost, s.released
		s.mu.Unlock()
		switch {
		case released:
			return nil, sandbox.ErrNotFound
		case lost:
			return nil, &sandbox.StaleError{Name: spec.Name, Reason: "sandboxtest: the test lost it"}
		}
		return s, nil
	}
	return nil, sandbox.ErrNotFound
}

// Claims is how many times Claim was called.
func (f *Fake) Claims() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.claims
}

// Attaches is how many times Attach was called.
func (f *Fake) Attaches() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.attaches
}

// Sandboxes are the sandboxes claimed, in order.
func (f *Fake) Sandboxes() []*FakeSandbox {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*FakeSandbox(nil), f.boxes...)
}

// Gate holds a command at its start until Release.
type Gate struct {
	match    string
	started  chan struct{}
	release  chan struct{}
	once     sync.Once
	startOne sync.Once
}

// Block holds the next command whose argv, joined by spaces, contains
// match: it starts (Started is closed) and waits for Release, or for its
// context, its sandbox's Release or Lose.
func (f *Fake) Block(match string) *Gate {
	g := &Gate{match: match, started: make(chan struct{}), release: make(chan struct{})}
	f.mu.Lock()
	f.blocks = append(f.blocks, g)
	f.mu.Unlock()
	return g
}

// Started is closed once the held command has started.
func (g *Gate) Started() <-chan struct{} { return g.started }

// Release lets the held command go on.
func (g *Gate) Release() { g.once.Do(func() { close(g.release) }) }

// gate takes the first Block that matches argv.
func (f *Fake) gate(argv []string) *Gate {
	line := strings.Join(argv, " ")
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, g := range f.blocks {
		if strings.Contains(line, g.match) {
			f.blocks = append(f.blocks[:i], f.blocks[i+1:]...)
			return g
		}
	}
	return nil
}

// FakeSandbox is a sandbox of Fake.
type FakeSandbox struct {
	f    *Fake
	spec sandbox.Spec
	// gone is closed by the first Release or Lose: running commands end.
	gone chan struct{}
	// done is closed by the first Release.
	done chan struct{}

	mu       sync.Mutex
	execs    int
	commands [][]string
	requests [][]byte
	lost     bool
	released bool
}

// A command's state: running, then the first of its end and what ends it.
const (
	cmdRunning int32 = iota
	cmdFinished
	cmdTimedOut
	cmdGone
	cmdCancelled
)

// errGone is the cause of a command's context when its sandbox goes.
var errGone = errors.New("sandboxtest: the sandbox went away")

// Exec runs cmd through Fake.Run, after Block's gate when one matches.
func (s *FakeSandbox) Exec(ctx context.Context, cmd *sandbox.Cmd) (sandbox.Result, error) {
	s.mu.Lock()
	s.execs++
	lost, released := s.lost, s.released
	if len(cmd.Argv) > 0 {
		s.commands = append(s.commands, append([]string(nil), cmd.Argv...))
	}
	if cmd.Sync != nil {
		s.requests = append(s.requests, append([]byte(nil), cmd.Sync.Request...))
	}
	s.mu.Unlock()
	switch {
	case released:
		return sandbox.Result{}, fmt.Errorf("%w: sandboxtest: sandbox %s was released", sandbox.ErrLost, s.spec.Name)
	case lost:
		return sandbox.Result{}, fmt.Errorf("%w: sandboxtest: the test lost sandbox %s", sandbox.ErrUnreachable, s.spec.Name)
	case len(cmd.Argv) == 0:
		return sandbox.Result{}, errors.New("sandboxtest: empty argv")
	}
	var req struct {
		Seq  uint64            `json:"seq"`
		Dirs []json.RawMessage `json:"dirs"`
	}
	if cmd.Sync != nil {
		if err := json.Unmarshal(cmd.Sync.Request, &req); err != nil {
			return sandbox.Result{}, fmt.Errorf("sandboxtest: bad sync request: %w", err)
		}
		if _, err := io.Copy(io.Discard, cmd.Sync.Push); err != nil {
			return sandbox.Result{}, fmt.Errorf("sandboxtest: read the push: %w", err)
		}
	}

	// The command's context ends with its caller's, its timeout, or its
	// sandbox, whichever comes first and before the command's own end.
	run, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	var state atomic.Int32
	end := func(st int32, cause error) {
		if state.CompareAndSwap(cmdRunning, st) {
			cancel(cause)
		}
	}
	var timer <-chan time.Time
	if cmd.Timeout > 0 {
		t := time.NewTimer(cmd.Timeout)
		defer t.Stop()
		timer = t.C
	}
	go func() {
		select {
		case <-s.gone:
			end(cmdGone, errGone)
		case <-timer:
			end(cmdTimedOut, context.DeadlineExceeded)
		case <-ctx.Done():
			end(cmdCancelled, ctx.Err())
		case <-run.Done():
		}
	}()

	start := time.Now()
	var res sandbox.Result
	var err error
	if g := s.f.gate(cmd.Argv); g != nil {
		g.startOne.Do(func() { close(g.started) })
		select {
		case <-g.release:
		case <-run.Done():
			err = context.Cause(run)
		}
	}
	if err == nil && s.f.Run != nil {
		res, err = s.f.Run(run, cmd)
	}
	res.Duration = time.Since(start)
	state.CompareAndSwap(cmdRunning, cmdFinished)
	switch state.Load() {
	case cmdTimedOut:
		return sandbox.Result{ExitCode: sandbox.TimeoutExitCode, TimedOut: true, Signal: "SIGKILL", Duration: res.Duration}, nil
	case cmdGone:
		return sandbox.Result{}, fmt.Errorf("%w: sandboxtest: sandbox %s went away while a command ran", sandbox.ErrLost, s.spec.Name)
	case cmdCancelled:
		return sandbox.Result{}, ctx.Err()
	}
	if err != nil {
		return res, err
	}
	if cmd.Sync != nil {
		// An empty pull: one empty patch (a tar stream's end) a code dir.
		for range req.Dirs {
			if err := tar.NewWriter(cmd.Sync.Pull).Close(); err != nil {
				return res, fmt.Errorf("sandboxtest: write the pull: %w", err)
			}
		}
		res.SyncReply, _ = json.Marshal(struct {
			Seq uint64 `json:"seq"`
		}{req.Seq})
	}
	return res, nil
}

// Release ends every running command (ErrLost) and every later one.
func (s *FakeSandbox) Release(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.released {
		s.released = true
		close(s.done)
		if !s.lost {
			close(s.gone)
		}
	}
	return nil
}

// Lose makes the sandbox go away as a crash would: a running command ends
// with ErrLost, and every later Exec returns ErrUnreachable.
func (s *FakeSandbox) Lose() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.lost && !s.released {
		s.lost = true
		close(s.gone)
	}
}

// Spec is the spec it was claimed with.
func (s *FakeSandbox) Spec() sandbox.Spec { return s.spec }

// Released is closed once Release was called.
func (s *FakeSandbox) Released() <-chan struct{} { return s.done }

// IsReleased reports whether Release was called.
func (s *FakeSandbox) IsReleased() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// Execs is how many times Exec was called.
func (s *FakeSandbox) Execs() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.execs
}

// Commands are the argvs of the commands Exec was given, in order.
func (s *FakeSandbox) Commands() [][]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([][]string(nil), s.commands...)
}

// Requests are the sync requests (JSON) of the round trips, in order.
func (s *FakeSandbox) Requests() [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([][]byte(nil), s.requests...)
}
