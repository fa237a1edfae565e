package subagent

import (
	"context"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// Disabled serves SubagentService while the subagent_orchestration flag is
// off: every call fails with ErrDisabled (UNIMPLEMENTED, NOT_IMPLEMENTED).
type Disabled struct {
	pb.UnimplementedSubagentServiceServer
}

var _ pb.SubagentServiceServer = Disabled{}

// SpawnSubagent fails with ErrDisabled.
func (Disabled) SpawnSubagent(context.Context, *pb.SpawnSubagentRequest) (*pb.SpawnSubagentResponse, error) {
	return nil, ErrDisabled
}

// ListSubagents fails with ErrDisabled.
func (Disabled) ListSubagents(context.Context, *pb.ListSubagentsRequest) (*pb.ListSubagentsResponse, error) {
	return nil, ErrDisabled
}

// CancelSubagent fails with ErrDisabled.
func (Disabled) CancelSubagent(context.Context, *pb.CancelSubagentRequest) (*pb.CancelSubagentResponse, error) {
	return nil, ErrDisabled
}

// WatchSubagent fails with ErrDisabled.
func (Disabled) WatchSubagent(*pb.WatchSubagentRequest, pb.SubagentService_WatchSubagentServer) error {
	return ErrDisabled
}

// CreateOrchestration fails with ErrDisabled.
func (Disabled) CreateOrchestration(context.Context, *pb.CreateOrchestrationRequest) (*pb.CreateOrchestrationResponse, error) {
	return nil, ErrDisabled
}

// WatchOrchestration fails with ErrDisabled.
func (Disabled) WatchOrchestration(*pb.WatchOrchestrationRequest, pb.SubagentService_WatchOrchestrationServer) error {
	return ErrDisabled
}

// CancelOrchestration fails with ErrDisabled.
func (Disabled) CancelOrchestration(context.Context, *pb.CancelOrchestrationRequest) (*pb.CancelOrchestrationResponse, error) {
	return nil, ErrDisabled
}

// ListOrchestrations fails with ErrDisabled.
func (Disabled) ListOrchestrations(context.Context, *pb.ListOrchestrationsRequest) (*pb.ListOrchestrationsResponse, error) {
	return nil, ErrDisabled
}
