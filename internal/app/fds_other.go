//go:build !unix

package app

// closeInheritedOnExec: elsewhere a child gets only the handles it is given.
func closeInheritedOnExec() {}
