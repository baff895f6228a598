package sync

import "time"

// fineRacyWindow is racyWindow on a file system whose timestamps are
// known to be fine (fineTimestamps): a local Linux file system that stores
// nanoseconds and stamps a write with the kernel's clock, whose tick (one
// jiffy, at most 10 ms; none at all once a stat has read the timestamp, on
// kernels with multigrain timestamps) is far below it. It also bounds how
// long one write(2) still landing its data under the mtime it set at its
// start is taken for racy (hashed, and read once more once settled).
const fineRacyWindow = 100 * time.Millisecond

// racyRule says which mtimes are too close to a scan's start for size and
// mtime alone to show a later rewrite (see racyWindow).
type racyRule struct {
	coarse, fine int64 // the oldest racy mtime (ns) under each window
	// ctimeShows: the file system keeps fine timestamps (fineTimestamps),
	// so a file whose ctime differs from its mtime is never racy (entry).
	ctimeShows bool
}

// racyFor is the rule of a scan of root that starts at start: racyWindow
// for every file on a file system not known to keep fine timestamps, and
// for a file whose mtime has no sub-second part (a file system that keeps
// whole seconds or two, or a time set by hand: racy for the longer window,
// the safe side); fineRacyWindow for the others.
func racyFor(root string, start time.Time) racyRule {
	r := racyRule{coarse: start.Add(-racyWindow).UnixNano()}
	r.fine = r.coarse
	if fineTimestamps(root) {
		r.fine = start.Add(-fineRacyWindow).UnixNano()
		r.ctimeShows = true
	}
	return r
}

// entry reports whether a file found as e is racy. On a file system with
// fine timestamps it is only when its mtime is racy and equal to its
// ctime: a write, a truncate or a write through a mapping sets both to
// the same instant (the kernel's file_update_time), so a file whose two
// differ (its mtime set by hand: what sbx writes with the other side's
// mtime, a cp -p, a tar x; or its ctime moved on by a rename or a chmod
// after the write) cannot be rewritten in place later without its mtime
// or its ctime showing it. What it cannot show, a write followed by
// setting the mtime back by hand within the ctime's tick, a file with an
// old mtime cannot show either, and the rule has never covered it. A file
// system without fine timestamps keeps the mtime rule alone (its ctime may
// come from another clock, or not move at all).
func (r racyRule) entry(e Entry) bool {
	if r.ctimeShows && e.CTime != 0 && e.CTime != e.MTime {
		return false
	}
	return r.racy(e.MTime)
}

// racy reports whether a file whose mtime is mtime may still be rewritten
// without its size or mtime showing it.
func (r racyRule) racy(mtime int64) bool {
	if mtime%int64(time.Second) == 0 {
		return mtime >= r.coarse
	}
	return mtime >= r.fine
}
