//go:build tools

// Package tools pins the agent-sandbox v0.5.6 controller the e2e harness builds.
package tools

import _ "sigs.k8s.io/agent-sandbox/cmd/agent-sandbox-controller"
