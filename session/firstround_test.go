package session

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sbx-sh/sbx/sandbox"
	"github.com/sbx-sh/sbx/sandbox/sandboxtest"
)

// besideClaim is a backend whose Claim returns only once the session's
// first round trip has done its host half: that half must run beside the
// claim, or the claim would wait for ever (here: 20 s, then an error).
type besideClaim struct {
	*sandboxtest.Fake
	s **Session
}

func (b besideClaim) Claim(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	f := (*b.s).first
	if f == nil {
		return nil, errors.New("the first round trip's host half was not begun before the claim")
	}
	select {
	case <-f.done:
	case <-time.After(20 * time.Second):
		return nil, errors.New("the first round trip's host half did not end while the claim waited")
	}
	if f.err != nil || f.round == nil {
		return nil, errors.New("the first round trip's host half failed beside the claim")
	}
	return b.Fake.Claim(ctx, spec)
}

// TestFirstRoundBesideClaim: a new sandbox's first round trip reads the
// host's hooks and scans the code dirs while the backend claims (the claim
// waits for them here, which a claim-then-scan order never lets end), and
// the round then runs on that scan: one round trip, the whole tree pushed.
// An unkept session's round is still the one that stands for the final
// pull-back (its full scan asked before the round began).
func TestFirstRoundBesideClaim(t *testing.T) {
	for _, keep := range []bool{true, false} {
		f := newFixture(t)
		p := &sandboxtest.Fake{}
		var s *Session
		m := NewManager(f.root, besideClaim{Fake: p, s: &s}, nil)
		s = fakeOpen(t, m, f, "beside", keep)
		if !keep {
			s.LastCommand()
		}
		if o, err := fakeExec(t, s, "true"); err != nil || o.ExitCode != 0 {
			t.Fatalf("keep=%v: the first command: %v %+v", keep, err, o)
		}
		boxes := p.Sandboxes()
		if len(boxes) != 1 {
			t.Fatalf("keep=%v: %d sandboxes", keep, len(boxes))
		}
		reqs := boxes[0].Requests()
		if len(reqs) != 1 || !resets(t, reqs[0]) {
			t.Fatalf("keep=%v: %d round trips; want one, pushing the whole tree", keep, len(reqs))
		}
		if !keep && !s.folded() {
			t.Errorf("the unkept session's one round trip no longer stands for the final pull-back")
		}
		s.Release(context.Background())
	}
}
