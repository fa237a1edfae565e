#!/usr/bin/env bash
# proto-check.sh fails when the checked-in generated code in shared/betcodepb
# is not exactly what proto.sh produces from proto/: it regenerates and
# compares. In a clean checkout (CI) this is `git diff --exit-code` on the
# generated code, untracked files included; it also works before the
# generated files are committed.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
gen="$root/shared/betcodepb"

snapshot() {
	(cd "$gen" && find . -type f -name '*.go' -print0 | LC_ALL=C sort -z | xargs -0 sha256sum)
}

before="$(snapshot)"
bash "$root/scripts/proto.sh"
after="$(snapshot)"

if [[ "$before" != "$after" ]]; then
	echo "proto-check: shared/betcodepb is out of date with proto/." >&2
	diff <(echo "$before") <(echo "$after") >&2 || true
	if git -C "$root" rev-parse --git-dir >/dev/null 2>&1; then
		git -C "$root" status --short -- shared/betcodepb >&2 || true
	fi
	echo "proto-check: run 'make proto' and commit the result." >&2
	exit 1
fi

# In a git checkout also insist that every generated file is tracked and
# matches the index, unless the caller only wants the content check
# (PROTO_CHECK_GIT=0, e.g. before the first commit of new protos).
if [[ "${PROTO_CHECK_GIT:-1}" != 0 ]] && git -C "$root" rev-parse --git-dir >/dev/null 2>&1; then
	untracked="$(git -C "$root" ls-files --others --exclude-standard -- shared/betcodepb)"
	if [[ -n "$untracked" ]] || ! git -C "$root" diff --quiet -- shared/betcodepb; then
		echo "proto-check: generated code is up to date but not committed:" >&2
		git -C "$root" status --short -- shared/betcodepb >&2
		echo "proto-check: commit shared/betcodepb (or set PROTO_CHECK_GIT=0)." >&2
		exit 1
	fi
fi
echo "proto-check: shared/betcodepb is up to date."
