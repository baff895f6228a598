//go:build !linux

package sync

func hashFile(p string) (string, error) { return hashFilePortable(p) }
