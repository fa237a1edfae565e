#!/usr/bin/env bash
# buf-breaking.sh checks proto/ for breaking changes (rules: FILE, set in
# proto/buf.yaml) against proto/ at an earlier commit, by default the
# previous commit (HEAD~1). Override with BUF_BREAKING_REF, e.g.
# BUF_BREAKING_REF=HEAD to check uncommitted edits, or
# BUF_BREAKING_REF=origin/main on a feature branch.
#
# It succeeds with a note when there is nothing to compare against: no git
# repository, no such commit (first commit), or no protos at that commit.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ref="${BUF_BREAKING_REF:-HEAD~1}"

if ! git -C "$root" rev-parse --git-dir >/dev/null 2>&1; then
	echo "buf-breaking: not a git checkout; skipped."
	exit 0
fi
if ! sha="$(git -C "$root" rev-parse --verify --quiet "$ref^{commit}")"; then
	echo "buf-breaking: no commit $ref (first commit or shallow clone); skipped."
	exit 0
fi
if ! git -C "$root" ls-tree -r --name-only "$sha" -- proto/ | grep -q '\.proto$'; then
	echo "buf-breaking: $ref (${sha:0:12}) has no proto files yet; skipped."
	exit 0
fi

# shellcheck source=scripts/proto-tools.sh
. "$root/scripts/proto-tools.sh"

gitdir="$(cd "$root" && cd "$(git rev-parse --git-common-dir)" && pwd)"
cd "$root"
echo "buf-breaking: comparing proto/ with $ref (${sha:0:12})"
buf breaking proto --against "$gitdir#ref=$sha,subdir=proto"
echo "buf-breaking: no breaking changes."
