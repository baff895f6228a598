package session

import (
	"errors"
	"fmt"

	"github.com/sbx-sh/sbx/sandbox"
)

// ErrNotClaimed means the session has no sandbox yet: nothing ran in it.
var ErrNotClaimed = errors.New("the session has no sandbox yet")

// PortDialer is the session's claimed sandbox as a sandbox.PortDialer (the
// MCP port tool; sbx port attaches by name instead), and the session's state
// directory, where portfwd keeps the forwards' records for sbx ls. It
// claims nothing: a forward is to a server that a command already started.
func (s *Session) PortDialer() (sandbox.PortDialer, string, error) {
	s.mu.Lock()
	sb, closed := s.sb, s.closed
	s.mu.Unlock()
	switch {
	case closed:
		return nil, "", ErrClosed
	case sb == nil:
		return nil, "", ErrNotClaimed
	}
	pd, ok := sb.(sandbox.PortDialer)
	if !ok {
		return nil, "", fmt.Errorf("the %s backend cannot forward ports yet", s.m.prov.Name())
	}
	return pd, s.dir, nil
}
