package codex

import (
	"context"
	"fmt"
)

// A Codex thread runs one turn at a time, and turn/start during a turn
// does not start another one (the app-server adds the input to the running
// turn, whose single turn/completed would then settle two messages).
// Claude Code queues such a message and answers it after the running turn,
// and the session manager counts one TurnComplete per message sent; so the
// Conversation queues it and starts it as the next turn when the running
// one ends.

// queuedTurn is a message waiting for the running turn to end.
type queuedTurn struct {
	id        string
	input     []UserInput
	cancelled bool // InterruptTurn ran while it waited: it never starts
}

// noteStarted records the id of a turn that turn/start started, unless
// Next already saw it end (a very short turn).
func (cv *Conversation) noteStarted(id string) {
	cv.mu.Lock()
	defer cv.mu.Unlock()
	if cv.turn == "" && id != cv.lastEnded {
		cv.turn = id
	}
}

// startQueued starts the first queued message that was not cancelled, after
// a turn ended. A cancelled message, or one turn/start refuses, ends at once
// with a TurnEnded made here (interrupted, or failed with the error), so
// that each message still gets its own. Only Next calls it.
func (cv *Conversation) startQueued() {
	for {
		cv.mu.Lock()
		if len(cv.queue) == 0 {
			cv.running = false
			cv.mu.Unlock()
			return
		}
		q := cv.queue[0]
		cv.queue[0] = queuedTurn{}
		cv.queue = cv.queue[1:]
		cancels := cv.cancels
		cv.mu.Unlock()
		if q.cancelled {
			cv.pushMade(&TurnEnded{ThreadID: cv.thread, Turn: Turn{ID: "queued-" + q.id, Status: TurnStatusInterrupted}})
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		turn, err := cv.c.StartTurnInput(ctx, cv.thread, q.input)
		cancel()
		if err != nil {
			cv.log.Warn("codex: start a queued message", "err", err)
			cv.pushMade(&TurnEnded{ThreadID: cv.thread, Turn: Turn{
				ID: "queued-" + q.id, Status: TurnStatusFailed,
				Error: &TurnError{Message: fmt.Sprintf("start the queued message: %v", err)},
			}})
			continue
		}
		cv.noteStarted(turn.ID)
		cv.mu.Lock()
		interrupted := cv.cancels != cancels
		cv.mu.Unlock()
		if interrupted {
			// InterruptTurn ran while turn/start was on its way and saw no
			// turn to interrupt: interrupt this one now.
			ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
			if err := cv.c.Interrupt(ctx, cv.thread, turn.ID); err != nil {
				cv.log.Warn("codex: interrupt a queued message", "err", err)
			}
			cancel()
		}
		return
	}
}

// pushMade queues an event for Next to return before the stream's next.
func (cv *Conversation) pushMade(ev Event) {
	cv.mu.Lock()
	defer cv.mu.Unlock()
	cv.made = append(cv.made, ev)
}

// popMade returns the oldest event made here.
func (cv *Conversation) popMade() (Event, bool) {
	cv.mu.Lock()
	defer cv.mu.Unlock()
	if len(cv.made) == 0 {
		return nil, false
	}
	ev := cv.made[0]
	cv.made[0] = nil
	cv.made = cv.made[1:]
	return ev, true
}
