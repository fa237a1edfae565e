package session

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/betcode-dev/betcode/agent/provider"
)

// NoInputLockError refuses a message from a client that does not hold the
// session's input lock.
type NoInputLockError struct{ Holder string }

func (e *NoInputLockError) Error() string {
	return fmt.Sprintf("Another client (%s) holds the input lock of this session; request the lock (RequestInputLock) or watch", e.Holder)
}

// PoolExhaustedError refuses to start a CLI when every slot is busy with a
// running turn.
type PoolExhaustedError struct {
	Max        int
	RetryAfter time.Duration
}

func (e *PoolExhaustedError) Error() string {
	return fmt.Sprintf("Subprocess pool at capacity: all %d Claude processes are running turns; retry in %s", e.Max, e.RetryAfter)
}

// CrashLoopError refuses to restart a CLI that keeps crashing.
type CrashLoopError struct {
	Crashes    int
	RetryAfter time.Duration
}

func (e *CrashLoopError) Error() string {
	return fmt.Sprintf("Claude crashed %d times in a row; not restarting it for %s (see the agent's log)", e.Crashes, e.RetryAfter.Round(time.Second))
}

// checkLock refuses early (before any wait) a client without the lock.
func (s *Session) checkLock(clientID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lockHolder != "" && s.lockHolder != clientID {
		return &NoInputLockError{Holder: s.lockHolder}
	}
	return nil
}

// RequestInputLock gives clientID the input lock and returns the previous
// holder ("" when it was free). The lock moves only by request or when its
// holder disconnects (ReleaseInputLock).
func (s *Session) RequestInputLock(clientID string) (previous string, err error) {
	if clientID == "" {
		return "", invalidf("a client id is required to hold the input lock (set the x-betcode-client-id metadata)")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	previous, s.lockHolder = s.lockHolder, clientID
	return previous, nil
}

// ReleaseInputLock frees the lock if clientID holds it.
func (s *Session) ReleaseInputLock(clientID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if clientID != "" && s.lockHolder == clientID {
		s.lockHolder = ""
	}
}

// LockHolder returns the client holding the input lock.
func (s *Session) LockHolder() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lockHolder
}

// waitRestartBackoff delays the restart of a CLI that crashed: 0.5 s after
// the first crash, doubling to 30 s; after MaxRestarts crashes in a row it
// refuses for CrashCooldown.
func (s *Session) waitRestartBackoff(ctx context.Context) error {
	s.mu.Lock()
	crashes, last, running := s.crashes, s.lastCrash, s.proc != nil
	s.mu.Unlock()
	if crashes == 0 || running {
		return nil
	}
	since := s.m.cfg.Now().Sub(last)
	if crashes > s.m.cfg.MaxRestarts {
		if since < s.m.cfg.CrashCooldown {
			return &CrashLoopError{Crashes: crashes, RetryAfter: s.m.cfg.CrashCooldown - since}
		}
		s.mu.Lock()
		s.crashes = 1 // cooled down: try again, gently
		s.mu.Unlock()
		crashes = 1
	}
	wait := min(500*time.Millisecond<<(crashes-1), 30*time.Second) - since
	if wait <= 0 {
		return nil
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// watchHang kills the CLI when a turn runs with no output for HangTimeout
// while nobody is being asked anything. It returns a stop function.
func (s *Session) watchHang(p provider.Conversation, lastOutput *atomic.Int64, hung *atomic.Bool) func() {
	d := s.m.cfg.HangTimeout
	if d <= 0 {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(min(d/4, 10*time.Second))
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			s.mu.Lock()
			busy := s.sentTurns != s.doneTurns && len(s.perms) == 0
			s.mu.Unlock()
			if busy && time.Since(time.Unix(0, lastOutput.Load())) > d {
				s.m.cfg.Logger.Warn("session: claude hung mid-turn; killing it", "session_id", s.id, "silent_for", d)
				hung.Store(true)
				_ = p.Kill()
				return
			}
		}
	}()
	return func() { close(done) }
}

// acquireSlot takes a slot of the CLI pool for s. When the pool is full it
// stops the least recently used idle CLI; when every CLI runs a turn it
// fails with *PoolExhaustedError.
func (m *Manager) acquireSlot(s *Session) error {
	// The caller holds s.mu, so other sessions' locks are only tried: a
	// session busy under its lock for a moment (publishing an event) is
	// looked at again, for up to contendedWait, before the pool counts
	// as exhausted — or an idle CLI could be missed and the caller
	// refused.
	var retryUntil time.Time
	for {
		m.mu.Lock()
		if m.running < m.cfg.MaxProcesses {
			m.running++
			m.mu.Unlock()
			return nil
		}
		candidates := make([]*Session, 0, len(m.sessions))
		for _, o := range m.sessions {
			if o != s {
				candidates = append(candidates, o)
			}
		}
		m.mu.Unlock()
		var victim *Session
		var oldest time.Time
		contended := false
		for _, o := range candidates {
			if !o.mu.TryLock() {
				contended = true
				continue
			}
			idle := o.proc != nil && o.sentTurns == o.doneTurns && len(o.perms) == 0 && len(o.bgSubagents) == 0
			if idle && (victim == nil || o.lastUsed.Before(oldest)) {
				victim, oldest = o, o.lastUsed
			}
			o.mu.Unlock()
		}
		if victim == nil {
			if contended {
				if retryUntil.IsZero() {
					retryUntil = time.Now().Add(contendedWait)
				}
				if time.Now().Before(retryUntil) {
					time.Sleep(time.Millisecond) // another session's lock: nothing to wait on while holding s.mu
					continue
				}
			}
			return &PoolExhaustedError{Max: m.cfg.MaxProcesses, RetryAfter: 5 * time.Second}
		}
		m.cfg.Logger.Info("session: pool full; stopping an idle Claude process", "session_id", victim.id)
		stopped := victim.stoppedChan()
		victim.stopProcess() // its reader releases the slot
		<-stopped
	}
}

// contendedWait bounds how long acquireSlot looks again at sessions whose
// lock was taken when it looked.
const contendedWait = 250 * time.Millisecond

func (m *Manager) releaseSlot() {
	m.mu.Lock()
	m.running--
	m.mu.Unlock()
}

// MaxProcesses returns the pool's size.
func (m *Manager) MaxProcesses() int { return m.cfg.MaxProcesses }

// RunningProcesses returns how many CLIs run now.
func (m *Manager) RunningProcesses() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.running
}

// stoppedChan returns a channel closed when the session's current CLI
// reader has finished (closed already when no CLI runs).
func (s *Session) stoppedChan() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil || s.readerDone == nil {
		c := make(chan struct{})
		close(c)
		return c
	}
	return s.readerDone
}
