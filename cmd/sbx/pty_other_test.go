//go:build !linux

package main

import (
	"os"
	"testing"
)

// openTestPTY is written for Linux only: this package's tests drive the
// local backend, which needs Linux. Elsewhere the file keeps the package's
// tests compiling (GOOS=darwin go vet) and a test that needs a terminal
// fails saying why.
func openTestPTY(t *testing.T) (*os.File, *os.File) {
	t.Helper()
	t.Fatal("openTestPTY opens Linux's /dev/ptmx (TIOCSPTLCK, TIOCGPTN); run these tests on Linux, where the local backend works")
	return nil, nil
}
