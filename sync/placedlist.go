package sync

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"sort"
)

// The placed list: what the host wrote into a new local sandbox's
// workspace (Round.Place), entry by entry as the sandbox side's scan would
// record it, sent on the push stream right after the code dir's (empty)
// patch. The helper takes it for its manifest instead of scanning the
// workspace: nothing of the sandbox has run there yet, so the tree is what
// the host made, and the host stat'ed each file it wrote (its inode and
// change time are the sandbox's, on the same file system). A later full
// scan (the periodic verification, any fallback) compares the tree with it
// as with any manifest.
//
// Format: an 8-byte big-endian length, then that many bytes: a uvarint
// count, then per entry a uvarint path length and the path, a uvarint
// mode (fs.FileMode), varints size, mtime and ctime, a uvarint inode, and a
// uvarint link length and the link. The reader takes exactly the length's
// bytes and nothing past them (a stream's next part follows).

// maxPlacedList bounds a placed list's bytes: the entries of one patch,
// at most 48 bytes of numbers each, and the names' bytes twice (paths and
// link targets).
var maxPlacedList = int64(DefaultLimits.MaxEntries)*48 + 2*DefaultLimits.MaxNameBytes

// writePlacedList writes m in the placed list format.
func writePlacedList(w io.Writer, m Manifest) error {
	paths := make([]string, 0, len(m))
	for p := range m {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	buf := make([]byte, 8, 8+len(m)*48)
	buf = binary.AppendUvarint(buf, uint64(len(paths)))
	for _, p := range paths {
		e := m[p]
		buf = binary.AppendUvarint(buf, uint64(len(p)))
		buf = append(buf, p...)
		buf = binary.AppendUvarint(buf, uint64(e.Mode))
		buf = binary.AppendVarint(buf, e.Size)
		buf = binary.AppendVarint(buf, e.MTime)
		buf = binary.AppendVarint(buf, e.CTime)
		buf = binary.AppendUvarint(buf, e.Ino)
		buf = binary.AppendUvarint(buf, uint64(len(e.Link)))
		buf = append(buf, e.Link...)
	}
	if int64(len(buf)-8) > maxPlacedList {
		return fmt.Errorf("placed list of %d entries: %d bytes, over %d", len(paths), len(buf)-8, maxPlacedList)
	}
	binary.BigEndian.PutUint64(buf[:8], uint64(len(buf)-8))
	_, err := w.Write(buf)
	return err
}

var errPlacedList = errors.New("bad placed list")

// readPlacedList reads one placed list from r, exactly its bytes. Every
// path is clean, relative and below the root, listed once, after its
// directory; only directories, regular files and symlinks are listed.
func readPlacedList(r io.Reader) (Manifest, error) {
	var hdr [8]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, fmt.Errorf("%w: its length: %v", errPlacedList, err)
	}
	n := binary.BigEndian.Uint64(hdr[:])
	if n > uint64(maxPlacedList) {
		return nil, fmt.Errorf("%w: %d bytes, over %d", errPlacedList, n, maxPlacedList)
	}
	// Read as it comes (not sized by the length first): a short stream
	// costs what it holds.
	buf, err := io.ReadAll(io.LimitReader(r, int64(n)))
	if err != nil || uint64(len(buf)) != n {
		return nil, fmt.Errorf("%w: %d of its %d bytes (%v)", errPlacedList, len(buf), n, err)
	}
	uv := func() (uint64, error) {
		v, k := binary.Uvarint(buf)
		if k <= 0 {
			return 0, errPlacedList
		}
		buf = buf[k:]
		return v, nil
	}
	sv := func() (int64, error) {
		v, k := binary.Varint(buf)
		if k <= 0 {
			return 0, errPlacedList
		}
		buf = buf[k:]
		return v, nil
	}
	bytesOf := func(max int) (string, error) {
		l, err := uv()
		if err != nil || l > uint64(max) || l > uint64(len(buf)) {
			return "", errPlacedList
		}
		s := string(buf[:l])
		buf = buf[l:]
		return s, nil
	}
	count, err := uv()
	if err != nil || count > uint64(DefaultLimits.MaxEntries) {
		return nil, fmt.Errorf("%w: its count", errPlacedList)
	}
	m := make(Manifest, count)
	for i := uint64(0); i < count; i++ {
		p, err := bytesOf(MaxPathBytes)
		if err != nil || p == "" || p == "." || path.Clean(p) != p || path.IsAbs(p) || p == ".." || len(p) >= 3 && p[:3] == "../" {
			return nil, fmt.Errorf("%w: entry %d: its path %q", errPlacedList, i, p)
		}
		if _, dup := m[p]; dup {
			return nil, fmt.Errorf("%w: %q listed twice", errPlacedList, p)
		}
		if d := path.Dir(p); d != "." && !m[d].Mode.IsDir() {
			return nil, fmt.Errorf("%w: %q listed before its directory", errPlacedList, p)
		}
		var e Entry
		mode, err1 := uv()
		size, err2 := sv()
		mt, err3 := sv()
		ct, err4 := sv()
		ino, err5 := uv()
		link, err6 := bytesOf(MaxPathBytes)
		if err := errors.Join(err1, err2, err3, err4, err5, err6); err != nil {
			return nil, fmt.Errorf("%w: entry %q", errPlacedList, p)
		}
		e.Mode, e.Size, e.MTime, e.CTime, e.Ino, e.Link = fs.FileMode(mode), size, mt, ct, ino, link
		if mode > uint64(^uint32(0)) || e.Mode&^(fs.ModeType|fs.ModePerm) != 0 {
			return nil, fmt.Errorf("%w: entry %q: mode %v", errPlacedList, p, e.Mode)
		}
		switch e.Mode.Type() {
		case fs.ModeDir, 0:
			if link != "" {
				return nil, fmt.Errorf("%w: entry %q: a link target for a %v", errPlacedList, p, e.Mode.Type())
			}
		case fs.ModeSymlink:
			if link == "" {
				return nil, fmt.Errorf("%w: entry %q: a symlink without a target", errPlacedList, p)
			}
		default:
			return nil, fmt.Errorf("%w: entry %q: type %v", errPlacedList, p, e.Mode.Type())
		}
		m[p] = e
	}
	if len(buf) != 0 {
		return nil, fmt.Errorf("%w: %d bytes past its last entry", errPlacedList, len(buf))
	}
	return m, nil
}
