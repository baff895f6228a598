package sync

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"encoding/gob"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"maps"
	"os"
	"reflect"
	"syscall"
)

// The host's state as a base and a log.
//
// A round trip that moved many files saves the host's state, and a save
// wrote the whole of it: at 100k files the manifest's encoding, its write
// and fsync took 50-60 ms of a round that moved 1,000 files, on the
// command's critical path (Round.Finish runs before the reply). A save now
// appends what changed since the last one to a log beside the state:
//
//   - sync.state, the base: the whole state, with a random generation
//     (hostState.Gen), written through a new file renamed over the old, as
//     before;
//   - sync.state.log: records, each a little-endian uint32 length, the
//     CRC-32C of the payload, and the payload: a gob of stateDelta, which
//     names the base's generation, the state's small fields whole, and per
//     code dir the entries put and the paths deleted since the record
//     before. A record is appended, and fsynced when the round asks for it
//     (Host.save); a torn one (a crash during the append) ends the log
//     where it starts.
//
// Loading reads the base, then applies the log's records of the base's
// generation in order (a record of another generation is from an older
// base whose log was not removed: skipped). A save compares the manifests
// with the copy of them as last saved (stateLog.saved): a watching process
// (sbx-mcp, the CLI's host daemon), which changes its manifests in place,
// keeps a clone made at its last whole save and compares only the paths
// each change in place names (Host.changing; tests check that against a
// whole comparison); a process that does not watch replaces its manifests
// with each round's scan and keeps the ones it loaded as the copy, compared
// whole. The state is written whole when there is no copy (a watching
// process that just loaded the state, or a manifest the copy is changed in
// place), when the log is over half the base's size (the log is then
// removed), when the log is not as this process left it, or on any error
// appending.

// stateLogSuffix names the log beside the base.
const stateLogSuffix = ".log"

// stateLogMin is the size a log may reach whatever the base's size: a
// small state is rewritten whole only after a few records.
var stateLogMin int64 = 256 << 10

// stateDelta is one record of the log.
type stateDelta struct {
	Gen     uint64 // the base's generation (hostState.Gen)
	Seq     uint64
	Ack     uint64
	Reset   bool
	Skipped []map[string]string
	Dirs    []dirDelta // one per manifest
}

// dirDelta is what changed in one manifest.
type dirDelta struct {
	Put Manifest
	Del []string
}

// apply makes the change in m.
func (dd dirDelta) apply(m Manifest) {
	for _, p := range dd.Del {
		delete(m, p)
	}
	for p, e := range dd.Put {
		m[p] = e
	}
}

// stateLog is what a process knows of the log it appends to.
type stateLog struct {
	gen   uint64     // the generation of the base as this process last read or wrote it
	saved []Manifest // the manifests as the base and its log hold them; nil: not kept
	base  int64      // the base's size
	size  int64      // the log's size as this process left it
	// dirty lists, per code dir, the paths changed in the manifest since
	// the last save (each place that changes a manifest in place says
	// which); all marks the code dirs whose manifest is compared whole
	// with saved (replaced, or changed where no one lists the paths).
	dirty []map[string]bool
	all   []bool
}

// changing notes, before it happens, that code dir i's manifest is about
// to change in place at paths (nil: anywhere). Where the copy a save
// compares with is that very map (a process that does not watch keeps the
// manifests it loaded or saved whole as the copy, and replaces them with
// its scans), the copy is dropped, and the next save writes the state
// whole.
func (h *Host) changing(i int, paths ...string) {
	l := &h.log
	if l.saved == nil {
		return
	}
	if i < len(l.saved) && i < len(h.st.Manifests) && sameMap(l.saved[i], h.st.Manifests[i]) {
		l.saved = nil
		return
	}
	if paths == nil {
		l.whole(i)
		return
	}
	l.list(i, paths)
}

// replaced notes that code dir i's manifest was replaced by another map:
// it is compared whole at the next save.
func (h *Host) replaced(i int) { h.log.whole(i) }

// rescanned notes that code dir i's manifest was replaced by a scan of it
// compared with the one it replaces, which differs from it only at paths
// (Scanner.Changed). Where the copy a save compares with is that replaced
// map (a process that does not watch, which keeps the manifests it loaded
// or saved as its copy), only those paths are compared; else the whole.
func (h *Host) rescanned(i int, paths []string) {
	l := &h.log
	if l.saved == nil || i >= len(l.saved) || !sameMap(l.saved[i], h.st.Manifests[i]) || i < len(l.all) && l.all[i] {
		l.whole(i)
		return
	}
	l.list(i, paths)
}

