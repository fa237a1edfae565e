package team

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"slices"

	"google.golang.org/grpc/codes"

	"github.com/betcode-dev/betcode/agent/server"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// Options configure a Service. Sessions, Subagents and Store are required.
type Options struct {
	Logger *slog.Logger
	// Sessions reads the sessions' event logs and open prompts.
	Sessions Sessions
	// Subagents is the agent's SubagentService (subagent.Disabled when the
	// flag is off: then a session has no subagent teammates and no
	// orchestration tasks).
	Subagents Subagents
	// Store keeps the teammate and skill specs.
	Store *Store
}

// Subagents is the part of SubagentService (pb.SubagentServiceServer) the
// service reads. An UNIMPLEMENTED answer (the flag is off, or the RPC not
// served) counts as none.
type Subagents interface {
	ListSubagents(context.Context, *pb.ListSubagentsRequest) (*pb.ListSubagentsResponse, error)
	ListOrchestrations(context.Context, *pb.ListOrchestrationsRequest) (*pb.ListOrchestrationsResponse, error)
}

var _ Subagents = pb.SubagentServiceServer(nil)

// Validate reports a missing required option.
func (o Options) Validate() error {
	switch {
	case o.Sessions == nil:
		return errors.New("team: Options.Sessions is required")
	case o.Subagents == nil:
		return errors.New("team: Options.Subagents is required")
	case o.Store == nil:
		return errors.New("team: Options.Store is required")
	}
	return nil
}

// Service implements pb.TeamServiceServer. It holds no state of its own
// besides the Store, and starts no goroutine.
type Service struct {
	pb.UnimplementedTeamServiceServer

	opt Options
}

var _ pb.TeamServiceServer = (*Service)(nil)

// New returns a Service.
func New(opt Options) (*Service, error) {
	if err := opt.Validate(); err != nil {
		return nil, err
	}
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	return &Service{opt: opt}, nil
}

// ListTeammates lists a session's subagents and Task-tool subagents,
// oldest first.
func (s *Service) ListTeammates(ctx context.Context, req *pb.ListTeammatesRequest) (*pb.ListTeammatesResponse, error) {
	list, err := s.teammates(ctx, req.GetSessionId())
	if err != nil {
		return nil, err
	}
	return &pb.ListTeammatesResponse{Teammates: list}, nil
}

// GetTeammate returns one teammate of a session.
func (s *Service) GetTeammate(ctx context.Context, req *pb.GetTeammateRequest) (*pb.GetTeammateResponse, error) {
	if req.GetAgentId() == "" {
		return nil, fail(codes.InvalidArgument, server.CodeInvalidArgument, "agent_id is required")
	}
	list, err := s.teammates(ctx, req.GetSessionId())
	if err != nil {
		return nil, err
	}
	for _, t := range list {
		if t.GetAgentId() == req.GetAgentId() {
			return &pb.GetTeammateResponse{Teammate: t}, nil
		}
	}
	return nil, fail(codes.NotFound, CodeTeammateNotFound, "session %s has no teammate %q", req.GetSessionId(), req.GetAgentId())
}

// teammates reads a session's teammates.
func (s *Service) teammates(ctx context.Context, sessionID string) ([]*pb.Teammate, error) {
	pending, err := s.opt.Sessions.Pending(ctx, sessionID)
	if err != nil {
		return nil, sessionStatus(err, "list teammates")
	}
	subs, err := s.subagents(ctx, sessionID)
	if err != nil {
		return nil, commonStatus(err, "list subagents")
	}
	var out []*pb.Teammate
	for _, sa := range subs {
		// A finished subagent's output is its result: only its prompt is
		// read from its session.
		prompt, text, err := s.sessionText(ctx, sa.GetSessionId(), sa.GetResult() != "")
		if err != nil {
			return nil, commonStatus(err, "read subagent "+sa.GetId())
		}
		out = append(out, subagentTeammate(sa, prompt, text))
	}
	fold := newTaskToolFold(sessionID)
	err = s.opt.Sessions.Events(ctx, sessionID, taskToolKinds, func(ev *pb.AgentEvent) error {
		fold.add(ev)
		return nil
	})
	if err != nil {
		return nil, sessionStatus(err, "read session events")
	}
	out = append(out, fold.teammates(pending)...)
	slices.SortStableFunc(out, func(a, b *pb.Teammate) int {
		return cmp.Compare(a.GetCreatedAt().AsTime().UnixNano(), b.GetCreatedAt().AsTime().UnixNano())
	})
	return out, nil
}
