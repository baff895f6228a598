package cli

import "runtime/debug"

// One-shot commands (sbx exec, sbx shell) collect garbage less often.
//
// A new session's sbx exec allocates its manifests, the placed list and
// the round's buffers in its first tens of milliseconds and then exits: with
// Go's default (GOGC=100, a first goal of 4 MiB) it ran several collections
// in that time, about 14 ms of CPU per call on a 2,400-entry tree, which
// on two cores is time taken from the sandbox's own start. So these
// processes let the heap grow to five times what they hold (GOGC=400), up
// to a soft limit of 1 GiB past which the collector works as often as it
// must to stay under it. sbx-mcp and the host daemon, which live long and
// hold a session's manifests, keep Go's defaults. A GOGC or GOMEMLIMIT in
// the environment is the user's choice and is kept.
const (
	oneShotGCPercent = 400
	oneShotMemLimit  = 1 << 30
)

// oneShotGC sets the collector for a one-shot command, unless getenv names
// GOGC or GOMEMLIMIT; it reports whether it did.
func oneShotGC(getenv func(string) string) bool {
	if getenv("GOGC") != "" || getenv("GOMEMLIMIT") != "" {
		return false
	}
	debug.SetGCPercent(oneShotGCPercent)
	debug.SetMemoryLimit(oneShotMemLimit)
	return true
}
