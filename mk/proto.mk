# mk/proto.mk: protobuf API targets. Include from the top-level Makefile:
#
#   include mk/proto.mk
#
# proto         regenerate shared/betcodepb from proto/betcode/v1
# proto-check   regenerate and fail if the checked-in generated code differs
#               (or is not committed; PROTO_CHECK_GIT=0 skips that part)
# buf-lint      buf build + buf lint + buf format check
# buf-breaking  buf breaking against proto/ at HEAD~1 (BUF_BREAKING_REF=...)
# proto-tools   install the pinned buf / protoc-gen-go / protoc-gen-go-grpc
#
# The scripts install the pinned tools themselves (versions in
# scripts/proto-tools.sh) into ~/.cache/betcode/tools, or $BETCODE_TOOLS_DIR.

PROTO_ROOT := $(abspath $(dir $(lastword $(MAKEFILE_LIST)))..)

.PHONY: proto proto-check buf-lint buf-breaking proto-tools

proto:
	bash $(PROTO_ROOT)/scripts/proto.sh

proto-check:
	bash $(PROTO_ROOT)/scripts/proto-check.sh

buf-lint:
	bash $(PROTO_ROOT)/scripts/buf-lint.sh

buf-breaking:
	bash $(PROTO_ROOT)/scripts/buf-breaking.sh

proto-tools:
	bash $(PROTO_ROOT)/scripts/proto-tools.sh
