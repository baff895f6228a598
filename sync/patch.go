package sync

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"
	gosync "sync"
	"time"
)

// A patch is a tar stream (PAX format) of the changes of one tree: regular
// files with their content, directories, symlinks, and deletions (an empty
// regular entry with the PAX record SBX.deleted=1). Entries are in Diff's
// order: parents before children, deletions last.

// Limits bound what a patch reader accepts from the other side. The host
// reads the sandbox's pull with PullLimits; the sandbox reads the host's push
// with DefaultLimits.
type Limits struct {
	// MaxEntries bounds the entries of one patch.
	MaxEntries int
	// MaxFileSize bounds one file's content.
	MaxFileSize int64
	// MaxTotal bounds the content bytes of one patch, or of all the patches
	// read with the same Total.
	MaxTotal int64
	// MaxNameBytes bounds the bytes of the paths and symlink targets of one
	// patch: the reader keeps every path it has seen, to refuse duplicates.
	MaxNameBytes int64
	// Total, when set, counts content bytes across the patches read with
	// these limits (one pull's patches, one per code dir), against MaxTotal.
	Total *int64
}

// Bounds of one path in a patch: Linux's PATH_MAX and NAME_MAX. A longer one
// could not be opened in one system call on the other side anyway.
const (
	MaxPathBytes = 4096
	MaxNameLen   = 255
)

// DefaultLimits are generous for source trees and still bounded.
var DefaultLimits = Limits{MaxEntries: 4 << 20, MaxFileSize: 16 << 30, MaxTotal: 256 << 30, MaxNameBytes: 1 << 30}

// MaxPullEntries bounds the entries of one code dir's pull: the host holds
// each path of a pull in memory while it checks it (within MaxPullNameBytes).
const (
	MaxPullEntries   = 1 << 20
	MaxPullNameBytes = 256 << 20
)

// PullLimits are the limits of one pull, the sandbox's changes coming back
// to the host: disk bytes of content in all (the disk limit; 0 is none),
// no file larger than that, MaxPullEntries entries and MaxPullNameBytes of
// names per code dir.
func PullLimits(disk int64) Limits {
	l := Limits{MaxEntries: MaxPullEntries, MaxFileSize: DefaultLimits.MaxFileSize, MaxTotal: 1 << 62, MaxNameBytes: MaxPullNameBytes}
	if disk > 0 {
		l.MaxTotal = disk
		l.MaxFileSize = min(l.MaxFileSize, disk)
	}
	return l
}

// SizeError is a patch refused for the bytes it carries: at least AtLeast,
// over Limit. A *PatchError wraps it.
type SizeError struct {
	Limit, AtLeast int64
	File           bool // one file is over the limit, not the total
}

func (e *SizeError) Error() string {
	if e.File {
		return fmt.Sprintf("a file of %d bytes is over the %d-byte limit", e.AtLeast, e.Limit)
	}
	return fmt.Sprintf("the patch is over %d bytes (at least %d)", e.Limit, e.AtLeast)
}

// SetDiskLimit bounds what one pull may bring back: disk bytes in all (0: no
// limit). A pull over it is refused whole, before anything of it is spooled
// past the entry that crossed the limit or applied.
func (h *Host) SetDiskLimit(disk int64) { h.disk = disk }

// Refuse drops the pull spooled by ReadPull: Finish then applies nothing of
// it, and the sandbox sends it again with the next round trip.
func (r *Round) Refuse() {
	r.h.spoolMaybe = true // whatever this process knew: it is to go
	r.h.removeSpool()
	r.spooled = false
}

// pullLimits are the limits of one pull, its patches sharing one total.
func (h *Host) pullLimits() Limits {
	l := PullLimits(h.disk)
	l.Total = new(int64)
	return l
}

const paxDeleted = "SBX.deleted"

