// Command sbx-inpod is the helper that sbx's cluster backend runs inside a
// pod: it applies the host's changes, runs commands, and sends the
// sandbox's changes back (package inpod). sbx uploads it into each claimed
// pod unless the image already has this version at /tmp/.sbx/sbx. It is a
// small static binary of its own so that the upload is small; sbx finds it
// beside its own executable (go install ./cmd/... puts it there), or where
// SBX_INPOD_HELPER says. Build it with CGO_ENABLED=0.
package main

import (
	"fmt"
	"os"

	"github.com/sbx-sh/sbx/inpod"
)

func main() {
	inpod.Main()
	fmt.Fprintln(os.Stderr, "sbx-inpod is the helper sbx runs inside a remote sandbox; it is not meant to be run by hand")
	os.Exit(2)
}
