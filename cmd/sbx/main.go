// Command sbx runs commands in a disposable sandbox that holds a copy of your
// code: `sbx exec -- make test`, `sbx shell`, `sbx release`, `sbx ls`.
package main

import (
	"context"
	"os"

	"github.com/sbx-sh/sbx/cluster"
	"github.com/sbx-sh/sbx/inpod"
	"github.com/sbx-sh/sbx/local"
)

func main() {
	local.Main()        // a sandbox init re-executes this binary
	inpod.Main()        // so does a remote sandbox's helper
	cluster.RelayMain() // and a kept cluster session's relay
	os.Exit(run(context.Background(), os.Args[1:]))
}
