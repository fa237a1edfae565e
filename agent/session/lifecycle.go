package session

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// MaxNameRunes is the longest display name a session may have.
const MaxNameRunes = 200

// checkName trims a display name and refuses one that is too long.
func checkName(name string) (string, error) {
	name = strings.TrimSpace(name)
	if !utf8.ValidString(name) {
		return "", invalidf("name is not valid UTF-8")
	}
	if n := utf8.RuneCountInString(name); n > MaxNameRunes {
		return "", invalidf("name is %d characters long; the limit is %d", n, MaxNameRunes)
	}
	return name, nil
}

// StartRequest describes a session Start creates.
type StartRequest struct {
	CreateRequest
	// Text and Attachments are the first message; with neither the
	// session is created idle.
	Text        string
	Attachments []*pb.Attachment
	// IdempotencyKey, when set, makes Start idempotent: a repeat returns
	// the session the first call created.
	IdempotencyKey string
}

// startScope is the key/value scope (the session id column) of agent-wide
// entries: StartSession's idempotency keys.
const startScope = ""

const startKeyPrefix = "start/"

// Start creates a session and, when req has a message, sends it as the
// session's first turn, which runs without any client attached (clients
// follow it with Stream or Watch). With an IdempotencyKey that an earlier
// Start used, it returns that session and dup true and starts nothing. If
// the first message cannot be sent (no CLI slot, CLI missing), the new
// session is deleted again and the error returned.
func (m *Manager) Start(ctx context.Context, req StartRequest) (s *Session, dup bool, err error) {
	hasMessage := strings.TrimSpace(req.Text) != "" || len(req.Attachments) > 0
	if hasMessage {
		// Refuse a bad message before anything is created.
		if _, err := m.messageContent(req.Text, req.Attachments); err != nil {
			return nil, false, err
		}
	}
	key := req.IdempotencyKey
	if key != "" {
		release, err := m.claimStartKey(ctx, key)
		if err != nil {
			return nil, false, err
		}
		defer release()
		seen, err := m.log.GetKV(ctx, startScope, startKeyPrefix+key)
		if err != nil {
			return nil, false, fmt.Errorf("check idempotency key: %w", err)
		}
		if id, ok := seen[startKeyPrefix+key]; ok {
			s, err := m.Get(ctx, string(id))
			if !errors.Is(err, ErrNotFound) {
				return s, err == nil, err
			}
			// The session it made was deleted: start afresh.
		}
		if req.Metadata == nil {
			req.Metadata = map[string]string{}
		}
		req.Metadata[metaStartKey] = key
	}
	s, err = m.Create(ctx, req.CreateRequest)
	if err != nil {
		return nil, false, err
	}
	if key != "" {
		if err := m.log.PutKV(context.WithoutCancel(ctx), startScope, startKeyPrefix+key, []byte(s.id)); err != nil {
			m.discard(ctx, s)
			return nil, false, fmt.Errorf("record idempotency key: %w", err)
		}
	}
	if hasMessage {
		if err := s.Send(ctx, Message{SentBy: req.CreatedBy, Text: req.Text, Attachments: req.Attachments}); err != nil {
			m.discard(ctx, s)
			return nil, false, err
		}
	}
	return s, false, nil
}

// discard deletes a session Start could not finish.
func (m *Manager) discard(ctx context.Context, s *Session) {
	if _, err := m.Delete(context.WithoutCancel(ctx), s.id); err != nil {
		m.cfg.Logger.Warn("session: deleting a session that failed to start", "session_id", s.id, "err", err)
	}
}

// claimStartKey waits until no other Start with key runs and claims it.
func (m *Manager) claimStartKey(ctx context.Context, key string) (release func(), err error) {
	for {
		m.startMu.Lock()
		busy, ok := m.starting[key]
		if !ok {
			if m.starting == nil {
				m.starting = map[string]chan struct{}{}
			}
			done := make(chan struct{})
			m.starting[key] = done
			m.startMu.Unlock()
			return func() {
				m.startMu.Lock()
				delete(m.starting, key)
				m.startMu.Unlock()
				close(done)
			}, nil
		}
		m.startMu.Unlock()
		select {
		case <-busy:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Rename sets the session's display name ("" clears it) and returns the
// session's summary.
func (s *Session) Rename(ctx context.Context, name string) (*pb.SessionSummary, error) {
	name, err := checkName(name)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	if s.deleted.Load() {
		s.mu.Unlock()
		return nil, ErrNotFound
	}
	s.meta.Name = name
	s.publishLocked(nil)
	sum := s.summaryLocked()
	s.mu.Unlock()
	if err := s.persist(ctx); err != nil {
		return nil, fmt.Errorf("save session: %w", err)
	}
	return sum, nil
}

// Flush waits until every event the session emitted so far is committed
// and published, and returns the last sequence.
func (s *Session) Flush(ctx context.Context) (uint64, error) {
	if err := s.m.log.Flush(ctx); err != nil {
		return 0, fmt.Errorf("flush event log: %w", err)
	}
	return s.LastSeq(), nil
}

// Delete stops the session's CLI, if one runs (ending a running turn
// without any more events), deletes the session with its events, grants
// and permission log, ends its streams with ErrNotFound and announces the
// deletion to watchers. wasActive reports whether a turn was running. The
// Claude Code transcript in ~/.claude is left alone.
func (m *Manager) Delete(ctx context.Context, id string) (wasActive bool, err error) {
	s, err := m.Get(ctx, id)
	if err != nil {
		return false, err
	}
	// Under emitMu no emit is half done; under mu no message is being sent.
	s.emitMu.Lock()
	s.mu.Lock()
	if s.deleted.Load() {
		s.mu.Unlock()
		s.emitMu.Unlock()
		return false, ErrNotFound // another Delete got there first
	}
	s.deleted.Store(true)
	wasActive = s.sentTurns != s.doneTurns
	dir, key := s.meta.WorkingDirectory, s.meta.Metadata[metaStartKey]
	s.mu.Unlock()
	s.emitMu.Unlock()
	m.mu.Lock()
	if m.gone == nil {
		m.gone = map[string]struct{}{}
	}
	m.gone[id] = struct{}{}
	m.mu.Unlock()

	stopped := s.stoppedChan()
	s.stopProcess()
	<-stopped
	s.clearPending()
	// No event of a deleted session is published: its turn's span ends
	// here, or it would never be exported.
	s.abandonTurnSpans("deleted", whyDeleted)
	s.closeSubscribers(ErrNotFound)

	ctx = context.WithoutCancel(ctx)
	s.saveMu.Lock() // no metadata write is in flight or follows
	_, err = m.log.DeleteSession(ctx, id)
	s.saveMu.Unlock()
	if err != nil {
		return wasActive, err
	}
	if key != "" {
		if err := m.log.DeleteKV(ctx, startScope, startKeyPrefix+key); err != nil {
			m.cfg.Logger.Warn("session: deleting the idempotency key of a deleted session", "session_id", id, "err", err)
		}
	}
	m.mu.Lock()
	if m.sessions[id] == s {
		delete(m.sessions, id)
	}
	m.mu.Unlock()
	m.feed.publish(dir, &pb.SessionUpdate{Session: &pb.SessionSummary{Id: id}, Deleted: true})
	m.cfg.Logger.Info("session: deleted", "session_id", id, "was_active", wasActive)
	return wasActive, nil
}