// whole marks code dir i's manifest for a whole comparison at the save.
func (l *stateLog) whole(i int) {
	for len(l.all) <= i {
		l.all = append(l.all, false)
	}
	l.all[i] = true
}

// list adds paths to those of code dir i compared at the save.
func (l *stateLog) list(i int, paths []string) {
	for len(l.dirty) <= i {
		l.dirty = append(l.dirty, nil)
	}
	if l.dirty[i] == nil {
		l.dirty[i] = map[string]bool{}
	}
	for _, p := range paths {
		l.dirty[i][p] = true
	}
}

// sameMap reports whether a and b are one map.
func sameMap(a, b Manifest) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

// checkDelta, when set (by tests), is given each delta taken from the
// paths listed as changed and the delta of a whole comparison.
var checkDelta func(listed, whole []dirDelta)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

func (h *Host) logPath() string { return h.statePath() + stateLogSuffix }

// stateSig is the signature of the state as on disk: the base's and the
// log's (another process's save changes one of them).
func (h *Host) stateSig() string {
	fi, _ := os.Stat(h.statePath())
	if fi == nil {
		return ""
	}
	li, _ := os.Lstat(h.logPath())
	return fileSig(fi) + "|" + fileSig(li)
}

// readLog applies the log's records of generation gen to st, and returns
// the log's size up to the end of its last whole record.
func readLog(file string, gen uint64, st *hostState) (int64, error) {
	f, err := os.OpenFile(file, os.O_RDONLY|noFollow, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer f.Close()
	raw, err := readState(f)
	if err != nil {
		return 0, err
	}
	return eachRecord(raw, func(payload []byte) bool {
		var d stateDelta
		if err := gob.NewDecoder(bytes.NewReader(payload)).Decode(&d); err != nil {
			return false
		}
		if d.Gen == gen && len(d.Dirs) == len(st.Manifests) {
			st.Seq, st.Ack, st.Reset, st.Skipped = d.Seq, d.Ack, d.Reset, d.Skipped
			for i, dd := range d.Dirs {
				dd.apply(st.Manifests[i])
			}
		}
		return true
	}), nil
}

// eachRecord hands fn the payload of each whole record of a log's bytes
// raw, in order, up to a torn one (its length past the end, or its CRC
// not its payload's) or one fn does not take (false); it returns the
// size of the records taken.
func eachRecord(raw []byte, fn func(payload []byte) bool) int64 {
	var off int64
	for len(raw) >= 8 {
		n := binary.LittleEndian.Uint32(raw)
		sum := binary.LittleEndian.Uint32(raw[4:])
		if uint64(n) > uint64(len(raw)-8) || crc32.Checksum(raw[8:8+n], crcTable) != sum {
			break // torn: the log ends here
		}
		if !fn(raw[8 : 8+n]) {
			break
		}
		raw = raw[8+n:]
		off += 8 + int64(n)
	}
	return off
}

// frameRecord is v as a record of a log: its length, the CRC-32C of its
// payload, and the payload, v's gob.
func frameRecord(v any) ([]byte, error) {
	var buf bytes.Buffer
	buf.Write(make([]byte, 8))
	if err := gob.NewEncoder(&buf).Encode(v); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	binary.LittleEndian.PutUint32(b, uint32(len(b)-8))
	binary.LittleEndian.PutUint32(b[4:], crc32.Checksum(b[8:], crcTable))
	return b, nil
}

// appendRecord appends rec to the log file, fsynced when durable, if the
// file is a regular one of size want (as this process left it; not
// followed if a link, not waited on if a fifo). ok is false when it did
// not: the caller writes its state whole instead; torn says that what it
// appended may be torn (the write failed).
func appendRecord(file string, want int64, rec []byte, durable bool) (ok, torn bool) {
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_APPEND|noFollow|syscall.O_NONBLOCK, 0o600)
	if err != nil {
		return false, false
	}
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() || fi.Size() != want {
		// Not the log this process left: another's, or a torn record's
		// tail. The whole state is written, and the log removed.
		f.Close()
		return false, false
	}
	_, err = f.Write(rec)
	if err == nil && durable {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err == nil, err != nil
}

// delta is what changed in ms since saved: over the paths l lists as
// changed, or whole where it says so.
func (l *stateLog) delta(ms []Manifest) []dirDelta {
	out := make([]dirDelta, len(ms))
	for i, m := range ms {
		s := l.saved[i]
		if i < len(l.all) && l.all[i] {
			out[i] = wholeDelta(s, m)
			continue
		}
		put := Manifest{}
		var del []string
		if i < len(l.dirty) {
			for p := range l.dirty[i] {
				e, ok := m[p]
				o, had := s[p]
				switch {
				case ok && (!had || o != e):
					put[p] = e
				case !ok && had:
					del = append(del, p)
				}
			}
		}
		out[i] = dirDelta{Put: put, Del: del}
	}
	if checkDelta != nil {
		whole := make([]dirDelta, len(ms))
		for i, m := range ms {
			whole[i] = wholeDelta(l.saved[i], m)
		}
		checkDelta(out, whole)
	}
	return out
}

// wholeDelta compares m with s entry by entry.
func wholeDelta(s, m Manifest) dirDelta {
	put := Manifest{}
	matched := 0
	for p, e := range m {
		if o, ok := s[p]; ok {
			matched++
			if o == e {
				continue
			}
		}
		put[p] = e
	}
	var del []string
	if matched < len(s) {
		for p := range s {
			if _, ok := m[p]; !ok {
				del = append(del, p)
			}
		}
	}
	return dirDelta{Put: put, Del: del}
}

// appendLog saves the state as a record of the log, fsynced when durable;
// false when it could not, and the whole state is to be written instead.
func (h *Host) appendLog(durable bool) bool {
	l := &h.log
	if l.saved == nil || l.gen == 0 || h.st.Gen != l.gen || len(l.saved) != len(h.st.Manifests) {
		return false
	}
	if l.size > max(l.base/2, stateLogMin) {
		return false
	}
	d := stateDelta{Gen: l.gen, Seq: h.st.Seq, Ack: h.st.Ack, Reset: h.st.Reset, Skipped: h.st.Skipped, Dirs: l.delta(h.st.Manifests)}
	rec, err := frameRecord(&d)
	if err != nil {
		return false
	}
	if ok, torn := appendRecord(h.logPath(), l.size, rec, durable); !ok {
		if torn {
			// What was appended may be torn: the next load stops before
			// it, and the whole state written now replaces base and log.
			l.size = -1
		}
		return false
	}
	l.size += int64(len(rec))
	for i, dd := range d.Dirs {
		dd.apply(l.saved[i])
	}
	l.dirty, l.all = nil, nil
	h.sig = h.stateSig()
	return true
}

// saveWhole writes the whole state as a new base of a new generation, and
// removes the log.
func (h *Host) saveWhole() error {
	var gen [8]byte
	for binary.LittleEndian.Uint64(gen[:]) == 0 {
		rand.Read(gen[:])
	}
	h.st.Gen = binary.LittleEndian.Uint64(gen[:])
	tmp := h.statePath() + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	err = gob.NewEncoder(f).Encode(&h.st)
	if err == nil {
		err = f.Sync()
	}
	var size int64
	if fi, serr := f.Stat(); serr == nil {
		size = fi.Size()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("save sync state: %w", err)
	}
	if err := os.Rename(tmp, h.statePath()); err != nil {
		return err
	}
	// The old log's records name the old generation: a log that cannot be
	// removed is skipped by the next load, and appended to by no one.
	rmErr := os.Remove(h.logPath())
	h.log = stateLog{gen: h.st.Gen, base: size}
	if rmErr != nil && !errors.Is(rmErr, fs.ErrNotExist) {
		h.log.gen = 0
	}
	// The copy the next save compares with: a watching process changes
	// its manifests in place; one that does not replaces them with each
	// round's scan, and keeps the ones it saved.
	h.log.saved = make([]Manifest, len(h.st.Manifests))
	for i, m := range h.st.Manifests {
		if m == nil {
			m = Manifest{}
			h.st.Manifests[i] = m
		}
		if h.watching() {
			m = maps.Clone(m)
		}
		h.log.saved[i] = m
	}
	h.sig = h.stateSig()
	return nil
}

// loadLog follows load's read of the base (base bytes, as read): the log's
// records of its generation are applied, and the log's size noted. The manifests loaded
// are the copy the next save compares with until something changes them
// in place (a process that does not watch replaces them with its scans;
// Watch and the places that change them in place drop the copy).
func (h *Host) loadLog(base int64) error {
	h.log = stateLog{gen: h.st.Gen, base: base}
	if h.st.Gen == 0 {
		return nil
	}
	for i := range h.st.Manifests {
		if h.st.Manifests[i] == nil {
			h.st.Manifests[i] = Manifest{}
		}
	}
	n, err := readLog(h.logPath(), h.st.Gen, &h.st)
	if err != nil {
		return fmt.Errorf("read sync state log: %w", err)
	}
	h.log.size = n
	h.log.saved = append([]Manifest(nil), h.st.Manifests...)
	return nil
}
