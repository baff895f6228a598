package sandboxtest

import (
	"context"
	"fmt"
	"sync"

	"github.com/sbx-sh/sbx/sandbox"
)

// Provider wraps a real provider for lifecycle tests of what drives it (the
// session engine, the MCP pool): it counts what is claimed and attached and
// lets a test lose a sandbox on the spot, so a test of "claim on first use"
// or "re-claim after the sandbox is gone" checks counts instead of killing
// processes and waiting. The commands still run in the wrapped backend, so
// the wrapper keeps the contract (TestProviderConforms runs the suite on it
// over the local backend).
type Provider struct {
	sandbox.Provider

	mu       sync.Mutex
	claims   int
	attaches int
	boxes    []*Sandbox
}

// Wrap returns a Provider that passes everything on to p.
func Wrap(p sandbox.Provider) *Provider { return &Provider{Provider: p} }

// Claim claims from the wrapped provider and counts it.
func (p *Provider) Claim(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	sb, err := p.Provider.Claim(ctx, spec)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.claims++
	if err != nil {
		return nil, err
	}
	s := &Sandbox{inner: sb, spec: spec}
	p.boxes = append(p.boxes, s)
	return s, nil
}

// Attach attaches through the wrapped provider and counts the attempt.
func (p *Provider) Attach(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	sb, err := p.Provider.Attach(ctx, spec)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.attaches++
	if err != nil {
		return nil, err
	}
	s := &Sandbox{inner: sb, spec: spec}
	p.boxes = append(p.boxes, s)
	return s, nil
}

// Claims is how many times Claim was called.
func (p *Provider) Claims() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.claims
}

// Attaches is how many times Attach was called.
func (p *Provider) Attaches() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.attaches
}

// Sandboxes are the sandboxes handed out, in order.
func (p *Provider) Sandboxes() []*Sandbox {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]*Sandbox(nil), p.boxes...)
}

// Sandbox is a sandbox handed out by Provider.
type Sandbox struct {
	inner sandbox.Sandbox
	spec  sandbox.Spec

	mu       sync.Mutex
	execs    int
	lost     bool
	released bool
}

// Spec is the spec it was claimed or attached with.
func (s *Sandbox) Spec() sandbox.Spec { return s.spec }

// Exec runs cmd in the wrapped sandbox, or returns ErrUnreachable once the
// sandbox was lost.
func (s *Sandbox) Exec(ctx context.Context, cmd *sandbox.Cmd) (sandbox.Result, error) {
	s.mu.Lock()
	s.execs++
	lost := s.lost
	s.mu.Unlock()
	if lost {
		return sandbox.Result{}, fmt.Errorf("%w: sandboxtest: the test lost sandbox %s", sandbox.ErrUnreachable, s.spec.Name)
	}
	return s.inner.Exec(ctx, cmd)
}

// Release releases the wrapped sandbox.
func (s *Sandbox) Release(ctx context.Context) error {
	s.mu.Lock()
	s.released = true
	s.mu.Unlock()
	return s.inner.Release(ctx)
}

// Lose makes the sandbox go away as a crash would: the wrapped one is
// released (a command running in it ends with ErrLost) and every later Exec
// returns ErrUnreachable. It returns once the wrapped sandbox is released.
func (s *Sandbox) Lose(ctx context.Context) error {
	s.mu.Lock()
	s.lost = true
	s.mu.Unlock()
	return s.inner.Release(ctx)
}

// Execs is how many times Exec was called.
func (s *Sandbox) Execs() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.execs
}

// Released reports whether Release was called.
func (s *Sandbox) Released() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.released
}
