package session

import (
	"context"
	"strings"
	"testing"
)

// Release's notes (its last pull-back's, a command still running, held
// deletions) go into the same list as a concurrent call's Notices reads: they
// are written under s.mu. Run with -race: without the lock the detector
// reports the two goroutines' accesses to s.notices.
func TestReleaseNotesWhileNoticesRead(t *testing.T) {
	f := newFixture(t)
	s := f.open(t, "notesrace", false)
	// A change the rules keep in the sandbox: the release's last pull-back
	// names it in a note.
	sh(t, s, "ln -s /etc/passwd pw")
	s.Notices()
	stop := make(chan struct{})
	got := make(chan []string)
	go func() {
		var all []string
		for {
			select {
			case <-stop:
				got <- append(all, s.Notices()...)
				return
			default:
				all = append(all, s.Notices()...)
			}
		}
	}()
	err := s.Release(context.Background())
	close(stop)
	notes := <-got
	if err != nil {
		t.Fatalf("release: %v", err)
	}
	for _, n := range notes {
		if strings.Contains(n, "changes the rules keep in the sandbox are lost with it") && strings.Contains(n, "pw") {
			return
		}
	}
	t.Fatalf("the release's note of what the rules keep in the sandbox (pw) was not read: notes %q", notes)
}
