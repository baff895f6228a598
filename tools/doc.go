// Package tools is sbx's MCP face: the bash, bash_output, bash_kill, read,
// write, edit and release tools, built on the session engine, so that a coding
// agent's own shell and file tools can be swapped for ones that run in a
// disposable sandbox.
//
// Promises: tool names, parameters and result texts are a contract (the
// schemas are snapshotted under __toolsnaps__); every tool runs in the
// caller's own sbx session, never another client's; nothing is claimed until
// the first tool call; the file tools run inside the sandbox through
// Session.Exec with fixed scripts (agent strings are arguments, never shell
// text), so they behave the same on every backend; after a tool returns, what
// it changed in the code dirs is on the host. Bad arguments and failed
// operations are tool results with IsError set, worded so the model can
// correct itself; only protocol faults are JSON-RPC errors.
package tools
