package sync

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"time"
)

// A patch is a tar stream (PAX format) of the changes of one tree: regular
// files with their content, directories, symlinks, and deletions (an empty
// regular entry with the PAX record SBX.deleted=1). Entries are in Diff's
// order: parents before children, deletions last.

// Limits bound what a patch reader accepts from the other side.
type Limits struct {
	MaxEntries  int
	MaxFileSize int64
	MaxTotal    int64
}

// DefaultLimits are generous for source trees and still bounded.
var DefaultLimits = Limits{MaxEntries: 4 << 20, MaxFileSize: 16 << 30, MaxTotal: 256 << 30}

const paxDeleted = "SBX.deleted"

// WritePatch writes changes as a patch, reading contents from the tree at
// root. A file that vanished since the scan is sent as deleted; one that
// changed size is sent as it was when opened (the next sync sends the rest).
func WritePatch(w io.Writer, root string, changes []Change) error {
	r, err := os.OpenRoot(root)
	if err != nil {
		return err
	}
	defer r.Close()
	tw := tar.NewWriter(w)
	for _, c := range changes {
		if err := writeEntry(tw, r, c); err != nil {
			return fmt.Errorf("send %s: %w", c.Path, err)
		}
	}
	return tw.Close()
}

func deletedHeader(p string) *tar.Header {
	return &tar.Header{Name: p, Typeflag: tar.TypeReg, Mode: 0o600, Format: tar.FormatPAX,
		PAXRecords: map[string]string{paxDeleted: "1"}}
}

func writeEntry(tw *tar.Writer, r *os.Root, c Change) error {
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
	f, err := r.OpenFile(c.Path, os.O_RDONLY|noFollow, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return tw.WriteHeader(deletedHeader(c.Path))
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
		return tw.WriteHeader(deletedHeader(c.Path))
	}
	h.Typeflag, h.Size, h.ModTime = tar.TypeReg, fi.Size(), fi.ModTime()
	h.Mode = int64(fi.Mode().Perm())
	if err := tw.WriteHeader(h); err != nil {
		return err
	}
	n, err := io.CopyN(tw, f, fi.Size())
	if err != nil && errors.Is(err, io.EOF) {
		// Shrunk while we read: pad; the next sync sends the file again.
		_, err = io.CopyN(tw, zeroReader{}, fi.Size()-n)
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
}

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
	var total int64
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
		seen[it.Path] = true
		total += h.Size
		if total > lim.MaxTotal {
			return &PatchError{Path: it.Path, Reason: fmt.Sprintf("patch is over %d bytes", lim.MaxTotal)}
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
		if h.Size < 0 || h.Size > lim.MaxFileSize {
			return nil, &PatchError{Path: h.Name, Reason: fmt.Sprintf("file of %d bytes is over the %d-byte limit", h.Size, lim.MaxFileSize)}
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

// ExpectEnd checks that nothing but tar padding follows the last patch.
func ExpectEnd(r io.Reader) error {
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		for _, b := range buf[:n] {
			if b != 0 {
				return &PatchError{Reason: "trailing data after the last patch"}
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return &PatchError{Reason: "reading the end of the stream: " + err.Error()}
		}
	}
}
