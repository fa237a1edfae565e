package session

import (
	"context"
	"fmt"
	"slices"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/betcode-dev/betcode/agent/eventlog"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// Summary is the SessionSummary of a stored session that is not loaded:
// no turn runs and nothing is pending, so its agent status is IDLE.
func Summary(meta eventlog.Session) *pb.SessionSummary {
	return &pb.SessionSummary{
		Id: meta.ID, Model: meta.Model, WorkingDirectory: meta.WorkingDirectory, WorktreeId: meta.WorktreeID,
		Status: meta.Status, MessageCount: meta.MessageCount,
		TotalInputTokens: uint32(min(meta.TotalInputTokens, 1<<32-1)), TotalOutputTokens: uint32(min(meta.TotalOutputTokens, 1<<32-1)),
		TotalCostUsd: meta.TotalCostUSD, CreatedAt: timestamppb.New(meta.CreatedAt), UpdatedAt: timestamppb.New(meta.UpdatedAt),
		LastMessagePreview: meta.LastMessagePreview,
		Name:               meta.Name, CreatedBy: meta.CreatedBy, LastStopReason: meta.LastStopReason,
		AgentStatus: pb.AgentStatus_IDLE, Provider: ProviderOf(meta),
	}
}

// Summary returns the session as ListSessions shows it, with its live
// status, agent status and open prompts.
func (s *Session) Summary() *pb.SessionSummary {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.summaryLocked()
}

// Pending returns the events that asked the session's open permission
// requests and questions (copies), oldest first.
func (s *Session) Pending() []*pb.AgentEvent {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pendingLocked()
}

// summaryLocked is Summary; s.mu is held.
func (s *Session) summaryLocked() *pb.SessionSummary {
	meta := s.meta
	if s.sentTurns != s.doneTurns {
		meta.Status = StatusActive
	}
	sum := Summary(meta)
	for _, p := range s.perms {
		if len(p.events) > 0 {
			sum.PendingPrompts++
		}
	}
	sum.AgentStatus = s.agentStatusLocked()
	return sum
}

// agentStatusLocked is the status clients last saw, except that a session
// with no turn running is IDLE (unless it compacts). s.mu is held.
func (s *Session) agentStatusLocked() pb.AgentStatus {
	busy := s.sentTurns != s.doneTurns
	switch {
	case s.status == pb.AgentStatus_COMPACTING:
		return s.status
	case !busy:
		return pb.AgentStatus_IDLE
	case s.status == pb.AgentStatus_AGENT_STATUS_UNSPECIFIED || s.status == pb.AgentStatus_IDLE:
		// A turn was sent but the CLI has not said anything yet.
		return pb.AgentStatus_THINKING
	}
	return s.status
}

// pendingLocked returns copies of the announced open prompts' events,
// oldest first. s.mu is held.
func (s *Session) pendingLocked() []*pb.AgentEvent {
	var out []*pb.AgentEvent
	for _, p := range s.perms {
		for _, ev := range p.events {
			out = append(out, proto.CloneOf(ev))
		}
	}
	slices.SortFunc(out, func(a, b *pb.AgentEvent) int { return cmpSeq(a.Sequence, b.Sequence) })
	return out
}

func cmpSeq(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Summaries lists stored sessions like List, as summaries with the live
// state of loaded ones.
func (m *Manager) Summaries(ctx context.Context, f eventlog.SessionFilter) ([]*pb.SessionSummary, int, error) {
	list, total, err := m.log.ListSessions(ctx, f)
	if err != nil {
		return nil, 0, fmt.Errorf("list sessions: %w", err)
	}
	out := make([]*pb.SessionSummary, 0, len(list))
	for _, meta := range list {
		if s := m.loaded(meta.ID); s != nil {
			if s.deleted.Load() {
				total--
				continue
			}
			out = append(out, s.Summary())
			continue
		}
		out = append(out, Summary(meta))
	}
	return out, total, nil
}

// loaded returns the in-memory session id, or nil.
func (m *Manager) loaded(id string) *Session {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.sessions[id]
}
