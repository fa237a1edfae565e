package team

import (
	"context"
	"fmt"

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
	// Latest is Events newest first.
	Latest(ctx context.Context, id string, kinds []string, fn func(*pb.AgentEvent) error) error
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

// Events reads the session's events of those kinds from the event log;
// the database skips the others.
func (s ManagerSessions) Events(ctx context.Context, id string, kinds []string, fn func(*pb.AgentEvent) error) error {
	return s.M.Log().SinceKinds(ctx, id, 0, kinds, decoded(id, fn))
}

// Latest reads the session's events of those kinds, newest first.
func (s ManagerSessions) Latest(ctx context.Context, id string, kinds []string, fn func(*pb.AgentEvent) error) error {
	return s.M.Log().LatestKinds(ctx, id, kinds, decoded(id, fn))
}

// decoded hands fn each stored event of session id as an AgentEvent.
func decoded(id string, fn func(*pb.AgentEvent) error) func(eventlog.Event) error {
	return func(e eventlog.Event) error {
		ev := &pb.AgentEvent{}
		if err := proto.Unmarshal(e.Payload, ev); err != nil {
			return fmt.Errorf("decode event %d of session %s: %w", e.Seq, id, err)
		}
		return fn(ev)
	}
}
