package sandbox

import (
	"testing"

	"github.com/sbx-sh/sbx/internal/deptest"
)

// The Sandbox contract is what every backend and the engine share: it
// imports only the standard library, so neither side drags the other's
// dependencies in.
func TestDeps(t *testing.T) {
	deptest.Rule{
		Package: "github.com/sbx-sh/sbx/sandbox",
		GOOS:    []string{"linux", "darwin", "windows"},
		OnlyStd: true,
	}.Check(t)
}
