package team

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/betcode-dev/betcode/agent/session"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// SubagentAgentType is the agent type of a SUBAGENT teammate.
const SubagentAgentType = "subagent"

// teammateStatus maps a subagent's status to ccgrid's: pending is
// starting, running working, waiting for the user idle, and every
// terminal status stopped.
func teammateStatus(s pb.SubagentStatus) pb.TeammateStatus {
	switch s {
	case pb.SubagentStatus_SUBAGENT_STATUS_PENDING:
		return pb.TeammateStatus_TEAMMATE_STATUS_STARTING
	case pb.SubagentStatus_SUBAGENT_STATUS_RUNNING:
		return pb.TeammateStatus_TEAMMATE_STATUS_WORKING
	case pb.SubagentStatus_SUBAGENT_STATUS_WAITING_FOR_USER:
		return pb.TeammateStatus_TEAMMATE_STATUS_IDLE
	case pb.SubagentStatus_SUBAGENT_STATUS_COMPLETED, pb.SubagentStatus_SUBAGENT_STATUS_FAILED,
		pb.SubagentStatus_SUBAGENT_STATUS_CANCELLED, pb.SubagentStatus_SUBAGENT_STATUS_SKIPPED:
		return pb.TeammateStatus_TEAMMATE_STATUS_STOPPED
	}
	return pb.TeammateStatus_TEAMMATE_STATUS_UNSPECIFIED
}

// subagentTeammate is the teammate a subagent is; prompt and text (its
// session's first prompt and latest turn's text) are read from its session.
func subagentTeammate(sa *pb.Subagent, prompt, text string) *pb.Teammate {
	out := sa.GetResult()
	if out == "" {
		out = text
	}
	return &pb.Teammate{
		AgentId: sa.GetId(), SessionId: sa.GetParentSessionId(), Name: sa.GetName(), AgentType: SubagentAgentType,
		Status: teammateStatus(sa.GetStatus()), Kind: pb.TeammateKind_TEAMMATE_KIND_SUBAGENT,
		TeammateSessionId: sa.GetSessionId(), Output: head(out, MaxText), SubagentStatus: sa.GetStatus(),
		Error: sa.GetError(), OrchestrationId: sa.GetOrchestrationId(), StepId: sa.GetStepId(),
		Prompt: head(prompt, MaxText), CreatedAt: sa.GetCreatedAt(), FinishedAt: sa.GetFinishedAt(),
		CostUsd: sa.GetUsage().GetCostUsd(),
	}
}

// errStop ends an event scan early.
var errStop = errors.New("stop")

// sessionText reads a session's first prompt and, unless promptOnly, the
// text of its latest turn so far. A session that is gone reads as empty.
func (s *Service) sessionText(ctx context.Context, id string, promptOnly bool) (prompt, text string, err error) {
	if id == "" {
		return "", "", nil
	}
	var seen bool
	var t tail
	err = s.opt.Sessions.Events(ctx, id, []string{kindUserInput, kindText}, func(ev *pb.AgentEvent) error {
		switch e := ev.Event.(type) {
		case *pb.AgentEvent_UserInput:
			if !seen {
				prompt, seen = e.UserInput.GetContent(), true
				if promptOnly {
					return errStop
				}
			}
			t.reset()
		case *pb.AgentEvent_TextDelta:
			if ev.GetParentToolUseId() == "" {
				t.write(e.TextDelta.GetText())
			}
		}
		return nil
	})
	if errors.Is(err, errStop) || errors.Is(err, session.ErrNotFound) {
		err = nil
	}
	return prompt, t.String(), err
}

// subagents lists the subagents of a session through SubagentService; with
// the flag off (UNIMPLEMENTED) there are none.
func (s *Service) subagents(ctx context.Context, sessionID string) ([]*pb.Subagent, error) {
	resp, err := s.opt.Subagents.ListSubagents(ctx, &pb.ListSubagentsRequest{ParentSessionId: sessionID})
	if status.Code(err) == codes.Unimplemented {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return resp.GetSubagents(), nil
}

// orchestrations lists the orchestrations of a session through
// SubagentService; UNIMPLEMENTED (the flag is off) is none.
func (s *Service) orchestrations(ctx context.Context, sessionID string) ([]*pb.Orchestration, error) {
	resp, err := s.opt.Subagents.ListOrchestrations(ctx, &pb.ListOrchestrationsRequest{ParentSessionId: sessionID})
	if status.Code(err) == codes.Unimplemented {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return resp.GetOrchestrations(), nil
}
