#!/usr/bin/env bash
# Installs the pinned Claude Code CLI that tests and demos run against the
# fake Messages API (shared/fakeapi), unless it is already there, and prints
# the path of the claude executable. Keep VERSION equal to claudecli.Version.
set -euo pipefail

VERSION=2.1.328
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
