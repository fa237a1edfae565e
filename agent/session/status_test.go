package session

import (
	"context"
	"fmt"
	"testing"
	"time"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// TestStoredStatusMovesWithTheTurn: the session's stored status is what a restarted agent reads
// to tell a turn the crash interrupted from one that had ended. It must change in the same commit
// as the event that starts or ends the turn: an agent killed right after a turn ended (its
// turn_complete stored, streamed, seen by the user) found the session still "active" and showed
// "the agent restarted while this turn was running" under a finished reply. Here the stored row
// is read the moment an event is published (after its commit, before any other write could catch
// up): "active" while each turn streams (the fake CLI's HANG turn waits for its cancel), "idle"
// at each turn_complete.
func TestStoredStatusMovesWithTheTurn(t *testing.T) {
	m := newManager(t, Config{DefaultDir: t.TempDir()})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, _, err := m.Start(ctx, StartRequest{Text: "HANG 0"})
	if err != nil {
		t.Fatal(err)
	}
	const turns = 5
	running := make(chan struct{}, turns)
	ended := make(chan struct{}, turns)
	streamErr := make(chan error, 1)
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		streaming := false // a delta of this turn was checked
		streamErr <- s.Stream(sctx, StreamOptions{}, func(ev *pb.AgentEvent) error {
			var want string
			switch {
			case ev.GetTextDelta() != nil && !streaming:
				streaming = true
				want = StatusActive
			case ev.GetTurnComplete() != nil:
				want = StatusIdle
			default:
				return nil
			}
			meta, err := m.Log().GetSession(ctx, s.ID())
			if err != nil {
				return err
			}
			if meta.Status != want {
				return fmt.Errorf("event %d (%s) is committed with the session stored %q, want %q", ev.Sequence, Kind(ev), meta.Status, want)
			}
			if want == StatusIdle {
				streaming = false
				ended <- struct{}{}
			} else {
				running <- struct{}{}
			}
			return nil
		})
	}()
	wait := func(i int, ch chan struct{}) {
		t.Helper()
		select {
		case <-ch:
		case err := <-streamErr:
			t.Fatalf("turn %d: %v", i, err)
		case <-ctx.Done():
			t.Fatalf("turn %d: %v", i, ctx.Err())
		}
	}
	for i := range turns {
		wait(i, running)
		if was, err := s.Cancel(ctx); err != nil || !was {
			t.Fatalf("turn %d: Cancel = %v, %v; want a running turn cancelled", i, was, err)
		}
		wait(i, ended)
		if i+1 < turns {
			if err := s.SendUser(ctx, fmt.Sprintf("HANG %d", i+1), nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	stop()
	if err := <-streamErr; err != nil && ctx.Err() == nil && sctx.Err() == nil {
		t.Fatal(err)
	}
}
