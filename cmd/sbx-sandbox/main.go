// Command sbx-sandbox is the program a local sandbox's processes run: the
// setup stage, the init that serves the sandbox, its per-command workers
// and the egress proxy's process (package local). sbx starts it in place of
// itself when it finds it beside its own executable (go install ./cmd/...
// puts it there) or where SBX_SANDBOX_BIN says, and only when it is the
// same build. It links nothing but the local backend, so that each sandbox
// process starts in a fraction of sbx's time and memory. Build it with
// CGO_ENABLED=0, as sbx.
package main

import (
	"fmt"
	"os"

	"github.com/sbx-sh/sbx/local"
)

func main() {
	local.Main() // never returns when started as a stage
	fmt.Fprintln(os.Stderr, "sbx-sandbox runs the processes of sbx's local sandboxes; sbx starts it, it is not meant to be run by hand")
	os.Exit(2)
}
