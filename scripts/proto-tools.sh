#!/usr/bin/env bash
# proto-tools.sh installs the pinned protobuf toolchain and puts it first on
# PATH. Source it (". scripts/proto-tools.sh") from the other proto scripts,
# or run it to install the tools and print the directories to add to PATH.
#
# Each tool is built from source with `go install pkg@version` (only the Go
# module proxy is needed) into its own versioned directory, so bumping a pin
# below installs the new version next to the old one and never reuses a
# stale binary. The default location is ~/.cache/betcode/tools (kept between CI runs);
# set BETCODE_TOOLS_DIR to share one cache between checkouts.

# Pinned versions. protoc-gen-go must match google.golang.org/protobuf in
# shared/go.mod so the generated code and the runtime agree.
BUF_VERSION="${BUF_VERSION:-v1.75.0}"
PROTOC_GEN_GO_VERSION="${PROTOC_GEN_GO_VERSION:-v1.36.12}"
PROTOC_GEN_GO_GRPC_VERSION="${PROTOC_GEN_GO_GRPC_VERSION:-v1.6.2}"

proto_tools_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BETCODE_TOOLS_DIR="${BETCODE_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/betcode/tools}"

# proto_tool_install NAME VERSION PACKAGE: echo the directory holding NAME at
# VERSION, installing it there first if missing.
proto_tool_install() {
	local name="$1" version="$2" pkg="$3"
	local dir="$BETCODE_TOOLS_DIR/$name@$version"
	if [[ ! -x "$dir/$name" ]]; then
		echo "installing $pkg@$version into $dir" >&2
		mkdir -p "$dir"
		# GOWORK=off: pkg@version installs ignore the workspace anyway; say so
		# explicitly so a broken go.work cannot interfere.
		GOWORK=off GOBIN="$dir" GOFLAGS=-mod=mod go install "$pkg@$version" >&2
	fi
	echo "$dir"
}

proto_tools_path() {
	local buf gen_go gen_go_grpc
	buf="$(proto_tool_install buf "$BUF_VERSION" github.com/bufbuild/buf/cmd/buf)" || return 1
	gen_go="$(proto_tool_install protoc-gen-go "$PROTOC_GEN_GO_VERSION" google.golang.org/protobuf/cmd/protoc-gen-go)" || return 1
	gen_go_grpc="$(proto_tool_install protoc-gen-go-grpc "$PROTOC_GEN_GO_GRPC_VERSION" google.golang.org/grpc/cmd/protoc-gen-go-grpc)" || return 1
	echo "$buf:$gen_go:$gen_go_grpc"
}

if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
	set -euo pipefail
	proto_tools_path
else
	_proto_tools_dirs="$(proto_tools_path)" || return 1
	export PATH="$_proto_tools_dirs:$PATH"
	unset _proto_tools_dirs
fi
