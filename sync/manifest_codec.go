package sync

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math"
)

// A manifest in the state files (the host's sync.state, the helper's) is
// written by GobEncode below, not by gob's reflection: a round trip that
// changes something saves the whole manifest, and for a tree of 100k files
// gob's map encoding took about 150 ms of the sandbox's CPU and 70 ms of
// the host's in a round that moved 1,000 files, its decoding most of a
// process's start without the host daemon.
//
// The encoding: a version byte (manifestCodecVersion), the entry count
// (uvarint), then per entry: its path (uvarint length, bytes), its mode
// (uvarint), a byte of flags saying which of the other fields follow, and
// those fields in Entry's order: Size, MTime, CTime (varints), Ino
// (uvarint), Link and Hash (uvarint length, bytes). Verified is a flag.
// Paths are not checked here: what reads a state checks what it uses, as
// it did with gob.

const manifestCodecVersion = 1

const (
	flagSize = 1 << iota
	flagMTime
	flagCTime
	flagIno
	flagLink
	flagHash
	flagVerified
)

// GobEncode writes m in the encoding above.
func (m Manifest) GobEncode() ([]byte, error) {
	n := 1 + binary.MaxVarintLen64
	for p, e := range m {
		n += len(p) + len(e.Link) + len(e.Hash) + 16
	}
	b := make([]byte, 0, n)
	b = append(b, manifestCodecVersion)
	b = binary.AppendUvarint(b, uint64(len(m)))
	for p, e := range m {
		b = binary.AppendUvarint(b, uint64(len(p)))
		b = append(b, p...)
		b = binary.AppendUvarint(b, uint64(e.Mode))
		var f byte
		if e.Size != 0 {
			f |= flagSize
		}
		if e.MTime != 0 {
			f |= flagMTime
		}
		if e.CTime != 0 {
			f |= flagCTime
		}
		if e.Ino != 0 {
			f |= flagIno
		}
		if e.Link != "" {
			f |= flagLink
		}
		if e.Hash != "" {
			f |= flagHash
		}
		if e.Verified {
			f |= flagVerified
		}
		b = append(b, f)
		if f&flagSize != 0 {
			b = binary.AppendVarint(b, e.Size)
		}
		if f&flagMTime != 0 {
			b = binary.AppendVarint(b, e.MTime)
		}
		if f&flagCTime != 0 {
			b = binary.AppendVarint(b, e.CTime)
		}
		if f&flagIno != 0 {
			b = binary.AppendUvarint(b, e.Ino)
		}
		if f&flagLink != 0 {
			b = binary.AppendUvarint(b, uint64(len(e.Link)))
			b = append(b, e.Link...)
		}
		if f&flagHash != 0 {
			b = binary.AppendUvarint(b, uint64(len(e.Hash)))
			b = append(b, e.Hash...)
		}
	}
	return b, nil
}

var errManifestCodec = errors.New("malformed manifest in the sync state")

// minEntryBytes is the fewest bytes an entry takes (a path length, a mode,
// the flags): the count is checked against what is there before anything
// is allocated for it.
const minEntryBytes = 3

// GobDecode reads a manifest GobEncode wrote; anything else is an error,
// never a panic or an allocation past the input's size.
func (m *Manifest) GobDecode(data []byte) error {
	if len(data) == 0 || data[0] != manifestCodecVersion {
		return fmt.Errorf("%w: unknown version", errManifestCodec)
	}
	// One string holds every path, link and hash: each is a substring of
	// it, not an allocation of its own.
	s := string(data[1:])
	d := manifestDecoder{s: s}
	count := d.uvarint()
	if d.err != nil || count > uint64(len(s)/minEntryBytes) {
		return fmt.Errorf("%w: bad entry count", errManifestCodec)
	}
	out := make(Manifest, count)
	for range count {
		p := d.str()
		mode := d.uvarint()
		if mode > math.MaxUint32 {
			d.fail()
		}
		f := d.byte()
		var e Entry
		e.Mode = fs.FileMode(mode)
		if f&^(flagSize|flagMTime|flagCTime|flagIno|flagLink|flagHash|flagVerified) != 0 {
			d.fail()
		}
		if f&flagSize != 0 {
			e.Size = d.varint()
		}
		if f&flagMTime != 0 {
			e.MTime = d.varint()
		}
		if f&flagCTime != 0 {
			e.CTime = d.varint()
		}
		if f&flagIno != 0 {
			e.Ino = d.uvarint()
		}
		if f&flagLink != 0 {
			e.Link = d.str()
		}
		if f&flagHash != 0 {
			e.Hash = d.str()
		}
		e.Verified = f&flagVerified != 0
		if d.err != nil {
			return d.err
		}
		if _, dup := out[p]; dup {
			return fmt.Errorf("%w: path %q twice", errManifestCodec, p)
		}
		out[p] = e
	}
	if d.i != len(s) {
		return fmt.Errorf("%w: %d bytes after the last entry", errManifestCodec, len(s)-d.i)
	}
	*m = out
	return nil
}

type manifestDecoder struct {
	s   string
	i   int
	err error
}

func (d *manifestDecoder) fail() {
	if d.err == nil {
		d.err = fmt.Errorf("%w: truncated or bad field at byte %d", errManifestCodec, d.i+1)
	}
	d.i = len(d.s)
}

func (d *manifestDecoder) uvarint() uint64 {
	var x uint64
	var shift uint
	for n := 0; ; n++ {
		if d.i >= len(d.s) || n == binary.MaxVarintLen64 {
			d.fail()
			return 0
		}
		c := d.s[d.i]
		d.i++
		if c < 0x80 {
			if n == binary.MaxVarintLen64-1 && c > 1 {
				d.fail()
				return 0
			}
			return x | uint64(c)<<shift
		}
		x |= uint64(c&0x7f) << shift
		shift += 7
	}
}

func (d *manifestDecoder) varint() int64 {
	ux := d.uvarint()
	x := int64(ux >> 1)
	if ux&1 != 0 {
		x = ^x
	}
	return x
}

func (d *manifestDecoder) byte() byte {
	if d.i >= len(d.s) {
		d.fail()
		return 0
	}
	c := d.s[d.i]
	d.i++
	return c
}

func (d *manifestDecoder) str() string {
	n := d.uvarint()
	if d.err != nil || n > uint64(len(d.s)-d.i) {
		d.fail()
		return ""
	}
	v := d.s[d.i : d.i+int(n)]
	d.i += int(n)
	return v
}
