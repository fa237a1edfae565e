// Package machinesvc implements MachineService: the user's machines, their
// status, and which one the user's calls go to.
package machinesvc

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/betcode-dev/betcode/relay/auth"
	"github.com/betcode-dev/betcode/relay/internal/grpcerr"
	"github.com/betcode-dev/betcode/relay/registry"
	"github.com/betcode-dev/betcode/relay/store"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// Authorizer decides which machines a user may reach.
type Authorizer interface {
	CanReach(ctx context.Context, userID, owner, team string) (bool, error)
}

// Service implements MachineService. A user sees the machines they own and
// those of their teams; any other machine answers NOT_FOUND, exactly as one
// that does not exist.
type Service struct {
	pb.UnimplementedMachineServiceServer
	Store    store.Store
	Auth     Authorizer
	Registry *registry.Registry
	// Self is this replica's advertised address; with it set, a machine
	// whose tunnel another live replica holds is ONLINE too. Empty (a
	// single replica): only this replica's tunnels count.
	Self string
	// PresenceTTL is how long a recorded replica stays live after the
	// machine's last heartbeat (store.Machine.LiveReplica).
	PresenceTTL time.Duration
}

func (s *Service) toProto(m store.Machine) *pb.Machine {
	st := pb.MachineStatus_OFFLINE
	if s.online(&m) {
		st = pb.MachineStatus_ONLINE
	}
	out := &pb.Machine{
		Id: m.ID, Name: m.Name, Hostname: m.Hostname, Status: st, Capabilities: m.Capabilities,
		Resources: &pb.MachineResources{Os: m.OS, CpuCores: m.CPUCores, MemoryBytes: m.MemoryBytes, DiskFreeBytes: m.DiskFreeBytes},
	}
	if !m.LastSeen.IsZero() {
		out.LastSeen = timestamppb.New(m.LastSeen)
	}
	return out
}

// online reports whether m has a tunnel on this replica or, with several
// replicas, on another live one. A record naming this replica without a
// local tunnel is stale (the tunnel just ended).
func (s *Service) online(m *store.Machine) bool {
	if s.Registry.Get(m.ID) != nil {
		return true
	}
	if s.Self == "" {
		return false
	}
	r := m.LiveReplica(time.Now(), s.PresenceTTL)
	return r != "" && r != s.Self
}

// ListMachines lists the caller's machines.
func (s *Service) ListMachines(ctx context.Context, _ *pb.ListMachinesRequest) (*pb.ListMachinesResponse, error) {
	user := auth.UserID(ctx)
	if user == "" {
		return nil, status.Error(codes.Unauthenticated, "this call needs a token (betcode login)")
	}
	ms, err := s.Store.ListMachines(ctx, user)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "list machines: %v", err)
	}
	resp := &pb.ListMachinesResponse{}
	for _, m := range ms {
		resp.Machines = append(resp.Machines, s.toProto(m))
	}
	return resp, nil
}

// GetMachine returns one of the caller's machines.
func (s *Service) GetMachine(ctx context.Context, req *pb.GetMachineRequest) (*pb.Machine, error) {
	user := auth.UserID(ctx)
	if user == "" {
		return nil, status.Error(codes.Unauthenticated, "this call needs a token (betcode login)")
	}
	if req.MachineId == "" {
		return nil, status.Error(codes.InvalidArgument, "machine_id is required")
	}
	m, err := s.Store.GetMachine(ctx, req.MachineId)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, status.Errorf(codes.Internal, "get machine: %v", err)
	}
	ok := false
	if err == nil && m.RevokedAt.IsZero() {
		if ok, err = s.Auth.CanReach(ctx, user, m.OwnerID, m.TeamID); err != nil {
			return nil, status.Errorf(codes.Unavailable, "check access: %v", err)
		}
	}
	if !ok {
		return nil, notFound(req.MachineId)
	}
	return s.toProto(m), nil
}

// SwitchMachine makes a machine the caller's current one.
func (s *Service) SwitchMachine(ctx context.Context, req *pb.SwitchMachineRequest) (*pb.SwitchMachineResponse, error) {
	m, err := s.GetMachine(ctx, &pb.GetMachineRequest{MachineId: req.MachineId})
	if err != nil {
		return nil, err
	}
	prev, err := s.Store.SetCurrentMachine(ctx, auth.UserID(ctx), req.MachineId)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "switch machine: %v", err)
	}
	return &pb.SwitchMachineResponse{Machine: m, PreviousMachineId: prev}, nil
}

// notFound is the answer for a machine the caller may not see.
func notFound(id string) error {
	return grpcerr.Status(codes.NotFound, "MACHINE_NOT_FOUND", fmt.Sprintf("no machine %q", id), nil).Err()
}
