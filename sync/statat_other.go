//go:build !linux

package sync

import "path/filepath"

// statCache is Linux's (statat_linux.go); elsewhere each path is
// statPath's.
type statCache struct{ root string }

func newStatCache(root string) *statCache { return &statCache{root: root} }

func (c *statCache) stat(p string) (Entry, bool, error) {
	return statPath(filepath.Join(c.root, filepath.FromSlash(p)))
}

func (c *statCache) close() {}
