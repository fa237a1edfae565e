package session

import (
	"context"
	"fmt"

	"github.com/betcode-dev/betcode/agent/bridge"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// ErrDraining refuses a new session, message or compaction while the agent
// drains before it stops. It wraps ErrClosed.
var ErrDraining = fmt.Errorf("%w: it is finishing the running turns and accepts no new ones", ErrClosed)

// Drain makes the manager refuse new sessions, user messages and
// compactions with ErrDraining. Running turns go on (permission answers,
// questions and cancels are still taken), and clients may still attach and
// replay. It cannot be undone: Close follows.
func (m *Manager) Drain() { m.draining.Store(true) }

// Draining reports whether Drain was called.
func (m *Manager) Draining() bool { return m.draining.Load() }

// RunningTurns is the number of sessions with a turn running or queued.
func (m *Manager) RunningTurns() int {
	m.mu.Lock()
	all := make([]*Session, 0, len(m.sessions))
	for _, s := range m.sessions {
		all = append(all, s)
	}
	m.mu.Unlock()
	n := 0
	for _, s := range all {
		if s.Busy() {
			n++
		}
	}
	return n
}

// WaitTurns waits until no session has a running turn, that is until every
// turn's TurnComplete is committed to the log, or ctx ends. Without Drain
// new turns may keep it waiting.
func (m *Manager) WaitTurns(ctx context.Context) error {
	for {
		// Taken before looking, so that a turn ending in between wakes us.
		wake := m.turnWake()
		if m.RunningTurns() == 0 {
			return nil
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// turnWake returns a channel closed at the next turn end.
func (m *Manager) turnWake() <-chan struct{} {
	m.turnMu.Lock()
	defer m.turnMu.Unlock()
	if m.turnEnded == nil {
		m.turnEnded = make(chan struct{})
	}
	return m.turnEnded
}

// turnsEnded wakes WaitTurns. It is called with a session's mu held, so
// turnMu is taken after every other lock.
func (m *Manager) turnsEnded() {
	m.turnMu.Lock()
	defer m.turnMu.Unlock()
	if m.turnEnded != nil {
		close(m.turnEnded)
		m.turnEnded = nil
	}
}

// shutdownMsg explains a turn the agent's shutdown cut short.
const shutdownMsg = "the agent shut down while this turn was running; send a new message to continue"

// markStopping notes that the agent is about to stop the CLI to shut down,
// so that a turn it aborts ends "interrupted", as after an agent crash,
// rather than "cancelled" as if a user had asked.
func (s *Session) markStopping() {
	s.mu.Lock()
	s.stopping = true
	s.mu.Unlock()
}

// endedTurn adjusts the events that end a turn: a turn the user cancelled
// ends "cancelled" with no error event (it did not fail); one cut short by
// the agent shutting down says so.
func endedTurn(evs []*pb.AgentEvent, cancelled, stopping bool) []*pb.AgentEvent {
	if stopping && !cancelled {
		return interruptedByShutdown(evs)
	}
	if !cancelled {
		return evs
	}
	kept := evs[:0]
	for _, ev := range evs {
		if tc := ev.GetTurnComplete(); tc != nil {
			tc.StopReason = "cancelled"
		}
		if ev.GetError() == nil {
			kept = append(kept, ev)
		}
	}
	return kept
}

// interruptedByShutdown rewrites a result's events when the CLI aborted the
// turn because the agent stopped it: ErrorEvent AGENT_SHUTTING_DOWN, then
// TurnComplete{interrupted}. A turn that ended on its own is kept as is.
func interruptedByShutdown(evs []*pb.AgentEvent) []*pb.AgentEvent {
	aborted := false
	for _, ev := range evs {
		if tc := ev.GetTurnComplete(); tc != nil && tc.StopReason == "cancelled" {
			aborted = true
		}
	}
	if !aborted {
		return evs
	}
	out := make([]*pb.AgentEvent, 0, len(evs)+1)
	for _, ev := range evs {
		switch {
		case ev.GetError() != nil:
			continue
		case ev.GetTurnComplete() != nil:
			ev.GetTurnComplete().StopReason = "interrupted"
			out = append(out, bridge.ErrorEvent(CodeAgentShuttingDown, shutdownMsg, false))
		}
		out = append(out, ev)
	}
	return out
}
