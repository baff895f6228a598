//go:build !linux

package sync

// writeSmallAt is Linux's (applyfast_linux.go); elsewhere writeItem
// does every write.
func writeSmallAt(dirfd int, name string, it *Item, body []byte, exists bool) (Entry, error, bool) {
	return Entry{}, nil, false
}
