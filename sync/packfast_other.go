//go:build !linux

package sync

import (
	"archive/tar"
	"hash"
)

// packFileAt is Linux's (packfast_linux.go); elsewhere writeEntry opens
// each file through its os.Root.
func packFileAt(tw *tar.Writer, dirs *dirRoots, p string, h *tar.Header, sum hash.Hash) (bool, error) {
	return false, nil
}
