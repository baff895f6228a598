package testenv

import (
	"testing"

	"github.com/sbx-sh/sbx/internal/deptest"
)

// TestNotInBinaries: the test helpers (this package, sandboxtest and its
// Fake, deptest) and package testing never reach a binary sbx ships.
func TestNotInBinaries(t *testing.T) {
	for _, bin := range []string{"cmd/sbx", "cmd/sbx-mcp", "cmd/sbx-inpod"} {
		deptest.Rule{
			Package: "github.com/sbx-sh/sbx/" + bin,
			GOOS:    []string{"linux", "darwin"},
			Bad: map[string]string{
				"github.com/sbx-sh/sbx/internal/testenv":    "test helpers stay in tests",
				"github.com/sbx-sh/sbx/sandbox/sandboxtest": "the conformance suite and the fake backend stay in tests",
				"github.com/sbx-sh/sbx/internal/deptest":    "dependency tests stay in tests",
				"testing":                                   "no test code in a shipped binary",
			},
		}.Check(t)
	}
}
