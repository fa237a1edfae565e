#!/usr/bin/env bash
# make demo: the whole product on this machine, with no account or API key.
#
# A relay with its embedded store (SQLite), a team and a user made with the
# admin CLI, an agent enrolled with a single-use join token that dials out
# to the relay over mTLS and drives the real (pinned) Claude Code CLI
# against the project's fake Anthropic API; alice's laptop paired with the
# machine from a one-time code and chatting with a tool call end to end
# through the relay (docs/security.md); her relay login, machines and the
# web API. Then a second user, who sees nothing of it.
# Everything runs on loopback in a temporary directory removed at the end.
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
mkdir -p "$TMP/home" "$TMP/project" "$TMP/alice" "$TMP/bob"
step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
run() { printf '\033[2m$ %s\033[0m\n' "$*"; "$@"; }
# wait_for FILE PATTERN: until a log line matches (30 s), else show the log.
wait_for() {
  for _ in $(seq 300); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done
  echo "timed out waiting for '$2' in $1:"; cat "$1"; exit 1
}

step "Starting the fake Anthropic API on loopback"
"$BIN/fakeapi" --listen 127.0.0.1:0 >"$TMP/fakeapi.url" 2>"$TMP/fakeapi.log" &
PIDS+=($!)
for _ in $(seq 100); do [ -s "$TMP/fakeapi.url" ] && break; sleep 0.1; done
API=$(head -n1 "$TMP/fakeapi.url")
echo "fake API: $API"

step "The relay: a development CA (it signs enrolled machines' certificates) and its store"
PKI=$TMP/pki RDATA=$TMP/relay
run "$BIN/betcode-relay" certs init --dir "$PKI" --hosts 127.0.0.1,localhost
"$BIN/betcode-relay" serve --listen 127.0.0.1:0 --tls-cert "$PKI/relay.crt" --tls-key "$PKI/relay.key" \
  --client-ca "$PKI/ca.crt" --ca-key "$PKI/ca.key" --data-dir "$RDATA" --bootstrap-admin=false 2>"$TMP/relay.log" &
PIDS+=($!)
wait_for "$TMP/relay.log" "relay serving"
RELAY=$(grep 'relay serving' "$TMP/relay.log" | head -n1 | grep -o ' addr=[^ ]*' | cut -d= -f2)
echo "relay: $RELAY (TLS; agents need a certificate, clients a token)"

step "An operator creates a team with alice as its owner, and a join token for a machine"
ADMIN=("$BIN/betcode-relay" admin --data-dir "$RDATA")
run "${ADMIN[@]}" user create alice --email alice@example.com
run "${ADMIN[@]}" team create eng --owner alice
ALICE_TOKEN=$("${ADMIN[@]}" token create --user alice --name demo-laptop 2>/dev/null)
JOIN=$("${ADMIN[@]}" enroll-token create --team eng --ttl 10m 2>/dev/null)
echo "alice's client token: ${ALICE_TOKEN:0:8}… (shown once; only its hash is stored)"
echo "join token:           ${JOIN:0:8}… (single use, 10 minutes)"

step "The developer machine enrolls (its key never leaves it) and dials out to the relay"
AGENT=$TMP/agent
export BETCODE_JOIN_TOKEN=$JOIN # not on the command line, where ps would show it
run "$BIN/betcode-agent" enroll --relay "$RELAY" --relay-ca "$PKI/ca.crt" --name demo-machine --data-dir "$AGENT"
unset BETCODE_JOIN_TOKEN
HOME="$TMP/home" ANTHROPIC_BASE_URL="$API" ANTHROPIC_API_KEY=sk-demo DISABLE_TELEMETRY=1 \
  CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 CLAUDE_CODE_MAX_RETRIES=2 \
  "$BIN/betcode-agent" serve --listen "unix://$TMP/agent.sock" --data-dir "$AGENT" --claude-bin "$CLAUDE" \
  2>"$TMP/agent.log" &
PIDS+=($!)
wait_for "$TMP/agent.log" "relay link up"
echo "agent: connected to the relay (Claude Code $("$CLAUDE" --version | cut -d' ' -f1))"
MACHINE=$(grep -o '"machine_id": *"[^"]*"' "$AGENT/relay/enrollment.json" | sed 's/.*"\([^"]*\)"$/\1/')

