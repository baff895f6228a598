package sync

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"hash"
	"io"
	"io/fs"
	"os"
	"path"
	gosync "sync"
	"syscall"
	"time"
)

// writeItem applies one patch item under r, atomically for files (a
// temporary name in the same directory, then rename), and returns the entry
// of what is there now (for files with their content hash). It never follows
// a symlink: os.Root refuses any that would leave the tree, and the final
// element is replaced, not written through.
//
// With direct set, a file that does not exist yet is written in place (no
// temporary name): the sandbox side uses it, where nobody reads a file
// half written and speed matters (the first push of a large tree).
func writeItem(r *os.Root, it *Item, dst string, direct ...bool) (Entry, error) {
	if dst == "" {
		dst = it.Path
	}
	body := &countingReader{r: it.Body}
	if it.Body != nil {
		it.Body = body
	}
	e, err := writeItemOnce(r, it, dst, direct...)
	if err == nil || !errors.Is(err, fs.ErrPermission) || body.n > 0 {
		return e, err
	}
	// A directory made read-only (chmod 0555 in the sandbox; Go's module
	// cache copied into the tree), whose mode came first: its owner may
	// still create and remove in it once the owner's write bit is back, so
	// the bit is added for this item and taken away after. Retried only
	// when nothing of the item's body was read.
	restore, ok := ownerWritable(r, path.Dir(dst))
	if !ok {
		return e, err
	}
	defer restore()
	return writeItemOnce(r, it, dst, direct...)
}

// ownerWritable adds the owner's write bit to the directory dir under r
// when it lacks it, and returns what takes it away again; ok is false when
// there was nothing to add (or it could not be added): a refusal there has
// another cause.
func ownerWritable(r *os.Root, dir string) (restore func(), ok bool) {
	fi, err := r.Lstat(dir)
	if err != nil || !fi.IsDir() || fi.Mode().Perm()&0o200 != 0 {
		return nil, false
	}
	if r.Chmod(dir, fi.Mode().Perm()|0o200) != nil {
		return nil, false
	}
	return func() { r.Chmod(dir, fi.Mode().Perm()) }, true
}

// removeIn removes name from the directory dr is opened at; refused for
// permission in a directory made read-only (see writeItem), it tries again
// with the owner's write bit added for the removal.
func removeIn(dr *os.Root, name string) error {
	err := dr.Remove(name)
	if err == nil || !errors.Is(err, fs.ErrPermission) {
		return err
	}
	restore, ok := ownerWritable(dr, ".")
	if !ok {
		return err
	}
	defer restore()
	return dr.Remove(name)
}

// countingReader counts what was read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.n += int64(n)
	return n, err
}

