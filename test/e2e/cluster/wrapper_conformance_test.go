//go:build e2e

package clustere2e

import "testing"

// TestConformanceWrapper holds the shell wrapper (cluster/exec.go, for pods
// no helper can run in; Sandbox.UseWrapper) to the same backend conformance
// suite as the helper: the exact environment, the lookup on
// sandbox.DefaultPath and an unread stdin included.
func TestConformanceWrapper(t *testing.T) {
	conformance(t, true)
}
