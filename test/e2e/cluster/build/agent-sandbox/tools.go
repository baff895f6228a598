//go:build tools

// Package tools pins the agent-sandbox controller the e2e harness builds.
package tools

import _ "sigs.k8s.io/agent-sandbox/cmd/agent-sandbox-controller"
