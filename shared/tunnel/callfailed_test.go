package tunnel

import (
	"context"
	"errors"
	"testing"
	"time"
)

// lateContext is a context whose deadline has come but whose timer has not
// run yet, as on a loaded machine.
type lateContext struct {
	context.Context
	deadline time.Time
}

func (c lateContext) Deadline() (time.Time, bool) { return c.deadline, true }

// TestCallFailed: how a call whose stream to the agent failed is answered.
// An agent's reset at the call's deadline is DEADLINE_EXCEEDED even before
// the relay's own timer has fired (the agent's deadline is never earlier).
func TestCallFailed(t *testing.T) {
	reset := errors.New("stream error: stream ID 3; CANCEL; received from peer")
	broken := errors.New("http2: client connection lost")
	expired, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	tests := []struct {
		name string
		ctx  context.Context
		err  error
		want int
	}{
		{"deadline passed", expired, reset, codeDeadlineExceeded},
		{"deadline come, timer not yet run", lateContext{context.Background(), time.Now()}, reset, codeDeadlineExceeded},
		{"the agent cancelled well before the deadline", lateContext{context.Background(), time.Now().Add(time.Hour)}, reset, codeCanceled},
		{"the agent cancelled, no deadline", context.Background(), reset, codeCanceled},
		{"the tunnel broke", context.Background(), broken, codeUnavailable},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if code, msg, _ := callFailed(tc.ctx, tc.err); code != tc.want {
				t.Errorf("callFailed = %d %q; want %d", code, msg, tc.want)
			}
		})
	}
}
