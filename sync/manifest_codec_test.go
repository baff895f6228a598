package sync

import (
	"bytes"
	"encoding/binary"
	"encoding/gob"
	"io/fs"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"
)

// randomManifest makes n entries with every field's edge values.
func randomManifest(rng *rand.Rand, n int) Manifest {
	m := Manifest{}
	edges := []int64{0, 1, -1, math.MaxInt64, math.MinInt64, 1 << 62, 1764720000123456789}
	pick := func() int64 {
		if rng.Intn(3) == 0 {
			return edges[rng.Intn(len(edges))]
		}
		return rng.Int63() - rng.Int63()
	}
	for i := range n {
		e := Entry{Mode: fs.FileMode(rng.Uint32())}
		if rng.Intn(2) == 0 {
			e.Size, e.MTime, e.CTime = pick(), pick(), pick()
		}
		if rng.Intn(2) == 0 {
			e.Ino = rng.Uint64()
		}
		if rng.Intn(4) == 0 {
			e.Link = "../t" + strconv.Itoa(i)
		}
		if rng.Intn(3) == 0 {
			e.Hash = strconv.FormatUint(rng.Uint64(), 16)
			e.Verified = rng.Intn(2) == 0
		}
		m["d"+strconv.Itoa(i%7)+"/f\x00é"+strconv.Itoa(i)] = e
	}
	return m
}

// A manifest comes back from GobEncode and GobDecode as it was, alone
// and inside the states that hold it (through gob, as they are saved).
func TestManifestCodecRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for _, n := range []int{0, 1, 2, 100, 5000} {
		m := randomManifest(rng, n)
		b, err := m.GobEncode()
		if err != nil {
			t.Fatal(err)
		}
		var back Manifest
		if err := back.GobDecode(b); err != nil {
			t.Fatalf("%d entries: %v", n, err)
		}
		if !reflect.DeepEqual(map[string]Entry(back), map[string]Entry(m)) {
			t.Fatalf("%d entries: the manifest changed on its way", n)
		}
		st := hostState{Manifests: []Manifest{m, {}}, Seq: 7, Ack: 6}
		var buf bytes.Buffer
		if err := gob.NewEncoder(&buf).Encode(&st); err != nil {
			t.Fatal(err)
		}
		var st2 hostState
		if err := gob.NewDecoder(&buf).Decode(&st2); err != nil {
			t.Fatal(err)
		}
		if len(st2.Manifests) != 2 || st2.Seq != 7 || !reflect.DeepEqual(map[string]Entry(st2.Manifests[0]), map[string]Entry(m)) || len(st2.Manifests[1]) != 0 {
			t.Fatalf("%d entries: the host state changed on its way", n)
		}
	}
}

