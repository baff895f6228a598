package sync

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestReplyBound(t *testing.T) {
	var r HelperReply
	for i := range 20000 {
		r.Kept = append(r.Kept, Refusal{Path: strings.Repeat("p", 100) + string(rune('a'+i%26)), Reason: "a nested repository"})
		r.Conflicts = append(r.Conflicts, strings.Repeat("c", 100))
	}
	r.Bound()
	raw, _ := json.Marshal(r)
	if len(raw) > MaxReplyBytes+64<<10 {
		t.Fatalf("bounded reply is %d bytes", len(raw))
	}
	last := r.Kept[len(r.Kept)-1]
	if !strings.Contains(last.Reason, "more changes kept in the sandbox") || len(r.Kept) < 1000 {
		t.Fatalf("%d kept, last %+v", len(r.Kept), last)
	}
	if c := r.Conflicts; len(c) != 1 || !strings.Contains(c[0], "and 20000 more conflicts") {
		t.Fatalf("conflicts %d: %.200q", len(c), c)
	}
	small := HelperReply{Kept: []Refusal{{Path: "a", Reason: "b"}}, Conflicts: []string{"c"}}
	small.Bound()
	if len(small.Kept) != 1 || len(small.Conflicts) != 1 {
		t.Fatalf("a small reply was cut: %+v", small)
	}
}
