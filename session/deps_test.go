package session

import (
	"testing"

	"github.com/sbx-sh/sbx/internal/deptest"
)

// The engine knows backends only through the sandbox contract and faces
// only through its own API: nothing of Kubernetes (the cluster backend's)
// nor of the MCP SDK (the tools') reaches it.
func TestDeps(t *testing.T) {
	deptest.Rule{
		Package: "github.com/sbx-sh/sbx/session",
		GOOS:    []string{"linux", "darwin", "windows"},
		Bad: map[string]string{
			"k8s.io/":                                "Kubernetes belongs to the cluster backend",
			"github.com/modelcontextprotocol/go-sdk": "MCP belongs to tools",
		},
	}.Check(t)
}
