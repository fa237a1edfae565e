// Package betcodepb holds the Go code generated from the BetCode gRPC API,
// package betcode.v1 (proto/betcode/v1): message types and the client and
// server stubs of AgentService, SessionService, SubagentService, TeamService,
// WorktreeService, MachineService, TunnelService, ConfigService,
// GitLabService, VersionService and BetCodeHealth.
//
// The *.pb.go files are generated; do not edit them (doc.go and
// spec_test.go are hand-written). Regenerate with
// `make proto` or `go generate`, which install the pinned buf and protoc
// plugins first. docs/api.md describes the API's versioning policy and where
// it departs from the specification.
package betcodepb

//go:generate bash ../../scripts/proto.sh
