package router

import (
	"testing"

	"github.com/sbx-sh/sbx/internal/deptest"
)

// The router is a pure function of the command text: it imports only the
// standard library and mvdan.cc/sh's parser.
func TestDeps(t *testing.T) {
	deptest.Rule{
		Package: "github.com/sbx-sh/sbx/router",
		GOOS:    []string{"linux", "darwin", "windows"},
		OnlyStd: true,
		Allow:   []string{"mvdan.cc/sh/v3/syntax"},
	}.Check(t)
}
