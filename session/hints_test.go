package session

import (
	"strings"
	"testing"
)

// The identity watch sees git's message however the output is cut into
// writes, passes every byte on, and sees nothing in other output.
func TestIdentityWatch(t *testing.T) {
	msg := "Author identity unknown\n\n*** Please tell me who you are.\n"
	for _, c := range []struct {
		name   string
		chunks []string
		want   bool
	}{
		{"one write", []string{msg}, true},
		{"cut inside the mark", []string{"x\n*** Please tell me w", "ho you are.\n"}, true},
		{"cut inside the mark after a long write", []string{strings.Repeat("y", 70000) + "*** Please t", "ell me who you are.\n" + strings.Repeat("z", 70000)}, true},
		{"a byte at a time", strings.Split(msg, ""), true},
		{"after a long output", []string{strings.Repeat("y", 100000), msg}, true},
		{"other output", []string{"Please tell me", strings.Repeat(" ", 40), "who you are"}, false},
		{"nothing", nil, false},
	} {
		var out strings.Builder
		w, _, ws := watchIdentity(&out, nil)
		for _, ch := range c.chunks {
			w.Write([]byte(ch))
		}
		if got := ws[0].saw(); got != c.want {
			t.Errorf("%s: saw %v, want %v", c.name, got, c.want)
		}
		if out.String() != strings.Join(c.chunks, "") {
			t.Errorf("%s: output not passed on whole", c.name)
		}
	}
	// One writer for both streams stays one, so merged output keeps order.
	var out strings.Builder
	a, b, ws := watchIdentity(&out, &out)
	if a != b || len(ws) != 1 {
		t.Fatalf("one writer for both streams became %d watches", len(ws))
	}
}
