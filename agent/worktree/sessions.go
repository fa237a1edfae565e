package worktree

import (
	"context"

	"github.com/betcode-dev/betcode/agent/eventlog"
	"github.com/betcode-dev/betcode/agent/session"
)

// SessionRef is a session that runs in a worktree.
type SessionRef struct {
	ID     string
	Active bool // a turn is running
}

// Sessions is what the service needs of the session manager.
type Sessions interface {
	// InWorktree returns the sessions whose worktree is id, most recently
	// updated first.
	InWorktree(ctx context.Context, id string) ([]SessionRef, error)
	// Move moves an idle session to dir in worktree worktreeID and
	// returns where it was (session.ErrBusy for a running turn).
	Move(ctx context.Context, sessionID, dir, worktreeID string) (prevDir, prevWorktree string, err error)
	// Close stops the session's CLI and tells its clients why.
	Close(ctx context.Context, sessionID, code, msg string) error
}

// ManagerSessions adapts the daemon's session manager to Sessions.
type ManagerSessions struct{ M *session.Manager }

var _ Sessions = ManagerSessions{}

// InWorktree lists the manager's sessions in worktree id.
func (s ManagerSessions) InWorktree(ctx context.Context, id string) ([]SessionRef, error) {
	list, _, err := s.M.List(ctx, eventlog.SessionFilter{WorktreeID: id})
	if err != nil {
		return nil, err
	}
	out := make([]SessionRef, 0, len(list))
	for _, m := range list {
		out = append(out, SessionRef{ID: m.ID, Active: m.Status == session.StatusActive})
	}
	return out, nil
}

// Move calls (*session.Manager).MoveSession.
func (s ManagerSessions) Move(ctx context.Context, sessionID, dir, worktreeID string) (string, string, error) {
	return s.M.MoveSession(ctx, sessionID, dir, worktreeID)
}

// Close calls (*session.Manager).CloseSession.
func (s ManagerSessions) Close(ctx context.Context, sessionID, code, msg string) error {
	return s.M.CloseSession(ctx, sessionID, code, msg)
}
