#!/usr/bin/env bash
# make demo: the whole system on this machine with no account or API key.
# It starts the project's fake Anthropic API, a betcode-agent that drives the
# real (pinned) Claude Code CLI against it, and uses the betcode client to
# chat, run a tool, list sessions and replay one. Everything runs on loopback
# in a temporary directory that is removed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=$PWD/bin
CLAUDE=$(./scripts/install-claude.sh)
TMP=$(mktemp -d /tmp/betcode-demo.XXXXXX)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$TMP"
}
trap cleanup EXIT
mkdir -p "$TMP/home" "$TMP/project"
step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "Starting the fake Anthropic API on loopback"
"$BIN/fakeapi" --listen 127.0.0.1:0 >"$TMP/fakeapi.url" 2>"$TMP/fakeapi.log" &
PIDS+=($!)
for _ in $(seq 100); do [ -s "$TMP/fakeapi.url" ] && break; sleep 0.1; done
API=$(head -n1 "$TMP/fakeapi.url")
echo "fake API: $API"

step "Starting betcode-agent (Claude Code $("$CLAUDE" --version | cut -d' ' -f1))"
SOCK="$TMP/agent.sock"
HOME="$TMP/home" ANTHROPIC_BASE_URL="$API" ANTHROPIC_API_KEY=sk-demo DISABLE_TELEMETRY=1 \
  CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 CLAUDE_CODE_MAX_RETRIES=2 \
  "$BIN/betcode-agent" serve --listen "unix://$SOCK" --data-dir "$TMP/data" --claude-bin "$CLAUDE" \
  2>"$TMP/agent.log" &
PIDS+=($!)
for _ in $(seq 300); do grep -q "agent serving" "$TMP/agent.log" 2>/dev/null && break; sleep 0.1; done
grep -q "agent serving" "$TMP/agent.log" || { cat "$TMP/agent.log"; exit 1; }
echo "agent: unix://$SOCK"
export BETCODE_AGENT="unix://$SOCK"

step "betcode chat \"hello\""
"$BIN/betcode" chat --cwd "$TMP/project" "hello"

step "betcode chat --allow Bash \"please RUNTOOL\"  (the fake model asks for a Bash tool call)"
"$BIN/betcode" chat --cwd "$TMP/project" --allow Bash "please RUNTOOL"
echo "file the tool created: $(ls "$TMP/project")"

step "betcode sessions"
"$BIN/betcode" sessions

ID=$("$BIN/betcode" sessions 2>/dev/null | awk 'NR==2 {print $1}')
step "betcode replay $ID --json (every event with its sequence, from SQLite)"
"$BIN/betcode" replay "$ID" --json | cut -c1-160

step "Done. The agent keeps every event in $TMP/data/agent.db (removed now)."
