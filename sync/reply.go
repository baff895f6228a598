package sync

import "fmt"

// MaxReplyBytes bounds the lists of a HelperReply (kept changes, conflicts,
// file errors) by the bytes of their text, so that the reply fits the
// smallest frame a backend carries it in (the in-pod helper's 1 MiB). A
// nested repository cloned in the sandbox is thousands of kept changes; a
// reply past its frame would take the whole round trip for lost.
const MaxReplyBytes = 512 << 10

// Bound cuts the reply's lists to MaxReplyBytes of text in all; what is cut
// is counted in one last entry of the list it was cut from. The helper calls
// it before sending; the host is bounded by the frame either way.
func (r *HelperReply) Bound() {
	budget := MaxReplyBytes
	kept := 0
	for ; kept < len(r.Kept); kept++ {
		if budget -= len(r.Kept[kept].Path) + len(r.Kept[kept].Reason) + 32; budget < 0 {
			break
		}
	}
	if n := len(r.Kept) - kept; n > 0 {
		r.Kept = append(r.Kept[:kept:kept], Refusal{Path: "...", Reason: fmt.Sprintf("and %d more changes kept in the sandbox (the list is cut at %d bytes)", n, MaxReplyBytes)})
	}
	cut := func(list []string, what string) []string {
		i := 0
		for ; i < len(list); i++ {
			if budget -= len(list[i]) + 8; budget < 0 {
				break
			}
		}
		if n := len(list) - i; n > 0 {
			return append(list[:i:i], fmt.Sprintf("... and %d more %s (the list is cut at %d bytes)", n, what, MaxReplyBytes))
		}
		return list
	}
	r.Conflicts = cut(r.Conflicts, "conflicts")
	r.FileErrors = cut(r.FileErrors, "file errors")
}
