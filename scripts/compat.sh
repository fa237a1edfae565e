#!/usr/bin/env bash
# Runs the end-to-end suites against several Claude Code releases and prints,
# per version, how many tests passed and failed and which ones failed.
#
#   scripts/compat.sh                      versions.TestedMin, .Pinned, the newest on npm
#   scripts/compat.sh 2.1.300 latest       those versions ("pinned", "min", "latest" resolve)
#   COMPAT_PKGS="./agent/e2e/" COMPAT_TIMEOUT=10m scripts/compat.sh
#   COMPAT_UPDATE_DOC=1 scripts/compat.sh  also replace the table in docs/compat.md
#
# Each version is installed by scripts/install-claude.sh into its own
# directory and handed to the tests through BETCODE_CLAUDE_BIN (see package
# claudecli). The table goes to stdout and to $COMPAT_OUT (compat.out); the
# go test -json logs stay in $COMPAT_LOGS for a closer look. The script exits
# non-zero when any version fails a test or cannot be installed.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
VERSIONS_GO=shared/claudecli/versions/versions.go
GO="${GO:-go}"
PKGS="${COMPAT_PKGS:-./agent/e2e/ ./relay/e2e/}"
TIMEOUT="${COMPAT_TIMEOUT:-15m}"
OUT="${COMPAT_OUT:-compat.out}"
LOGS="${COMPAT_LOGS:-${TMPDIR:-/tmp}/betcode-compat}"
DOC=docs/compat.md

const() { sed -nE "s/^[[:space:]]*$1[[:space:]]*=[[:space:]]*\"([^\"]+)\".*/\\1/p" "$VERSIONS_GO"; }

# resolve prints the version a name stands for, or nothing when it cannot
# be resolved (npm unreachable for "latest").
resolve() {
	case "$1" in
	pinned) const Pinned ;;
	min) const TestedMin ;;
	max) const TestedMax ;;
	latest) timeout 60 npm view @anthropic-ai/claude-code version 2>/dev/null || true ;;
	*) echo "$1" ;;
	esac
}

# shellcheck disable=SC2206 # word splitting of the list is the point
names=(${COMPAT_VERSIONS:-min pinned latest})
[ $# -gt 0 ] && names=("$@")
versions=()
for n in "${names[@]}"; do
	v="$(resolve "$n")"
	if [ -z "$v" ]; then
		echo "compat.sh: cannot resolve $n (is the npm registry reachable?); skipped" >&2
		continue
	fi
	[[ " ${versions[*]} " == *" $v "* ]] || versions+=("$v")
done
[ ${#versions[@]} -gt 0 ] || { echo "compat.sh: no version to test" >&2; exit 2; }

mkdir -p "$LOGS"
rows=()
status=0
for v in "${versions[@]}"; do
	note=""
	[ "$v" = "$(const Pinned)" ] && note=" (pinned)"
	echo "compat.sh: Claude Code $v$note: installing" >&2
	if ! bin="$(./scripts/install-claude.sh "$v" 2>"$LOGS/install-$v.log")"; then
		rows+=("| $v$note | - | - | - | install failed: see $LOGS/install-$v.log |")
		status=1
		continue
	fi
	got="$("$bin" --version 2>/dev/null | head -n1 || true)"
	echo "compat.sh: Claude Code $v$note ($got): go test $PKGS" >&2
	log="$LOGS/test-$v.json"
	start=$SECONDS
	# shellcheck disable=SC2086 # PKGS is a list
	BETCODE_CLAUDE_BIN="$bin" timeout --kill-after=30s "$(( $(sed -E 's/h$/*3600/; s/m$/*60/; s/s$//' <<<"$TIMEOUT") + 120 ))" \
		"$GO" test -race -count=1 -timeout "$TIMEOUT" -json $PKGS >"$log" 2>&1 || true
	took=$(( SECONDS - start ))
	# test2json writes Time, Action, Package, Test in that order; a Test
	# without "/" is a top-level test, and a fail line without Test is a
	# package that failed outside any test (build error, timeout, panic).
	pass=$(grep -cE '"Action":"pass","Package":"[^"]*","Test":"[^"/]*",' "$log" || true)
	skip=$(grep -cE '"Action":"skip","Package":"[^"]*","Test":"[^"/]*",' "$log" || true)
	failed=$(sed -nE 's/.*"Action":"fail","Package":"[^"]*","Test":"([^"/]*)",.*/\1/p' "$log" | sort -u)
	pkgfail=$(sed -nE 's/.*"Action":"fail","Package":"([^"]*)","Elapsed".*/\1/p' "$log" | sed 's#.*/betcode/##' | sort -u)
	nfail=$(grep -c . <<<"$failed" || true)
	names_failed=$(tr '\n' ' ' <<<"$failed" | sed 's/ $//')
	if [ -n "$pkgfail" ] && [ -z "$failed" ]; then
		names_failed="package failed outside a test: $(tr '\n' ' ' <<<"$pkgfail" | sed 's/ $//'); see $log"
	fi
	if [ -z "$pkgfail" ] && [ "$pass" = 0 ]; then
		names_failed="no test ran; see $log"
	fi
	if [ -n "$pkgfail" ] || [ "$nfail" != 0 ] || [ "$pass" = 0 ]; then
		status=1
	fi
	rows+=("| $v$note | $pass | $nfail | $skip | ${names_failed:--} (${took}s) |")
done

{
	echo "Measured $(date -u +%Y-%m-%d) with \`scripts/compat.sh ${names[*]}\` ($($GO env GOVERSION), $(uname -sm), node $(node --version 2>/dev/null || echo '?'))."
	echo "Packages: \`$PKGS\`, \`go test -race -count=1 -timeout $TIMEOUT\`; counts are top-level tests."
	echo
	echo "| Claude Code | passed | failed | skipped | failing tests (wall time) |"
	echo "| --- | --- | --- | --- | --- |"
	printf '%s\n' "${rows[@]}"
} | tee "$OUT"

if [ "${COMPAT_UPDATE_DOC:-}" = 1 ]; then
	tmp="$(mktemp)"
	awk -v table="$OUT" '
		/<!-- compat:begin -->/ { print; while ((getline line < table) > 0) print line; skip = 1; next }
		/<!-- compat:end -->/ { skip = 0 }
		!skip { print }
	' "$DOC" >"$tmp" && mv "$tmp" "$DOC"
	echo "compat.sh: updated $DOC" >&2
fi
exit $status
