package session

import (
	"context"
	"errors"
	"fmt"

	"github.com/betcode-dev/betcode/agent/eventlog"
	"github.com/betcode-dev/betcode/agent/transcripts"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// ErrAlreadyAdopted refuses to adopt a session the agent already manages.
var ErrAlreadyAdopted = errors.New("session is already managed by the agent")

// LocalSessions lists the machine's Claude Code sessions (from the
// transcripts in the user's ~/.claude), marking the ones the agent manages.
func (m *Manager) LocalSessions(ctx context.Context, dir string, limit int) ([]transcripts.Info, map[string]bool, error) {
	list, err := m.transcripts.List(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("list Claude Code sessions: %w", err)
	}
	if limit > 0 && len(list) > limit {
		list = list[:limit]
	}
	managed := map[string]bool{}
	for _, t := range list {
		if _, err := m.log.GetSession(ctx, t.SessionID); err == nil {
			managed[t.SessionID] = true
		}
	}
	return list, managed, nil
}

// Adopt takes over a Claude Code session started elsewhere (e.g. in a
// terminal): its transcript is imported into the event log so it replays
// like any other session, and the next message continues it with --resume.
func (m *Manager) Adopt(ctx context.Context, id string) (*Session, int, error) {
	if _, err := m.log.GetSession(ctx, id); err == nil {
		return nil, 0, ErrAlreadyAdopted
	}
	info, err := m.transcripts.Find(id)
	if errors.Is(err, transcripts.ErrNotFound) {
		return nil, 0, ErrNotFound
	}
	if err != nil {
		return nil, 0, fmt.Errorf("find Claude Code session %s: %w", id, err)
	}
	imp, err := transcripts.Import(info.Path)
	if err != nil {
		return nil, 0, fmt.Errorf("import transcript: %w", err)
	}
	now := m.cfg.Now()
	meta := eventlog.Session{
		ID: id, Model: imp.Model, WorkingDirectory: info.WorkingDirectory, Status: StatusIdle,
		ClaudeStarted: true, CreatedAt: info.UpdatedAt, UpdatedAt: now,
		MessageCount: uint32(info.MessageCount), LastMessagePreview: info.LastMessagePreview,
		Metadata: map[string]string{"betcode.adopted_from": info.Path},
	}
	if err := m.log.PutSession(ctx, meta); err != nil {
		return nil, 0, fmt.Errorf("save adopted session: %w", err)
	}
	s := newSession(m, meta, 0)
	// The imported history is not news to watchers: one update announces
	// the session instead.
	s.feedFrom = uint64(len(imp.Events))
	m.mu.Lock()
	m.sessions[id] = s
	delete(m.gone, id) // adopted again after a deletion
	m.mu.Unlock()
	s.emitImported(ctx, imp.Events)
	s.mu.Lock()
	s.publishLocked(&pb.AgentEvent{Event: &pb.AgentEvent_SessionInfo{SessionInfo: s.info(true)}})
	s.mu.Unlock()
	m.cfg.Logger.Info("session: adopted a Claude Code session", "session_id", id, "events", len(imp.Events), "transcript", info.Path)
	return s, len(imp.Events), nil
}

// emitImported persists imported events, keeping their own timestamps.
func (s *Session) emitImported(ctx context.Context, evs []*pb.AgentEvent) {
	for _, ev := range evs {
		ts := ev.Timestamp
		s.emit(ctx, ev)
		if ts != nil {
			ev.Timestamp = ts // the log keeps emit's time; clients see the transcript's
		}
	}
}
