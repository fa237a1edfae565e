#!/usr/bin/env bash
# Installs the OpenAI Codex CLI that tests and demos run against the fake
# Responses API (shared/fakeopenai), unless it is already there, and prints
# the path of the native codex binary inside the npm package.
#
#   scripts/install-codex.sh            the pinned version (codex.PinnedVersion)
#   scripts/install-codex.sh 0.169.0    that version
#
# Each version gets its own directory, $XDG_CACHE_HOME/betcode/codex-<v>
# (default ~/.cache/...). The npm package @openai/codex is only a Node shim;
# the real CLI is a static binary in the platform package
# (@openai/codex-linux-x64 on x86_64 Linux) that the shim execs. BetCode
# spawns that binary directly, so no Node process sits in between. The pinned
# version is read from agent/codex/version.go (PinnedVersion): the one source
# of truth for the Go code and this script.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VERSION_GO="${ROOT}/agent/codex/version.go"

pinned() {
	sed -nE 's/^[[:space:]]*const[[:space:]]+PinnedVersion[[:space:]]*=[[:space:]]*"([^"]+)".*/\1/p' "$VERSION_GO"
}

VERSION="${1:-$(pinned)}"
if ! [[ "$VERSION" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]]; then
	echo "install-codex.sh: want a version like 0.169.0, got ${VERSION:-nothing} (pinned version read from ${VERSION_GO})" >&2
	exit 2
fi

case "$(uname -s)-$(uname -m)" in
Linux-x86_64) PLATFORM=linux-x64 TRIPLE=x86_64-unknown-linux-musl ;;
Linux-aarch64) PLATFORM=linux-arm64 TRIPLE=aarch64-unknown-linux-musl ;;
Darwin-x86_64) PLATFORM=darwin-x64 TRIPLE=x86_64-apple-darwin ;;
Darwin-arm64) PLATFORM=darwin-arm64 TRIPLE=aarch64-apple-darwin ;;
*)
	echo "install-codex.sh: no Codex build for $(uname -s) $(uname -m)" >&2
	exit 1
	;;
esac

PKG="@openai/codex@${VERSION}"
DIR="${XDG_CACHE_HOME:-$HOME/.cache}/betcode/codex-${VERSION}"
REL="node_modules/@openai/codex-${PLATFORM}/vendor/${TRIPLE}/bin/codex"
BIN="${DIR}/${REL}"

if [ -x "$BIN" ]; then
	echo "$BIN"
	exit 0
fi

if ! command -v npm >/dev/null 2>&1; then
	echo "install-codex.sh: npm not found; install Node.js and npm, e.g. apt-get install nodejs npm" >&2
	exit 1
fi

# Install into a temporary sibling and rename, so an interrupted run never
# leaves a half-installed directory that looks complete.
mkdir -p "$(dirname "$DIR")"
TMP="$(mktemp -d "${DIR}.tmp.XXXXXX")"
trap 'rm -rf "$TMP"' EXIT
echo "install-codex.sh: installing ${PKG} into ${DIR}" >&2
npm install --prefix "$TMP" --no-audit --no-fund --loglevel=error "$PKG" >&2
if [ ! -x "$TMP/${REL}" ]; then
	echo "install-codex.sh: npm finished but ${REL} is missing (optional dependency @openai/codex-${PLATFORM} not installed?)" >&2
	exit 1
fi
rm -rf "$DIR"
mv "$TMP" "$DIR"
trap - EXIT
echo "$BIN"
