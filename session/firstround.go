package session

import (
	"context"
	"time"

	sbxsync "github.com/sbx-sh/sbx/sync"
)

// The first round trip's host half, beside the claim.
//
// A new sandbox's first command waits for the claim (the backend starting
// the sandbox: tens of milliseconds locally, more in a cluster) and then for
// the host half of its round trip: the hooks and config files read from the
// host's git (several git processes), and the full scan of the code dirs
// that a reset sandbox side gets. Neither needs the sandbox, so claim starts
// them beside the provider's Claim (startFirstRound), and the first round
// trip takes what they made (takeFirstRound) instead of doing them itself.
// Placing the first push still waits for the claim: the workspace's owner
// (the sandbox's host uid when sbx runs as root) is set by the claim, and
// the placed files take it.
//
// The overlap is confined to the claim: everything that touches the sync
// or the hooks after it waits for the first round first (roundTrip takes
// it, dropSandbox and a new claim discard it), all under the run lock, so
// nothing else reads or writes them while its goroutine runs.

// firstRound is a round trip's host half begun beside the claim.
type firstRound struct {
	done  chan struct{}
	round *sbxsync.Round
	rep   sbxsync.Report
	err   error
	took  time.Duration
}

// startFirstRound begins the first round trip's host half in a goroutine.
// Called by claim with run held, after the sync's Reset.
func (s *Session) startFirstRound(ctx context.Context) {
	f := &firstRound{done: make(chan struct{})}
	s.first = f
	go func() {
		defer close(f.done)
		start := time.Now()
		s.refreshHooks(ctx)
		f.round, f.rep, f.err = s.sync.Begin()
		f.took = time.Since(start)
	}()
}

// takeFirstRound waits for a first round begun beside the claim and hands
// it over (nil when there is none). Called with run held.
func (s *Session) takeFirstRound() *firstRound {
	f := s.first
	if f == nil {
		return nil
	}
	s.first = nil
	<-f.done
	return f
}

// discardFirstRound waits for a first round that will not be used (the
// claim failed, the sandbox is dropped) and forgets it; the next Begin
// rolls an unfinished round back. Called with run held.
func (s *Session) discardFirstRound() { s.takeFirstRound() }
