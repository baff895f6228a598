package sync

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// TestHelperLogAfterUnacknowledgedPull: a pull the host never applied (the
// round was lost after the helper's Collect) is rolled back by the next
// round's load; that round's push is saved as a record of the log, which
// says so: a new process loads the manifest without the pull's changes
// and with the push's, as memory has it (the record's UndoApplied; the
// property test's rounds rarely lose a pull).
func TestHelperLogAfterUnacknowledgedPull(t *testing.T) {
	WatchHelper = true
	defer func() { WatchHelper = false }()
	p := newPair(t)
	p.h.Watch(nil)
	defer p.h.Close()
	for i := range 80 {
		put(t, filepath.Join(p.host, "d", fmt.Sprintf("%02d", i)), "one")
	}
	p.sync(nil)
	p.sync(nil)
	// A round whose pull is lost: the sandbox's change never reaches
	// the host.
	_, helper := p.push()
	put(t, filepath.Join(p.sandbox, "made-in-sandbox"), "sandbox")
	if rep := helper.Collect(new(bytes.Buffer)); rep.Sent != 1 {
		t.Fatalf("the lost round's pull sent %d, want 1", rep.Sent)
	}
	WaitSaves()
	// The next round pushes 80 edits: saved as a record after the load
	// rolled the lost pull back.
	for i := range 80 {
		put(t, filepath.Join(p.host, "d", fmt.Sprintf("%02d", i)), "two")
	}
	appends := stateAppends.Load()
	r, helper := p.push()
	if stateAppends.Load() == appends {
		t.Fatal("the push was not saved as a record of the log")
	}
	hd := helper.dirs[0]
	if _, ok := hd.state.Manifest["made-in-sandbox"]; ok {
		t.Fatal("the lost pull was not rolled back in memory")
	}
	sameHelperState(t, "the helper's state as loaded after the push", loadedHelper(t, hd.file), hd.state)
	// And the round goes on: the sandbox's file is sent again.
	p.finish(r, helper)
	if got := read(t, filepath.Join(p.host, "made-in-sandbox")); got != "sandbox" {
		t.Errorf("the sandbox's file, sent again, is %q on the host", got)
	}
}

// helperLogBase is the base FuzzHelperLog's logs follow.
func helperLogBase() helperState {
	return helperState{
		Gen:        7,
		Manifest:   Manifest{"a": {Mode: 0o644, Size: 1}, "d": {Mode: fs.ModeDir | 0o755}, "d/x": {Mode: 0o644, Size: 2}, "d/e/y": {Mode: 0o600, Size: 3}},
		Undo:       Undo{"a": {Had: true, Entry: Entry{Mode: 0o644, Size: 9}}, "new": {}},
		PendingSeq: 4,
	}
}

// fuzzRecords makes records from b: each 3 bytes an operation on one of a
// few paths (a put of some size, or a forget), up to 4 to a record.
func fuzzRecords(b []byte, gen uint64) []helperRecord {
	paths := []string{"a", "d", "d/x", "d/e", "d/e/y", "z", "new"}
	var out []helperRecord
	for len(b) >= 3 {
		rec := helperRecord{Gen: gen, UndoApplied: b[0]&0x80 != 0}
		if b[0]&0x40 != 0 {
			rec.Gen = gen + 1 // another base's: skipped
		}
		n := 1 + int(b[0]&3)
		for k := 0; k < n && len(b) >= 3; k++ {
			op := helperOp{Path: paths[int(b[1])%len(paths)], Forget: b[2]&1 != 0}
			if !op.Forget {
				op.Entry = Entry{Mode: 0o644, Size: int64(b[2])}
			}
			rec.Ops = append(rec.Ops, op)
			b = b[3:]
		}
		out = append(out, rec)
	}
	return out
}

// FuzzHelperLog: a helper's log (which a command in the sandbox can
// write) is read without panicking whatever its bytes, and a log of
// records cut short or with a byte changed loads as the base with the
// records before the damage applied, in order (the oracle applies them
// in memory, without the framing: replay on a copy of the base).
func FuzzHelperLog(f *testing.F) {
	f.Add([]byte{0, 1, 2, 0x83, 3, 1, 0x40, 0, 0}, uint16(0), uint16(0), byte(0), []byte(nil))
	f.Add([]byte{1, 0, 4, 2, 6, 1}, uint16(20), uint16(9), byte(0xff), []byte("\x10\x00\x00\x00garbage"))
	for k := 0; k < 300; k += 37 {
		f.Add([]byte{0, 0, 5}, uint16(65535), uint16(k), byte(1), []byte(nil))
	}
	f.Fuzz(func(t *testing.T, ops []byte, cut, at uint16, flip byte, tail []byte) {
		recs := fuzzRecords(ops, helperLogBase().Gen)
		var raw []byte
		var ends []int // where each record's frame ends in raw
		for i := range recs {
			b, err := frameRecord(&recs[i])
			if err != nil {
				t.Fatal(err)
			}
			raw = append(raw, b...)
			ends = append(ends, len(raw))
		}
		// The damage: the log cut at cut (below 1<<15), one byte changed
		// at at (flip not 0).
		good := len(raw)
		if len(raw) > 0 {
			if cut < 1<<15 {
				good = int(cut) % (len(raw) + 1)
			}
			raw = raw[:good]
			if flip != 0 && len(raw) > 0 {
				k := int(at) % len(raw)
				raw[k] ^= flip
				good = min(good, k)
			}
		}
		want := helperLogBase()
		for i, rec := range recs {
			if ends[i] > good {
				break
			}
			if rec.Gen == want.Gen {
				rec.replay(&want)
			}
		}
		dir := t.TempDir()
		file := filepath.Join(dir, "log")
		if err := os.WriteFile(file, raw, 0o600); err != nil {
			t.Fatal(err)
		}
		got := helperLogBase()
		n := readHelperLog(file, &got)
		if n > int64(len(raw)) {
			t.Fatalf("read to %d of a log of %d bytes", n, len(raw))
		}
		sameHelperState(t, "the log as loaded", got, want)
		// Whatever follows is read without panicking.
		os.WriteFile(file, append(raw, tail...), 0o600)
		got = helperLogBase()
		readHelperLog(file, &got)
	})
}