step "alice pairs her laptop with the machine: end to end, the relay can neither read nor act"
# On the machine: a one-time code (QR for a phone's camera, text to paste).
"$BIN/betcode-agent" pair --agent "unix://$TMP/agent.sock" >"$TMP/pair.out" 2>&1 &
PAIR=$!
PIDS+=($PAIR)
wait_for "$TMP/pair.out" "Waiting for the device"
printf '\033[2m$ betcode-agent pair\033[0m\n'
cat "$TMP/pair.out"
CODE=$(grep -o 'betcode pair betcode-pair:[^ ]*' "$TMP/pair.out" | head -n1 | cut -d' ' -f3)
# On alice's laptop: no login needed; the pairing brings a relay credential
# that reaches this machine only.
export XDG_CONFIG_HOME=$TMP/alice
unset BETCODE_AGENT BETCODE_RELAY BETCODE_TOKEN
run "$BIN/betcode" pair "$CODE" --relay-ca "$PKI/ca.crt" --name "alice's laptop"
wait "$PAIR" && tail -n 2 "$TMP/pair.out"
run "$BIN/betcode" chat --cwd "$TMP/project" --allow Bash "please RUNTOOL"
echo "file the tool created on the machine: $(ls "$TMP/project")"
run "$BIN/betcode" sessions
run "$BIN/betcode-agent" devices list --agent "unix://$TMP/agent.sock"

step "alice also logs in with her relay token (her machines, the web app)"
echo "$ALICE_TOKEN" | run "$BIN/betcode" login --relay "$RELAY" --relay-ca "$PKI/ca.crt"
run "$BIN/betcode" machines
run "$BIN/betcode" machine switch "$MACHINE"

step "alice's phone: the web app and its API, served by the relay on the same port"
printf 'Authorization: Bearer %s\n' "$ALICE_TOKEN" >"$TMP/alice.hdr" # not on the command line
CURL=(curl -sS --fail-with-body --cacert "$PKI/ca.crt" -H "@$TMP/alice.hdr")
run "${CURL[@]}" "https://$RELAY/api/machines"; echo
# The machine runs --relay-e2e=required (the default): a relay login gets the
# relay's own API, never the machine's sessions in clear.
if run "${CURL[@]}" "https://$RELAY/api/sessions" >"$TMP/clear.out" 2>&1; then
  echo "the machine answered a relay login in clear: this is a bug"; exit 1
fi
head -c 400 "$TMP/clear.out"; echo
echo "web app: https://$RELAY/ (trust $PKI/ca.crt): \"Pair a machine\" with a code from betcode-agent pair"

step "bob, another user of the same relay, sees nothing of it"
"${ADMIN[@]}" user create bob >/dev/null
BOB_TOKEN=$("${ADMIN[@]}" token create --user bob 2>/dev/null)
export XDG_CONFIG_HOME=$TMP/bob
echo "$BOB_TOKEN" | run "$BIN/betcode" login --relay "$RELAY" --relay-ca "$PKI/ca.crt"
run "$BIN/betcode" machines
if run "$BIN/betcode" --machine "$MACHINE" sessions; then
  echo "bob reached alice's machine: this is a bug"; exit 1
fi

step "The audit log records who did what"
"${ADMIN[@]}" audit | tail -n 8

if [ -n "${DEMO_KEEP:-}" ]; then
  step "KEEP is set: the relay, the agent and the web app keep running until Ctrl-C"
  echo "web app:        https://$RELAY/  (trust the CA $PKI/ca.crt in the browser or phone first)"
  echo "pair a browser: in the web app, \"Pair a machine\", with the code this prints:"
  echo "                $BIN/betcode-agent pair --agent unix://$TMP/agent.sock"
  echo "alice's token:  $ALICE_TOKEN"
  echo "stop:           Ctrl-C (everything in $TMP is removed)"
  wait
fi
step "Done. Everything ran on loopback in $TMP (removed now)."
if [ -z "${DEMO_KEEP:-}" ]; then
  echo "To keep the stack running, open its web app and pair a phone: make demo KEEP=1 (Ctrl-C stops it)."
fi
