package sync

import (
	"bytes"
	"encoding/gob"
	"math/rand/v2"
	"os"
)

// The helper's state as a base and a log (a worker that watches: the
// local one).
//
// A push of pushSaveMin files or more is saved before its command runs,
// so that a worker the command kills does not take what the push wrote
// for the sandbox's own changes. That save wrote the whole state: at 100k
// files 30-40 ms of gob, on the command's critical path, for a push of a
// few. Now the Apply of a worker that watches appends what it did to the
// manifest to a log beside the state file (STATE.log): records framed as
// the host's (statelog.go: length, CRC-32C, gob), each naming the
// generation of the base it follows (helperState.Gen). Every other save is
// whole, as before (Collect's, in the background): it writes a base of a
// new generation and removes the log. Loading reads the base, then
// applies the records of its generation in order, up to a torn one.
//
// A record follows the files only when they hold what memory held before
// the round (helperLog.current): a round that changed the state in memory
// without saving it (a small push, a scan whose changes were all kept
// here, a rollback at load) leaves the next push to a whole save. A record
// also says how its round's load settled the base's Undo (applied: the
// host did not acknowledge that pull; else dropped), which is the only
// change a load makes.
//
// The state dir is the sandbox's: a command there can write the log, as
// it can the base, and gains nothing it could not by that (the manifest
// is the sandbox's own, which the host never trusts; a wrong one makes the
// helper report too much or too little, and too little is what the
// command could do by not changing a file). The log is read within
// maxStateBytes, never waited on (a fifo) nor followed (a link); a record
// that does not decode ends it; one not as this process left it makes the
// next save a whole one.

// helperRecord is one record of a helper's log.
type helperRecord struct {
	Gen uint64
	// UndoApplied: the round's load applied the base's Undo (the host
	// did not acknowledge its pull); else it dropped it.
	UndoApplied bool
	Skipped     map[string]string
	Ops         []helperOp
}

// helperOp is one change Apply made to the manifest, in its order.
type helperOp struct {
	Path string
	// Forget removes Path and everything below it; else Entry is put at
	// Path.
	Forget bool
	Entry  Entry
}

// helperLog is what a helper process knows of its state's files.
type helperLog struct {
	gen  uint64 // the base's generation as this process wrote or read it (0: none)
	base int64  // the base's size
	size int64  // the log's size as this process left it
	// current: the files hold the state memory held before this round's
	// load (a record then stands for the round).
	current bool
}

// apply makes op's change in m.
func (op helperOp) apply(m Manifest) {
	if op.Forget {
		forget(m, op.Path, false)
		return
	}
	m[op.Path] = op.Entry
}

// put records Apply's putting e at p.
func (hd *helperDir) put(m Manifest, p string, e Entry) {
	m[p] = e
	hd.ops = append(hd.ops, helperOp{Path: p, Entry: e})
}

// forgetTree records Apply's removing p and what is below it from m.
func (hd *helperDir) forgetTree(m Manifest, p string) {
	forget(m, p, false)
	hd.ops = append(hd.ops, helperOp{Path: p, Forget: true})
}

func (hd *helperDir) logFile() string { return hd.file + stateLogSuffix }

// helperStateSig is the signature of a helper's state as on disk: its
// base's. The log is left out (a stat less at each round trip): only this
// process appends to it while it holds the state in memory (one worker at
// a time), and what another writes there (a command) is read only by a
// process that starts anew.
func helperStateSig(file string) string {
	fi, _ := os.Stat(file)
	return fileSig(fi)
}

// newGen gives st a new generation, never 0.
func newGen(st *helperState) {
	for st.Gen = rand.Uint64(); st.Gen == 0; st.Gen = rand.Uint64() {
	}
}

// readHelperLog applies to st the records of file of st's generation and
// returns the log's size up to the end of its last whole record. Nothing
// is read from a log that is not a regular file.
func readHelperLog(file string, st *helperState) int64 {
	if st.Gen == 0 {
		return 0
	}
	raw, err := readStateFile(file)
	if err != nil {
		return 0
	}
	forgets := 0
	return eachRecord(raw, func(payload []byte) bool {
		var rec helperRecord
		if err := gob.NewDecoder(bytes.NewReader(payload)).Decode(&rec); err != nil {
			return false
		}
		if forgets += rec.forgets(); forgets > maxReplayForgets {
			return false
		}
		if rec.Gen == st.Gen {
			rec.replay(st)
		}
		return true
	})
}

// replay makes rec's round's changes in st: its load's settling of the
// Undo, then Apply's changes to the manifest.
func (rec *helperRecord) replay(st *helperState) {
	if st.Manifest == nil {
		st.Manifest = Manifest{}
	}
	if st.Undo != nil && rec.UndoApplied {
		st.Undo.Apply(st.Manifest)
	}
	st.Undo, st.PendingSeq = nil, 0
	st.Skipped = rec.Skipped
	for _, op := range rec.Ops {
		op.apply(st.Manifest)
	}
}

// maxReplayForgets bounds the Forget operations one load replays: each
// walks the whole manifest, and a command can write a log of nothing else
// (a push's removals of directories are far fewer). A log past it is
// read up to the record that goes over, as a torn one.
const maxReplayForgets = 4096

// forgets counts rec's Forget operations.
func (rec *helperRecord) forgets() int {
	n := 0
	for _, op := range rec.Ops {
		if op.Forget {
			n++
		}
	}
	return n
}

// appendApply saves the round's Apply as a record of the log; false when
// it cannot stand for the state (see helperLog), and a whole save is to
// be written instead.
func (hd *helperDir) appendApply() bool {
	l := &hd.log
	if !l.current || l.gen == 0 || hd.state.Gen != l.gen || hd.opsLost {
		return false
	}
	if l.size > max(l.base/2, stateLogMin) {
		return false
	}
	b, err := frameRecord(&helperRecord{Gen: l.gen, UndoApplied: hd.undoApplied, Skipped: hd.state.Skipped, Ops: hd.ops})
	if err != nil {
		return false
	}
	// Not waited on (a fifo a command put at the name: no reader, so the
	// open fails), not through a link; the page cache outlives a worker
	// the command kills, so no fsync.
	if ok, torn := appendRecord(hd.logFile(), l.size, b, false); !ok {
		if torn {
			l.size = -1 // what was appended may be torn: the next save is whole
		}
		return false
	}
	l.size += int64(len(b))
	hd.undoResolved = false
	stateAppends.Add(1)
	return true
}

// removeLog removes the log of file (a new base was written: its records
// name the old generation). One that cannot be removed is left: loads skip
// its records, and its size is not what the next append expects.
func removeLog(file string) { os.Remove(file + stateLogSuffix) }
