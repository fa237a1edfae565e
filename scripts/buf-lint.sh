#!/usr/bin/env bash
# buf-lint.sh lints and format-checks proto/ with the pinned buf. Rules and
# the per-file exceptions forced by the spec are in proto/buf.yaml.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=scripts/proto-tools.sh
. "$root/scripts/proto-tools.sh"

cd "$root/proto"
buf build
buf lint
if ! buf format --diff --exit-code; then
	echo "buf-lint: run 'cd proto && buf format -w' to fix formatting." >&2
	exit 1
fi
