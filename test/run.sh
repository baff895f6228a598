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

# go test runs packages at once, and each holds inotify instances and
# watches (each local sandbox's init and session, each test's watching host
# and helper, up to 65,536 directories a tree): a CI run once had a test that
# counts the scans made from events see only full ones, as when the kernel's
# per-user limits (128 instances by default) are used up. As root, the run
# raises them (they are per user: root's) where they are lower.
raise_limit() { # file minimum
	if [ "$(id -u)" = 0 ] && [ -w "$1" ] && [ "$(cat "$1")" -lt "$2" ]; then
		echo "test: ${1#/proc/sys/} $(cat "$1") -> $2"
		echo "$2" >"$1"
	fi
}
raise_limit /proc/sys/fs/inotify/max_user_instances 1024
raise_limit /proc/sys/fs/inotify/max_user_watches 524288

echo "test: go test ./..."
go test ./...

if [ "$(id -u)" = 0 ] && [ "$(uname -s)" = Linux ]; then
	echo "test: cluster backend end to end"
	test/e2e/cluster/run.sh
else
	echo "test: the cluster end-to-end tests need root on Linux (they boot a kubelet and containerd)" >&2
	exit 1
fi
