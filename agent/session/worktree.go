package session

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/betcode-dev/betcode/agent/bridge"
)

// Worktrees is what the manager needs of the worktree service (package
// worktree): the directory of a worktree id, and the id of the worktree at a
// directory.
type Worktrees interface {
	// WorktreeDir returns the absolute path of worktree id. Its error is
	// returned to the client as it is (a gRPC status error such as
	// WORKTREE_NOT_FOUND).
	WorktreeDir(ctx context.Context, id string) (string, error)
	// WorktreeAt returns the id of the known worktree whose top is dir.
	WorktreeAt(ctx context.Context, dir string) (id string, ok bool)
}

// SetWorktrees lets sessions start in a worktree by id (CreateRequest's
// WorktreeID), and records the worktree of a session started in a
// worktree's directory. Call it before serving.
func (m *Manager) SetWorktrees(w Worktrees) { m.worktrees = w }

// resolveWorktree returns the directory and worktree of a new session: the
// worktree's directory when wt is set (it overrides dir), else dir with the
// id of the worktree at dir, if any.
func (m *Manager) resolveWorktree(ctx context.Context, dir, wt string) (string, string, error) {
	if wt != "" {
		if m.worktrees == nil {
			return "", "", invalidf("worktree_id %q: this agent does not manage worktrees", wt)
		}
		d, err := m.worktrees.WorktreeDir(ctx, wt)
		if err != nil {
			return "", "", err
		}
		return d, wt, nil
	}
	if dir != "" && m.worktrees != nil && filepath.IsAbs(dir) {
		if id, ok := m.worktrees.WorktreeAt(ctx, filepath.Clean(dir)); ok {
			return dir, id, nil
		}
	}
	return dir, "", nil
}

// moveHolder holds a session's input lock while MoveSession stops its CLI,
// so that no message slips in to a CLI about to stop.
const moveHolder = "betcode-agent:worktree-switch"

// MoveSession moves an idle session to dir (in worktree worktreeID, ""
// for none) and returns where it was. A CLI running for the session is
// stopped; the next message starts it again, with --resume, in dir (Claude
// Code finds the session's transcript under any working directory). A
// session with a running turn is refused with ErrBusy.
func (m *Manager) MoveSession(ctx context.Context, id, dir, worktreeID string) (prevDir, prevWorktree string, err error) {
	if !filepath.IsAbs(dir) {
		return "", "", invalidf("directory %q must be an absolute path", dir)
	}
	s, err := m.Get(ctx, id)
	if err != nil {
		return "", "", err
	}
	s.mu.Lock()
	switch {
	case s.deleted.Load():
		s.mu.Unlock()
		return "", "", ErrNotFound
	case s.sentTurns != s.doneTurns || len(s.perms) > 0:
		s.mu.Unlock()
		return "", "", ErrBusy
	}
	prevDir, prevWorktree = s.meta.WorkingDirectory, s.meta.WorktreeID
	s.meta.WorkingDirectory, s.meta.WorktreeID = dir, worktreeID
	s.meta.UpdatedAt = m.cfg.Now()
	holder := s.lockHolder
	s.lockHolder = moveHolder
	s.publishLocked(nil)
	s.mu.Unlock()

	stopped := s.stoppedChan()
	s.stopProcess()
	select {
	case <-stopped:
	case <-ctx.Done():
		// The CLI still stops; the lock is given back when it has.
		go func() {
			<-stopped
			s.restoreHolder(holder)
		}()
		return prevDir, prevWorktree, ctx.Err()
	}
	s.restoreHolder(holder)
	if err := s.persist(context.WithoutCancel(ctx)); err != nil {
		return prevDir, prevWorktree, fmt.Errorf("save session %s: %w", id, err)
	}
	m.cfg.Logger.Info("session: moved", "session_id", id, "from", prevDir, "to", dir, "worktree_id", worktreeID)
	return prevDir, prevWorktree, nil
}

func (s *Session) restoreHolder(holder string) {
	s.mu.Lock()
	if s.lockHolder == moveHolder {
		s.lockHolder = holder
	}
	s.mu.Unlock()
}

// CloseSession stops the session's CLI, ending a running turn as
// cancelled, and tells its clients why with a non-fatal ErrorEvent of code
// and msg. The session and its history stay; its next message starts the
// CLI again in the session's directory.
func (m *Manager) CloseSession(ctx context.Context, id, code, msg string) error {
	s, err := m.Get(ctx, id)
	if err != nil {
		return err
	}
	s.mu.Lock()
	if s.deleted.Load() {
		s.mu.Unlock()
		return ErrNotFound
	}
	if s.sentTurns != s.doneTurns {
		// readLoop then ends the turn as cancelled, not as a crash.
		s.cancelRequested = true
	}
	s.mu.Unlock()
	stopped := s.stoppedChan()
	s.stopProcess()
	select {
	case <-stopped:
	case <-ctx.Done():
		return ctx.Err()
	}
	s.emit(context.WithoutCancel(ctx), bridge.ErrorEvent(code, msg, false))
	if _, err := s.Flush(ctx); err != nil {
		return err
	}
	m.cfg.Logger.Info("session: closed", "session_id", id, "code", code)
	return nil
}
