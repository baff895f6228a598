//go:build !linux

package local

// reportLowered is the Linux remover's priority check (trashprio_linux_test.go).
func reportLowered() int { return 2 }