func writeItemOnce(r *os.Root, it *Item, dst string, direct ...bool) (Entry, error) {
	cur, err := r.Lstat(dst)
	exists := err == nil
	if err != nil && !notExist(err) {
		return Entry{}, err
	}
	if it.Deleted {
		if exists {
			return Entry{}, r.RemoveAll(dst)
		}
		return Entry{}, nil
	}
	e := it.Entry
	switch {
	case e.Mode.IsDir():
		if exists && !cur.IsDir() {
			if err := r.Remove(dst); err != nil {
				return Entry{}, err
			}
			exists = false
		}
		if !exists {
			if err := r.Mkdir(dst, e.Mode.Perm()|0o700); err != nil {
				return Entry{}, err
			}
		}
		if err := r.Chmod(dst, e.Mode.Perm()); err != nil {
			return Entry{}, err
		}
		return Entry{Mode: fs.ModeDir | e.Mode.Perm()}, nil
	case e.isLink():
		tmp := tempName(dst)
		if err := r.Symlink(e.Link, tmp); err != nil {
			return Entry{}, err
		}
		if exists && cur.IsDir() {
			if err := r.RemoveAll(dst); err != nil {
				r.Remove(tmp)
				return Entry{}, err
			}
		}
		if err := r.Rename(tmp, dst); err != nil {
			r.Remove(tmp)
			return Entry{}, err
		}
		return Entry{Mode: fs.ModeSymlink | 0o777, Link: e.Link}, nil
	}
	tmp := tempName(dst)
	if !exists && len(direct) > 0 && direct[0] {
		tmp = dst
	}
	out, err := r.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|noFollow, 0o600)
	if err != nil {
		return Entry{}, err
	}
	// The content hash is only kept for a file whose mtime is recent (see
	// racyWindow); computing it for the others would be wasted.
	var h hash.Hash
	buf := copyBufs.Get().(*[]byte)
	if e.MTime >= time.Now().Add(-racyWindow).UnixNano() {
		h = sha256.New()
		_, err = io.CopyBuffer(io.MultiWriter(out, h), it.Body, *buf)
	} else {
		// Through the buffer, not os.File's ReadFrom: from a tar stream it
		// falls back to a copy with a new 32 KiB buffer for each file.
		_, err = io.CopyBuffer(writerOnly{out}, it.Body, *buf)
	}
	copyBufs.Put(buf)
	if err == nil {
		err = out.Chmod(e.Mode.Perm())
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		mt := time.Unix(0, e.MTime)
		err = r.Chtimes(tmp, mt, mt)
	}
	if err == nil && exists && cur.IsDir() {
		err = r.RemoveAll(dst)
	}
	if err == nil && tmp != dst {
		err = r.Rename(tmp, dst)
	}
	if err != nil {
		r.Remove(tmp)
		return Entry{}, err
	}
	fi, err := r.Lstat(dst)
	if err != nil {
		return Entry{}, err
	}
	ne, _ := entryOf(fi)
	if h != nil {
		ne.Hash = hashString(h)
	}
	return ne, nil
}

// copyBufs are the buffers writeItem copies contents through, reused from
// file to file (a push of many small files made one each).
var copyBufs = gosync.Pool{New: func() any { b := make([]byte, 64<<10); return &b }}

// writerOnly hides all but Write (io.CopyBuffer would use a ReaderFrom and
// not the buffer).
type writerOnly struct{ io.Writer }

// readerOnly hides all but Read (io.CopyBuffer would use a WriterTo, which
// for an os.File makes a buffer of its own).
type readerOnly struct{ io.Reader }

func tempName(p string) string {
	var b [6]byte
	rand.Read(b[:])
	return path.Join(path.Dir(p), ".sbx-tmp-"+hex.EncodeToString(b[:]))
}

// lstatEntry returns the entry of what is at p under r now, with a content
// hash for a regular file when withHash is set.
func lstatEntry(r *os.Root, p string, withHash bool) (Entry, bool, error) {
	fi, err := r.Lstat(p)
	if notExist(err) {
		return Entry{}, false, nil
	}
	if err != nil {
		return Entry{}, false, err
	}
	e, ok := entryOf(fi)
	if !ok {
		return Entry{}, false, nil
	}
	switch {
	case e.isLink():
		e.Link, err = r.Readlink(p)
	case e.Mode.IsRegular() && withHash:
		e.Hash, err = hashIn(r, p)
	}
	return e, true, err
}

func hashIn(r *os.Root, p string) (string, error) {
	f, err := r.OpenFile(p, os.O_RDONLY|noFollow|noWait, 0)
	if err != nil {
		return "", err
	}
	defer f.Close()
	if err := isRegular(f); err != nil {
		return "", err
	}
	return hashReader(f)
}

// isRegular refuses an open file that is not a regular file (a fifo or a
// directory where a regular file was when the scan looked).
func isRegular(f *os.File) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return &fs.PathError{Op: "read", Path: f.Name(), Err: syscall.EINVAL}
	}
	return nil
}

// notExist: nothing is there, also when a parent is no longer a directory.
func notExist(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
}