// State files written before the manifests had their own encoding are
// read as they were: the host's and the helper's.
func TestLegacyStatesRead(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	m := randomManifest(rng, 300)
	dir := t.TempDir()
	var buf bytes.Buffer
	if err := gob.NewEncoder(&buf).Encode(&legacyHostState{Manifests: []legacyManifest{legacyManifest(m)}, Seq: 9, Ack: 8}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "sync.state"), buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	h, err := OpenHost(dir, []HostDir{{Path: t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	if h.st.Reset || h.st.Seq != 9 || h.st.Ack != 8 || !reflect.DeepEqual(map[string]Entry(h.st.Manifests[0]), map[string]Entry(m)) {
		t.Fatalf("the host's state in the older format: reset %v, seq %d, %d entries", h.st.Reset, h.st.Seq, len(h.st.Manifests[0]))
	}

	buf.Reset()
	old := struct {
		Manifest   legacyManifest
		Undo       Undo
		PendingSeq uint64
		Pending    legacyManifest
		Skipped    map[string]string
	}{Manifest: legacyManifest(m), Undo: Undo{"a": {Had: true, Entry: Entry{Size: 3}}}, PendingSeq: 4, Skipped: map[string]string{"x": "why"}}
	if err := gob.NewEncoder(&buf).Encode(&old); err != nil {
		t.Fatal(err)
	}
	st, ok := decodeHelperState(buf.Bytes())
	if !ok || st.PendingSeq != 4 || st.Undo["a"].Entry.Size != 3 || st.Skipped["x"] != "why" || !reflect.DeepEqual(map[string]Entry(st.Manifest), map[string]Entry(m)) {
		t.Fatalf("the helper's state in the older format: ok %v, %+v", ok, st.PendingSeq)
	}
	// And today's, through the same function.
	buf.Reset()
	if err := gob.NewEncoder(&buf).Encode(&helperState{Manifest: m, PendingSeq: 5}); err != nil {
		t.Fatal(err)
	}
	if st, ok := decodeHelperState(buf.Bytes()); !ok || st.PendingSeq != 5 || !reflect.DeepEqual(map[string]Entry(st.Manifest), map[string]Entry(m)) {
		t.Fatal("the helper's state in today's format")
	}
}

// refDecode is an independent reading of the encoding, on byte slices with
// encoding/binary's own varint readers: what it accepts, and what it reads,
// GobDecode must agree with.
func refDecode(b []byte) (map[string]Entry, bool) {
	if len(b) == 0 || b[0] != 1 {
		return nil, false
	}
	b = b[1:]
	uv := func() (uint64, bool) {
		x, n := binary.Uvarint(b)
		if n <= 0 {
			return 0, false
		}
		b = b[n:]
		return x, true
	}
	sv := func() (int64, bool) {
		x, n := binary.Varint(b)
		if n <= 0 {
			return 0, false
		}
		b = b[n:]
		return x, true
	}
	str := func() (string, bool) {
		n, ok := uv()
		if !ok || n > uint64(len(b)) {
			return "", false
		}
		s := string(b[:n])
		b = b[n:]
		return s, true
	}
	count, ok := uv()
	if !ok {
		return nil, false
	}
	out := map[string]Entry{}
	for i := uint64(0); i < count; i++ {
		p, ok := str()
		if !ok {
			return nil, false
		}
		mode, ok := uv()
		if !ok || mode > math.MaxUint32 || len(b) == 0 {
			return nil, false
		}
		f := b[0]
		b = b[1:]
		if f >= 1<<7 {
			return nil, false
		}
		e := Entry{Mode: fs.FileMode(mode), Verified: f&(1<<6) != 0}
		for bit, dst := range []*int64{&e.Size, &e.MTime, &e.CTime} {
			if f&(1<<bit) != 0 {
				if *dst, ok = sv(); !ok {
					return nil, false
				}
			}
		}
		if f&(1<<3) != 0 {
			if e.Ino, ok = uv(); !ok {
				return nil, false
			}
		}
		if f&(1<<4) != 0 {
			if e.Link, ok = str(); !ok {
				return nil, false
			}
		}
		if f&(1<<5) != 0 {
			if e.Hash, ok = str(); !ok {
				return nil, false
			}
		}
		if _, dup := out[p]; dup {
			return nil, false
		}
		out[p] = e
	}
	return out, len(b) == 0
}

// FuzzManifestDecode: whatever the bytes (a helper's state file is in the
// sandbox, where a command can write it), GobDecode does not panic, and it
// accepts exactly what the independent reading accepts, with the same
// entries.
func FuzzManifestDecode(f *testing.F) {
	rng := rand.New(rand.NewSource(3))
	for _, n := range []int{0, 1, 3, 20} {
		b, _ := randomManifest(rng, n).GobEncode()
		f.Add(b)
		if len(b) > 4 {
			f.Add(b[:len(b)-3])
		}
	}
	f.Add([]byte{1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f})
	f.Add([]byte{1, 2, 1, 'a', 0, 0, 1, 'a', 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		var m Manifest
		err := m.GobDecode(b)
		want, ok := refDecode(b)
		if (err == nil) != ok {
			t.Fatalf("GobDecode: %v; the reference reading accepts it: %v", err, ok)
		}
		if ok && !reflect.DeepEqual(map[string]Entry(m), want) {
			t.Fatalf("GobDecode read %v, the reference %v", m, want)
		}
		if ok {
			// What was accepted is written back to the same entries.
			again, _ := m.GobEncode()
			var m2 Manifest
			if err := m2.GobDecode(again); err != nil || !reflect.DeepEqual(map[string]Entry(m2), want) {
				t.Fatalf("re-encoded: %v", err)
			}
		}
	})
}

// BenchmarkManifestState: a 100k-entry manifest saved and loaded through
// gob, with the manifest's own encoding against gob's reflection.
func BenchmarkManifestState(b *testing.B) {
	rng := rand.New(rand.NewSource(4))
	m := Manifest{}
	for i := range 100000 {
		m["node_modules/dep"+strconv.Itoa(i/15)+"/lib/m"+strconv.Itoa(i)+".js"] = Entry{Mode: 0o644, Size: int64(1024 + rng.Intn(7<<10)), MTime: 1764720000123456789 + int64(i), CTime: 1764720000123456789 + int64(i), Ino: uint64(1e6 + i)}
	}
	for _, side := range []struct {
		name string
		v    func() any
		out  func() any
	}{
		{"codec", func() any { return &hostState{Manifests: []Manifest{m}} }, func() any { return &hostState{} }},
		{"gob-reflection", func() any { return &legacyHostState{Manifests: []legacyManifest{legacyManifest(m)}} }, func() any { return &legacyHostState{} }},
	} {
		var buf bytes.Buffer
		b.Run(side.name+"/encode", func(b *testing.B) {
			for range b.N {
				buf.Reset()
				if err := gob.NewEncoder(&buf).Encode(side.v()); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(buf.Len()), "bytes")
		})
		b.Run(side.name+"/decode", func(b *testing.B) {
			for range b.N {
				if err := gob.NewDecoder(bytes.NewReader(buf.Bytes())).Decode(side.out()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
