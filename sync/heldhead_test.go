package sync

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"reflect"
	"testing"
	"time"
)

// heldFixture writes a held.json of n held and r rejected deletions, each
// with a base of size entries.
func heldFixture(t testing.TB, dir string, rng *rand.Rand, n, r, size int) held {
	t.Helper()
	mk := func(i int) HeldDeletion {
		base := Manifest{}
		for j := range size {
			base[fmt.Sprintf("d%d/f%d", i, j)] = Entry{Mode: 0o644, Size: int64(rng.IntN(1 << 20)), Hash: fmt.Sprintf("%x", rng.Uint64())}
		}
		return HeldDeletion{Dir: fmt.Sprintf("/code/%d", rng.IntN(3)), Path: fmt.Sprintf("d%d", i), Reason: "a test", Time: time.Unix(int64(i), 0), Base: base}
	}
	var h held
	for i := range n {
		h.Held = append(h.Held, mk(i))
	}
	for i := range r {
		h.Rejected = append(h.Rejected, mk(n+i))
	}
	if err := writeHeld(dir, h); err != nil {
		t.Fatal(err)
	}
	return h
}

// TestHeldHeadAgrees: what Begin reads of held.json (readHeldHead, its
// head) is what the whole decoding says: the number waiting, and each
// rejected deletion's code dir and path in order; and so for a file an
// older build wrote, without a head.
func TestHeldHeadAgrees(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 13))
	for i := range 400 {
		dir := t.TempDir()
		h := heldFixture(t, dir, rng, rng.IntN(4), rng.IntN(4), rng.IntN(5))
		older := i%2 == 1
		if older {
			raw, err := json.Marshal(h) // no head
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(heldPath(dir), raw, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		whole, err := readHeld(dir)
		if err != nil {
			t.Fatal(err)
		}
		if empty := len(h.Held)+len(h.Rejected) == 0; (older || empty) != (whole.Head == nil) {
			t.Fatalf("older %v, head %v", older, whole.Head)
		}
		head, err := readHeldHead(dir)
		if err != nil {
			t.Fatal(err)
		}
		if head.Waiting != len(whole.Held) || head.Waiting != len(h.Held) {
			t.Fatalf("older %v: waiting %d, whole %d, written %d", older, head.Waiting, len(whole.Held), len(h.Held))
		}
		var want []heldPlace
		for _, x := range whole.Rejected {
			want = append(want, heldPlace{x.Dir, x.Path})
		}
		if !reflect.DeepEqual(head.Rejected, want) || len(want) != len(h.Rejected) {
			t.Fatalf("older %v: rejected: head %q, whole %q", older, head.Rejected, want)
		}
	}
	// No file: nothing waits; a file that is not JSON is an error, as it is
	// for the whole decoding.
	dir := t.TempDir()
	if h, err := readHeldHead(dir); err != nil || h.Waiting+len(h.Rejected) != 0 {
		t.Fatalf("no held.json: %v, %v", h, err)
	}
	for _, bad := range []string{"{\"held\":[{", "[]", "{\"head\":{\"waiting\":\"x\"}", ""} {
		if err := os.WriteFile(heldPath(dir), []byte(bad), 0o600); err != nil {
			t.Fatal(err)
		}
		if h, err := readHeldHead(dir); err == nil {
			t.Errorf("held.json %q was read without an error: %v", bad, h)
		}
	}
}

// BenchmarkReadHeld: one held deletion of a 100k-file tree, read whole
// (what Begin did at every round trip while it waited) and read for what
// Begin needs.
func BenchmarkReadHeld(b *testing.B) {
	dir := b.TempDir()
	heldFixture(b, dir, rand.New(rand.NewPCG(1, 2)), 1, 0, 100_000)
	for _, c := range []struct {
		name string
		read func(string) error
	}{
		{"whole", func(d string) error { _, err := readHeld(d); return err }},
		{"head", func(d string) error { _, err := readHeldHead(d); return err }},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if err := c.read(dir); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
