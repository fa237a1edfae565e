#!/usr/bin/env bash
# Installs a Claude Code CLI that tests and demos run against the fake
# Messages API (shared/fakeapi), unless it is already there, and prints the
# path of the claude executable.
#
#   scripts/install-claude.sh            the pinned version (versions.Pinned)
#   scripts/install-claude.sh 2.1.331    that version (make compat uses this)
#
# Each version gets its own directory, $XDG_CACHE_HOME/betcode/claude-code-<v>
# (default ~/.cache/...), so installing another never disturbs the pinned one.
# The pinned version is read from shared/claudecli/versions/versions.go
# (versions.Pinned): the one source of truth for the Go code and this script.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VERSIONS_GO="${ROOT}/shared/claudecli/versions/versions.go"

pinned() {
	sed -nE 's/^[[:space:]]*Pinned[[:space:]]*=[[:space:]]*"([^"]+)".*/\1/p' "$VERSIONS_GO"
}

VERSION="${1:-$(pinned)}"
if ! [[ "$VERSION" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]]; then
	echo "install-claude.sh: want a version like 2.1.328, got ${VERSION:-nothing} (pinned version read from ${VERSIONS_GO})" >&2
	exit 2
fi
PKG="@anthropic-ai/claude-code@${VERSION}"
DIR="${XDG_CACHE_HOME:-$HOME/.cache}/betcode/claude-code-${VERSION}"
BIN="${DIR}/node_modules/.bin/claude"

if [ -x "$BIN" ]; then
	echo "$BIN"
	exit 0
fi

if ! command -v npm >/dev/null 2>&1; then
	echo "install-claude.sh: npm not found; install Node.js and npm, e.g. apt-get install nodejs npm" >&2
	exit 1
fi

# Install into a temporary sibling and rename, so an interrupted run never
# leaves a half-installed directory that looks complete.
mkdir -p "$(dirname "$DIR")"
TMP="$(mktemp -d "${DIR}.tmp.XXXXXX")"
trap 'rm -rf "$TMP"' EXIT
echo "install-claude.sh: installing ${PKG} into ${DIR}" >&2
npm install --prefix "$TMP" --no-audit --no-fund --loglevel=error "$PKG" >&2
if [ ! -x "$TMP/node_modules/.bin/claude" ]; then
	echo "install-claude.sh: npm finished but node_modules/.bin/claude is missing" >&2
	exit 1
fi
rm -rf "$DIR"
mv "$TMP" "$DIR"
trap - EXIT
echo "$BIN"
