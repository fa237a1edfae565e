#!/usr/bin/env bash
# proto.sh regenerates the Go code in shared/betcodepb from proto/ with the
# pinned buf and protoc plugins (see proto-tools.sh). Output is
# deterministic: running it twice yields byte-identical files.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=scripts/proto-tools.sh
. "$root/scripts/proto-tools.sh"

# Remove old output first so a deleted .proto leaves no orphaned .pb.go.
# doc.go is hand-written and kept.
rm -f "$root"/shared/betcodepb/*.pb.go
cd "$root/proto"
buf generate
