package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/betcode-dev/betcode/agent/claude"
	"github.com/betcode-dev/betcode/agent/eventlog"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// ErrBusy refuses an operation that needs the session idle.
var ErrBusy = errors.New("Session has active turn")

// CompactResult is what CompactSession reports.
type CompactResult struct {
	MessagesBefore, MessagesAfter int
	TokensSaved                   uint64
}

// compactMeta is the compact_metadata of a system/compact_boundary line.
type compactMeta struct {
	PreTokens  uint64 `json:"pre_tokens"`
	PostTokens uint64 `json:"post_tokens"`
}

// Compact shortens the session as the spec's "Session Compaction" says: only
// when idle; a COMPACTING status; events before the start of the last
// complete exchange are deleted from the log (SessionInfo kept); replays
// from before that boundary get a SessionInfo snapshot with is_compacted;
// and, when Claude has history, its own /compact summarises its context.
func (s *Session) Compact(ctx context.Context) (CompactResult, error) {
	var res CompactResult
	if s.m.Draining() {
		return res, ErrDraining
	}
	s.compactMu.Lock()
	defer s.compactMu.Unlock()
	if s.Busy() {
		return res, ErrBusy
	}
	if err := s.m.log.Flush(ctx); err != nil {
		return res, fmt.Errorf("flush log: %w", err)
	}
	before, err := s.m.log.Count(ctx, s.id)
	if err != nil {
		return res, fmt.Errorf("count events: %w", err)
	}
	res.MessagesBefore = before
	// The boundary is the first event after the second-to-last TurnComplete.
	var prev, lastTC uint64
	err = s.m.log.Since(ctx, s.id, 0, func(e eventlog.Event) error {
		if e.Kind == "turn_complete" {
			prev, lastTC = lastTC, e.Seq
		}
		return nil
	})
	if err != nil {
		return res, fmt.Errorf("scan events: %w", err)
	}
	s.emitStatus(ctx, nil, pb.AgentStatus_COMPACTING, "compacting the session")
	boundary := prev + 1
	if boundary > 1 {
		if _, err := s.m.log.DeleteBefore(ctx, s.id, boundary, "session_info"); err != nil {
			s.emitStatus(ctx, nil, pb.AgentStatus_IDLE, "")
			return res, fmt.Errorf("compaction failed: %w", err)
		}
		s.mu.Lock()
		if boundary > s.meta.CompactionSeq {
			s.meta.CompactionSeq = boundary
		}
		s.mu.Unlock()
		s.saveMeta(ctx)
	}
	s.mu.Lock()
	started := s.meta.ClaudeStarted
	tokensBefore := s.contextTokens
	s.lastCompact = nil
	s.mu.Unlock()
	if started {
		// Claude Code summarises its own context.
		if err := s.Send(ctx, Message{ClientID: s.LockHolder(), Text: "/compact", internal: true}); err != nil {
			s.emitStatus(ctx, nil, pb.AgentStatus_IDLE, "")
			return res, fmt.Errorf("compaction failed: %w", err)
		}
		if err := s.Stream(ctx, StreamOptions{From: s.LastSeq(), UntilIdle: true}, func(*pb.AgentEvent) error { return nil }); err != nil {
			return res, fmt.Errorf("compaction failed: %w", err)
		}
		s.mu.Lock()
		if cm := s.lastCompact; cm != nil && cm.PreTokens > cm.PostTokens {
			res.TokensSaved = cm.PreTokens - cm.PostTokens
		} else if tokensBefore > s.contextTokens {
			res.TokensSaved = tokensBefore - s.contextTokens
		}
		s.mu.Unlock()
	} else {
		s.emitStatus(ctx, nil, pb.AgentStatus_IDLE, "")
	}
	if err := s.m.log.Flush(ctx); err != nil {
		return res, fmt.Errorf("flush log: %w", err)
	}
	after, err := s.m.log.Count(ctx, s.id)
	if err != nil {
		return res, fmt.Errorf("count events: %w", err)
	}
	res.MessagesAfter = after
	s.m.cfg.Logger.Info("session: compacted", "session_id", s.id, "boundary", boundary, "before", before, "after", after, "tokens_saved", res.TokensSaved)
	return res, nil
}

// noteCompactBoundary records Claude's own compaction figures.
func (s *Session) noteCompactBoundary(env *claude.Envelope) {
	var line struct {
		Meta compactMeta `json:"compact_metadata"`
	}
	if json.Unmarshal(env.Raw, &line) != nil {
		return
	}
	s.mu.Lock()
	s.lastCompact = &line.Meta
	s.mu.Unlock()
}

// maybeAutoCompact compacts in the background when the last turn's context
// passed the configured threshold.
func (s *Session) maybeAutoCompact() {
	limit := s.m.AutoCompactTokens()
	s.mu.Lock()
	tokens := s.contextTokens
	s.mu.Unlock()
	if limit == 0 || tokens <= limit {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		// Wait until the turn's last events are out, then compact.
		if err := s.Stream(ctx, StreamOptions{From: s.LastSeq(), UntilIdle: true}, func(*pb.AgentEvent) error { return nil }); err != nil {
			return
		}
		if _, err := s.Compact(ctx); err != nil && !errors.Is(err, ErrBusy) && !errors.Is(err, ErrDraining) {
			s.m.cfg.Logger.Warn("session: auto-compaction failed", "session_id", s.id, "err", err)
		}
	}()
}

// compactedSnapshot is sent instead of events deleted by compaction.
func (s *Session) compactedSnapshot(boundary uint64) *pb.AgentEvent {
	s.mu.Lock()
	info := s.info(false)
	s.mu.Unlock()
	info.IsCompacted = true
	return &pb.AgentEvent{Sequence: boundary - 1, Event: &pb.AgentEvent_SessionInfo{SessionInfo: info}}
}
