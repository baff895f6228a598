package sync

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"time"
)

const modeSymlink = fs.ModeSymlink

// Report says what a pull back did.
type Report struct {
	Applied int
	Refused []Refusal
}

// PullBack applies changes found in the sandbox's copy (src) to the host's
// code dir (dst). Both are opened as os.Root, so neither a read from the
// copy nor a write to the host follows a symlink out of its tree. A change
// the rules refuse is skipped and reported; an I/O failure stops the pull
// and is returned (what was applied before it stays applied, each file whole).
func PullBack(dst, src string, changes []Change) (Report, error) {
	var rep Report
	dr, err := os.OpenRoot(dst)
	if err != nil {
		return rep, fmt.Errorf("open code dir %s: %w", dst, err)
	}
	defer dr.Close()
	sr, err := os.OpenRoot(src)
	if err != nil {
		return rep, fmt.Errorf("open sandbox copy %s: %w", src, err)
	}
	defer sr.Close()
	for _, c := range changes {
		if r := CheckPullBack(c.Path, c.Entry, c.Deleted); r != nil {
			rep.Refused = append(rep.Refused, *r)
			continue
		}
		if err := applyOne(dr, sr, c); err != nil {
			return rep, fmt.Errorf("bring back %s: %w", c.Path, err)
		}
		rep.Applied++
	}
	return rep, nil
}

func applyOne(dr, sr *os.Root, c Change) error {
	p := c.Path
	cur, err := dr.Lstat(p)
	exists := err == nil
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if c.Deleted {
		if !exists {
			return nil
		}
		return dr.RemoveAll(p)
	}
	e := c.Entry
	switch {
	case e.Mode.IsDir():
		if exists && !cur.IsDir() {
			if err := dr.Remove(p); err != nil {
				return err
			}
			exists = false
		}
		if !exists {
			if err := dr.Mkdir(p, e.Mode.Perm()); err != nil {
				return err
			}
		}
		return dr.Chmod(p, e.Mode.Perm())
	case e.Mode&modeSymlink != 0:
		if exists {
			if err := dr.RemoveAll(p); err != nil {
				return err
			}
		}
		return dr.Symlink(e.Link, p)
	default:
		return copyFile(dr, sr, p, e, exists && cur.IsDir())
	}
}

// copyFile writes src's p to a temporary name beside dst's p and renames it
// into place, so the host sees the old file or the new one, never half.
func copyFile(dr, sr *os.Root, p string, e Entry, replaceDir bool) error {
	in, err := sr.OpenFile(p, os.O_RDONLY|noFollow, 0)
	if err != nil {
		return err
	}
	defer in.Close()
	var rnd [6]byte
	rand.Read(rnd[:])
	tmp := path.Join(path.Dir(p), ".sbx-tmp-"+hex.EncodeToString(rnd[:]))
	out, err := dr.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, e.Mode.Perm())
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	if err == nil {
		err = out.Chmod(e.Mode.Perm())
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		mt := time.Unix(0, e.MTime)
		err = dr.Chtimes(tmp, mt, mt)
	}
	if err == nil && replaceDir {
		err = dr.RemoveAll(p)
	}
	if err == nil {
		err = dr.Rename(tmp, p)
	}
	if err != nil {
		dr.Remove(tmp)
	}
	return err
}

// CopyTree copies the tree at src into the empty directory dst, keeping
// modes, symlinks and modification times, and returns dst's manifest.
// Sockets, devices and fifos are skipped.
func CopyTree(dst, src string) (Manifest, error) {
	m, err := Scan(src)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", src, err)
	}
	sr, err := os.OpenRoot(src)
	if err != nil {
		return nil, err
	}
	defer sr.Close()
	dr, err := os.OpenRoot(dst)
	if err != nil {
		return nil, err
	}
	defer dr.Close()
	changes := Diff(nil, m)
	for _, c := range changes {
		if c.Entry.Mode.IsDir() {
			// Write permission is needed to fill the directory; the real mode
			// is set below once its contents are in.
			if err := dr.Mkdir(c.Path, 0o700); err != nil {
				return nil, err
			}
			continue
		}
		if err := applyOne(dr, sr, c); err != nil {
			return nil, fmt.Errorf("copy %s: %w", c.Path, err)
		}
	}
	for i := len(changes) - 1; i >= 0; i-- {
		if c := changes[i]; c.Entry.Mode.IsDir() {
			if err := dr.Chmod(c.Path, c.Entry.Mode.Perm()); err != nil {
				return nil, err
			}
		}
	}
	return Scan(dst)
}
