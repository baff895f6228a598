#!/usr/bin/env bash
# Every test of sbx, in one command (the README's test command; .ci/run calls it):
#
#   test/run.sh
#
# 1. installs the Node.js MCP clients the MCP tests drive (MCP Inspector CLI,
#    Claude Code), cached in $SBX_NODE_PREFIX (default /var/tmp/sbx-node);
# 2. runs go test ./... (the local sandbox, the engine, sync, router, MCP);
# 3. as root on Linux, builds (or reuses, cached in /var/tmp/sbx-cluster-lab) a
#    real single-node Kubernetes with agent-sandbox and runs the cluster
#    backend's end-to-end tests against it; it stops every daemon it starts.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"
export SBX_NODE_PREFIX="${SBX_NODE_PREFIX:-/var/tmp/sbx-node}"

echo "test: Node.js MCP clients"
bash test/mcp/install-node-deps.sh "$SBX_NODE_PREFIX"

echo "test: go test ./..."
go test ./...

if [ "$(id -u)" = 0 ] && [ "$(uname -s)" = Linux ]; then
	echo "test: cluster backend end to end"
	test/e2e/cluster/run.sh
else
	echo "test: the cluster end-to-end tests need root on Linux (they boot a kubelet and containerd)" >&2
	exit 1
fi
