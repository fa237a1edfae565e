package team

import (
	"context"
	"fmt"
	"slices"

	"google.golang.org/protobuf/proto"

	"github.com/betcode-dev/betcode/agent/eventlog"
	"github.com/betcode-dev/betcode/agent/session"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// Sessions is what the service reads of the agent's sessions.
type Sessions interface {
	// Pending returns the events of session id's open permission requests
	// and questions; an error wrapping session.ErrNotFound when there is no
	// such session.
	Pending(ctx context.Context, id string) ([]*pb.AgentEvent, error)
	// Events calls fn, in sequence order, with every committed event of
	// session id whose kind (session.Kind) is one of kinds, until fn
	// returns an error, which Events returns. fn may keep the event.
	Events(ctx context.Context, id string, kinds []string, fn func(*pb.AgentEvent) error) error
}

// ManagerSessions adapts the daemon's session manager to Sessions.
type ManagerSessions struct{ M *session.Manager }

var _ Sessions = ManagerSessions{}

// Pending loads the session and returns its open prompts.
func (s ManagerSessions) Pending(ctx context.Context, id string) ([]*pb.AgentEvent, error) {
	sess, err := s.M.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	return sess.Pending(), nil
}

// Events reads the session's events from the event log; the kinds not
// asked for are skipped without being decoded.
func (s ManagerSessions) Events(ctx context.Context, id string, kinds []string, fn func(*pb.AgentEvent) error) error {
	return s.M.Log().Since(ctx, id, 0, func(e eventlog.Event) error {
		if !slices.Contains(kinds, e.Kind) {
			return nil
		}
		ev := &pb.AgentEvent{}
		if err := proto.Unmarshal(e.Payload, ev); err != nil {
			return fmt.Errorf("decode event %d of session %s: %w", e.Seq, id, err)
		}
		return fn(ev)
	})
}
