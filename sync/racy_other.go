//go:build !linux

package sync

// fineTimestamps: outside Linux every file system keeps racyWindow.
func fineTimestamps(string) bool { return false }