// WritePatch writes changes as a patch, reading contents from the tree at
// root. A file that vanished since the scan is sent as deleted; one that
// changed size is sent as it was when opened (the next sync sends the rest).
func WritePatch(w io.Writer, root string, changes []Change) error {
	return writePatch(w, root, changes, nil)
}

// packHashes collects, for the paths in want (a scan's Deferred), the hash
// of the content a push sent for each: what the sandbox then has, and what
// the host's manifest records for it (Round.Finish). The goroutine that
// streams the push fills it while the round's owner may read it.
type packHashes struct {
	want map[string]bool
	mu   gosync.Mutex
	got  map[string]string
}

func (ph *packHashes) wants(p string) bool { return ph != nil && ph.want[p] }

func (ph *packHashes) put(p, h string) {
	ph.mu.Lock()
	if ph.got == nil {
		ph.got = map[string]string{}
	}
	ph.got[p] = h
	ph.mu.Unlock()
}

// take returns the hash sent for p, if the push sent p whole.
func (ph *packHashes) take(p string) (string, bool) {
	ph.mu.Lock()
	defer ph.mu.Unlock()
	h, ok := ph.got[p]
	return h, ok
}

// hashString is how a manifest writes a content hash.
func hashString(h hash.Hash) string { return hex.EncodeToString(h.Sum(nil)[:16]) }

func writePatch(w io.Writer, root string, changes []Change, ph *packHashes) error {
	r, err := os.OpenRoot(root)
	if err != nil {
		return err
	}
	defer r.Close()
	tw := tar.NewWriter(w)
	dirs := &dirRoots{base: r, m: map[string]*os.Root{}}
	defer dirs.close()
	for _, c := range changes {
		if err := writeEntry(tw, r, dirs, c, ph); err != nil {
			return fmt.Errorf("send %s: %w", c.Path, err)
		}
	}
	return tw.Close()
}

func deletedHeader(p string) *tar.Header {
	return &tar.Header{Name: p, Typeflag: tar.TypeReg, Mode: 0o600, Format: tar.FormatPAX,
		PAXRecords: map[string]string{paxDeleted: "1"}}
}

// writeEntry writes c's entry; for a regular file that ph wants, it
// records the hash of the content sent (its padding too, if it shrank).
func writeEntry(tw *tar.Writer, r *os.Root, dirs *dirRoots, c Change, ph *packHashes) error {
	if c.Deleted {
		return tw.WriteHeader(deletedHeader(c.Path))
	}
	e := c.Entry
	h := &tar.Header{Name: c.Path, Mode: int64(e.Mode.Perm()), Format: tar.FormatPAX, ModTime: time.Unix(0, e.MTime)}
	switch {
	case e.Mode.IsDir():
		h.Typeflag = tar.TypeDir
		h.ModTime = time.Time{}
		return tw.WriteHeader(h)
	case e.isLink():
		h.Typeflag, h.Linkname, h.ModTime = tar.TypeSymlink, e.Link, time.Time{}
		return tw.WriteHeader(h)
	}
	if !ph.wants(c.Path) {
		return writeFile(tw, tw, r, dirs, c.Path, h)
	}
	sum := sha256.New()
	err := writeFile(tw, io.MultiWriter(tw, sum), r, dirs, c.Path, h)
	if err == nil && h.Typeflag == tar.TypeReg {
		ph.put(c.Path, hashString(sum))
	}
	return err
}

