//go:build !linux

package sync

import (
	"os"
	"path/filepath"
)

// readDir lists the directory at full with an lstat of each entry.
func readDir(full string) ([]dirEntry, error) {
	f, err := os.Open(full)
	if err != nil {
		return nil, err
	}
	names, err := f.Readdirnames(-1)
	f.Close()
	if err != nil {
		return nil, err
	}
	out := make([]dirEntry, 0, len(names))
	for _, name := range names {
		fi, err := os.Lstat(filepath.Join(full, name))
		if err != nil {
			continue
		}
		e, ok := entryOf(fi)
		if !ok {
			continue
		}
		if e.isLink() {
			if e.Link, err = os.Readlink(filepath.Join(full, name)); err != nil {
				continue
			}
		}
		out = append(out, dirEntry{name: name, e: e})
	}
	return out, nil
}
