package main

import (
	"testing"

	"github.com/sbx-sh/sbx/internal/deptest"
)

// Every process of a local sandbox runs this binary: its start time and
// memory are the point of it, so the host's heavy dependencies stay out.
func TestDeps(t *testing.T) {
	deptest.Rule{
		Package: "github.com/sbx-sh/sbx/cmd/sbx-sandbox",
		Bad: map[string]string{
			"k8s.io/":                                   "client-go and the Kubernetes API types stay in sbx",
			"sigs.k8s.io/":                              "the Kubernetes helpers stay in sbx",
			"github.com/modelcontextprotocol/go-sdk":    "MCP stays in sbx-mcp",
			"github.com/sbx-sh/sbx/session":             "the engine stays in sbx",
			"github.com/sbx-sh/sbx/cluster":             "the cluster backend stays in sbx",
			"github.com/sbx-sh/sbx/internal/testenv":    "test helpers stay in tests",
			"github.com/sbx-sh/sbx/sandbox/sandboxtest": "the conformance suite and the fake backend stay in tests",
			"github.com/sbx-sh/sbx/internal/deptest":    "dependency tests stay in tests",
			"testing":                                   "no test code in a shipped binary",
		},
	}.Check(t)
}
