//go:build !linux

package session

import (
	"errors"
	"io/fs"
	"path/filepath"
)

// diskUsage sums what the files under dir will cost the host once they come
// back (each name its full length, as the host writes it), and stops early
// once the sum is over stop. A directory it
// cannot read is an error: what it holds cannot be measured.
func diskUsage(dir string, stop int64) (int64, error) {
	var total int64
	errStop := errors.New("over")
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return nil // gone meanwhile
		}
		total += fi.Size()
		if total > stop {
			return errStop
		}
		return nil
	})
	if err == errStop {
		err = nil
	}
	return total, err
}

// treeSize is diskUsage that also counts the entries, and stops once they
// are over maxEntries (smallTree's walk of a host tree).
func treeSize(dir string, maxEntries, stop int64) (entries, bytes int64, err error) {
	errStop := errors.New("over")
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == dir {
			return nil
		}
		if entries++; entries > maxEntries {
			return errStop
		}
		fi, err := d.Info()
		if err != nil {
			return nil // gone meanwhile
		}
		if bytes += fi.Size(); bytes > stop {
			return errStop
		}
		return nil
	})
	if err == errStop {
		err = nil
	}
	return entries, bytes, err
}
