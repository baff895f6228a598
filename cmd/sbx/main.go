// Command sbx runs commands in a disposable sandbox that holds a copy of your
// code: `sbx exec -- make test`, `sbx shell`, `sbx release`, `sbx ls`.
package main

import (
	"context"
	"os"

	"github.com/sbx-sh/sbx/internal/app"
)

func main() {
	app.Main() // a sandbox init, an in-pod helper or a relay re-executes this binary
	os.Exit(run(context.Background(), os.Args[1:]))
}
