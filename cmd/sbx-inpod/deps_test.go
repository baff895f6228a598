package main

import (
	"testing"

	"github.com/sbx-sh/sbx/internal/deptest"
)

// The in-pod helper is uploaded into every cluster sandbox: its small size is
// a promise. It runs in a Linux pod, so only linux is checked.
func TestDeps(t *testing.T) {
	deptest.Rule{
		Package: "github.com/sbx-sh/sbx/cmd/sbx-inpod",
		Bad: map[string]string{
			"k8s.io/":                                "client-go and the Kubernetes API types stay on the host",
			"sigs.k8s.io/":                           "the Kubernetes helpers stay on the host",
			"github.com/modelcontextprotocol/go-sdk": "MCP stays on the host",
		},
	}.Check(t)
}