// writeFile writes the entry of the regular file p: its header h, filled
// in from the open file, through tw, and its content through out (tw, or
// tw and a hash). One that is gone or no longer a regular file is sent as
// deleted, and h is left as it was.
func writeFile(tw *tar.Writer, out io.Writer, r *os.Root, dirs *dirRoots, p string, h *tar.Header) error {
	if dirs != nil {
		if handled, err := packFileAt(tw, out, dirs, p, h); handled {
			return err
		}
	}
	f, err := r.OpenFile(p, os.O_RDONLY|noFollow|noWait, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return tw.WriteHeader(deletedHeader(p))
	}
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return tw.WriteHeader(deletedHeader(p))
	}
	h.Typeflag, h.Size, h.ModTime = tar.TypeReg, fi.Size(), fi.ModTime()
	h.Mode = int64(fi.Mode().Perm())
	if err := tw.WriteHeader(h); err != nil {
		return err
	}
	// Through a pooled buffer: io.CopyN from an os.File takes its WriteTo,
	// which makes a new 32 KiB buffer for each file packed.
	buf := copyBufs.Get().(*[]byte)
	n, err := io.CopyBuffer(writerOnly{out}, readerOnly{io.LimitReader(f, fi.Size())}, *buf)
	copyBufs.Put(buf)
	if err == nil && n < fi.Size() {
		err = io.EOF
	}
	if err != nil && errors.Is(err, io.EOF) {
		// Shrunk while we read: pad; the next sync sends the file again.
		_, err = io.CopyN(out, zeroReader{}, fi.Size()-n)
	}
	return err
}

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// Item is one entry of a patch, as ReadPatch hands it over.
type Item struct {
	Path    string
	Deleted bool
	Entry   Entry // Mode, Size, MTime (files), Link (symlinks)
	// Body reads a file's content; valid until the callback returns.
	Body io.Reader
}

// PatchError is a patch refused as a whole: what was wrong, and where.
type PatchError struct {
	Path   string
	Reason string
	Err    error // a *SizeError, for a patch over a size limit
}

func (e *PatchError) Unwrap() error { return e.Err }

func (e *PatchError) Error() string {
	if e.Path == "" {
		return "patch refused: " + e.Reason
	}
	return fmt.Sprintf("patch refused: %q: %s", e.Path, e.Reason)
}

// ReadPatch reads one patch from r and calls fn for each item in order. It
// checks every entry before handing it over: a path that is not clean and
// relative, a type other than file, directory or symlink, a duplicate, an
// entry or a total over the limits, is a *PatchError, and fn sees nothing
// from that entry on. ReadPatch stops at the patch's end marker without
// reading past it, so patches can follow each other on one stream.
func ReadPatch(r io.Reader, lim Limits, fn func(*Item) error) error {
	tr := tar.NewReader(r)
	seen := map[string]bool{}
	total := lim.Total
	if total == nil {
		total = new(int64)
	}
	var names int64
	for n := 0; ; n++ {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return &PatchError{Reason: "bad tar stream: " + err.Error()}
		}
		if n >= lim.MaxEntries {
			return &PatchError{Reason: fmt.Sprintf("more than %d entries", lim.MaxEntries)}
		}
		it, err := checkHeader(h, lim)
		if err != nil {
			return err
		}
		if seen[it.Path] {
			return &PatchError{Path: it.Path, Reason: "appears twice"}
		}
		if names += int64(len(h.Name) + len(h.Linkname)); names > lim.MaxNameBytes {
			return &PatchError{Path: it.Path, Reason: fmt.Sprintf("its paths and link targets are over %d bytes", lim.MaxNameBytes)}
		}
		seen[it.Path] = true
		*total += h.Size
		if *total > lim.MaxTotal {
			se := &SizeError{Limit: lim.MaxTotal, AtLeast: *total}
			return &PatchError{Path: it.Path, Reason: se.Error(), Err: se}
		}
		it.Body = tr
		if err := fn(it); err != nil {
			return err
		}
	}
}

