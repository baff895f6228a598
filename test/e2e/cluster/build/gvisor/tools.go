//go:build tools

// Package tools pins the gVisor commands the e2e harness builds.
package tools

import (
	_ "gvisor.dev/gvisor/runsc"
	_ "gvisor.dev/gvisor/shim"
)
