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

// treeSize would count a host tree for a workspace in memory, which only
// Linux has (local.Provider.MemoryWorkRoot): no walk of the tree for it.
func treeSize(string, int64, int64) (entries, bytes int64, err error) {
	return 0, 0, errors.New("workspaces in memory need Linux")
}
