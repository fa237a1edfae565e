package session

import (
	"context"
	"fmt"
	"maps"
)

// This file holds what SessionService (package sessionsvc) needs beyond
// AgentService: starting and stopping a session's provider explicitly, and
// reading and writing the session's metadata.

// StartProvider starts the session's provider process if it is not running
// (AgentService starts it with the first message; SessionService at
// creation). It fails as Send does when it cannot.
func (s *Session) StartProvider(ctx context.Context) error {
	if s.m.Draining() {
		return ErrDraining
	}
	if err := s.waitRestartBackoff(ctx); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.deleted.Load() {
		return ErrNotFound
	}
	return s.ensureProcessLocked(ctx)
}

// StopProvider stops the session's provider process, if one runs,
// gracefully, and returns once its output has been read to the end. A
// running turn is ended by the provider (Claude writes its result). The
// next message starts the provider again.
func (s *Session) StopProvider(ctx context.Context) error {
	stopped := s.stoppedChan()
	s.stopProcess()
	select {
	case <-stopped:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("stop provider of session %s: %w", s.id, ctx.Err())
	}
}

// Pid is the process id of the session's running provider, 0 when none
// runs.
func (s *Session) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return 0
	}
	return s.proc.Pid()
}

// Metadata returns a copy of the session's metadata.
func (s *Session) Metadata() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.meta.Metadata)
}

// SetMetadata sets the given metadata keys (an empty value deletes the
// key) and saves the session.
func (s *Session) SetMetadata(ctx context.Context, kv map[string]string) error {
	s.mu.Lock()
	if s.deleted.Load() {
		s.mu.Unlock()
		return ErrNotFound
	}
	if s.meta.Metadata == nil {
		s.meta.Metadata = map[string]string{}
	}
	for k, v := range kv {
		if v == "" {
			delete(s.meta.Metadata, k)
		} else {
			s.meta.Metadata[k] = v
		}
	}
	s.mu.Unlock()
	if err := s.persist(ctx); err != nil {
		return fmt.Errorf("save session %s: %w", s.id, err)
	}
	return nil
}

// Busy reports whether the loaded session id runs a turn; loaded is false
// when the session is not in memory (then no turn runs).
func (m *Manager) Busy(id string) (busy, loaded bool) {
	s := m.loaded(id)
	if s == nil || s.deleted.Load() {
		return false, false
	}
	return s.Busy(), true
}
