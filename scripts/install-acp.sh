#!/usr/bin/env bash
# Installs the real ACP agent that tests and demos run against the fake
# Messages API (shared/fakeapi): Claude Code's ACP adapter,
# @agentclientprotocol/claude-agent-acp, unless it is already there, and
# prints the path of its claude-agent-acp executable.
#
#   scripts/install-acp.sh            the pinned version (acp.PinnedClaudeAgentVersion)
#   scripts/install-acp.sh 0.101.0    that version
#
# Each version gets its own directory, $XDG_CACHE_HOME/betcode/acp-<v>
# (default ~/.cache/...), so installing another never disturbs the pinned
# one; once installed it needs no network. The pinned version is read from
# agent/acp/version.go (PinnedClaudeAgentVersion): the one source of truth
# for the Go code and this script.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VERSION_GO="${ROOT}/agent/acp/version.go"

pinned() {
	sed -nE 's/^[[:space:]]*const[[:space:]]+PinnedClaudeAgentVersion[[:space:]]*=[[:space:]]*"([^"]+)".*/\1/p' "$VERSION_GO"
}

VERSION="${1:-$(pinned)}"
if ! [[ "$VERSION" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]]; then
	echo "install-acp.sh: want a version like 0.101.0, got ${VERSION:-nothing} (pinned version read from ${VERSION_GO})" >&2
	exit 2
fi
PKG="@agentclientprotocol/claude-agent-acp@${VERSION}"
DIR="${XDG_CACHE_HOME:-$HOME/.cache}/betcode/acp-${VERSION}"
BIN="${DIR}/node_modules/.bin/claude-agent-acp"

if [ -x "$BIN" ]; then
	echo "$BIN"
	exit 0
fi

if ! command -v npm >/dev/null 2>&1; then
	echo "install-acp.sh: npm not found; install Node.js and npm, e.g. apt-get install nodejs npm" >&2
	exit 1
fi

# Install into a temporary sibling and rename, so an interrupted run never
# leaves a half-installed directory that looks complete.
mkdir -p "$(dirname "$DIR")"
TMP="$(mktemp -d "${DIR}.tmp.XXXXXX")"
trap 'rm -rf "$TMP"' EXIT
echo "install-acp.sh: installing ${PKG} into ${DIR}" >&2
npm install --prefix "$TMP" --no-audit --no-fund --loglevel=error "$PKG" >&2
if [ ! -x "$TMP/node_modules/.bin/claude-agent-acp" ]; then
	echo "install-acp.sh: npm finished but node_modules/.bin/claude-agent-acp is missing" >&2
	exit 1
fi
rm -rf "$DIR"
mv "$TMP" "$DIR"
trap - EXIT
echo "$BIN"