func checkHeader(h *tar.Header, lim Limits) (*Item, error) {
	if err := CheckPath(h.Name); err != nil {
		return nil, &PatchError{Path: h.Name, Reason: err.Error()}
	}
	if err := checkPathLength(h.Name); err != nil {
		return nil, &PatchError{Path: cut(h.Name, 200), Reason: err.Error()}
	}
	it := &Item{Path: h.Name}
	if h.Mode < 0 || h.Mode > 0o7777 {
		return nil, &PatchError{Path: h.Name, Reason: "bad mode " + strconv.FormatInt(h.Mode, 8)}
	}
	perm := fs.FileMode(h.Mode) & fs.ModePerm // setuid, setgid and sticky bits never travel
	if h.PAXRecords[paxDeleted] == "1" {
		if h.Typeflag != tar.TypeReg || h.Size != 0 {
			return nil, &PatchError{Path: h.Name, Reason: "a deletion with content"}
		}
		it.Deleted = true
		return it, nil
	}
	switch h.Typeflag {
	case tar.TypeReg:
		if h.Size < 0 {
			return nil, &PatchError{Path: h.Name, Reason: fmt.Sprintf("file of %d bytes", h.Size)}
		}
		if h.Size > lim.MaxFileSize {
			se := &SizeError{Limit: lim.MaxFileSize, AtLeast: h.Size, File: true}
			return nil, &PatchError{Path: h.Name, Reason: se.Error(), Err: se}
		}
		it.Entry = Entry{Mode: perm, Size: h.Size, MTime: h.ModTime.UnixNano()}
	case tar.TypeDir:
		if h.Size != 0 {
			return nil, &PatchError{Path: h.Name, Reason: "a directory with content"}
		}
		it.Entry = Entry{Mode: fs.ModeDir | perm}
	case tar.TypeSymlink:
		if h.Linkname == "" || len(h.Linkname) > 4096 {
			return nil, &PatchError{Path: h.Name, Reason: "symlink with an empty or overlong target"}
		}
		for _, c := range []byte(h.Linkname) {
			if c == 0 {
				return nil, &PatchError{Path: h.Name, Reason: "symlink target with a NUL byte"}
			}
		}
		it.Entry = Entry{Mode: fs.ModeSymlink | 0o777, Link: h.Linkname}
	default:
		return nil, &PatchError{Path: h.Name, Reason: fmt.Sprintf("entry type %q is never synced (only files, directories and symlinks)", h.Typeflag)}
	}
	return it, nil
}

// MaxPadding bounds the zeros ExpectEnd accepts after the last patch (a tar
// writer pads to its record size, 10240 bytes by default).
const MaxPadding = 64 << 10

// cut shortens s to n bytes and says so.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// checkPathLength refuses a path over MaxPathBytes or with an element over
// MaxNameLen bytes.
func checkPathLength(p string) error {
	if len(p) > MaxPathBytes {
		return fmt.Errorf("a path of %d bytes is over the %d-byte limit (PATH_MAX)", len(p), MaxPathBytes)
	}
	for el := range strings.SplitSeq(p, "/") {
		if len(el) > MaxNameLen {
			return fmt.Errorf("a name of %d bytes is over the %d-byte limit (NAME_MAX)", len(el), MaxNameLen)
		}
	}
	return nil
}

// endBuffers are ExpectEnd's read buffers.
var endBuffers = gosync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// ExpectEnd checks that nothing but tar padding follows the last patch.
// It reads at most MaxPadding bytes: zeros without end are trailing data
// too (the host spools what it reads).
func ExpectEnd(r io.Reader) error {
	// A round trip's stream usually ends at once: a buffer kept from
	// round to round instead of 32 KiB made and cleared at each (twice a
	// command: the host's pull, the sandbox's push).
	p := endBuffers.Get().(*[]byte)
	defer endBuffers.Put(p)
	buf := *p
	var read int64
	for {
		n, err := r.Read(buf)
		for _, b := range buf[:n] {
			if b != 0 {
				return &PatchError{Reason: "trailing data after the last patch"}
			}
		}
		if read += int64(n); read > MaxPadding {
			return &PatchError{Reason: fmt.Sprintf("over %d bytes of padding after the last patch", MaxPadding)}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return &PatchError{Reason: "reading the end of the stream: " + err.Error()}
		}
	}
}
