package session

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/betcode-dev/betcode/agent/internal/testenv"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func newManager(t *testing.T, cfg Config) *Manager {
	t.Helper()
	return openManager(t, cfg, t.TempDir()+"/agent.db")
}

// openManager opens a Manager on the event log db (the fake CLI, a logger
// bound to t), closed at the test's end.
func openManager(t *testing.T, cfg Config, db string) *Manager {
	t.Helper()
	cfg.ClaudeBin = testenv.Binaries(t).FakeClaude
	cfg.Logger = slog.New(slog.NewTextHandler(t.Output(), nil))
	m, err := Open(context.Background(), cfg, db)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(context.Background()) })
	return m
}

// A stalled client is cut off with a resumable error while the CLI and a
// healthy client go on at full speed.
func TestSlowClientIsCutOffWithoutBlockingOthers(t *testing.T) {
	m := newManager(t, Config{SubscriberBuffer: 4096, DefaultDir: t.TempDir()})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, err := m.Create(ctx, CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	stalled := make(chan struct{})
	slowErr := make(chan error, 1)
	go func() {
		first := true
		var once sync.Once
		unblock := func(error) { once.Do(func() { close(stalled) }) }
		slowErr <- s.Stream(ctx, StreamOptions{OnCut: unblock}, func(ev *pb.AgentEvent) error {
			if first {
				first = false
				<-stalled // never reads again until cut
			}
			return nil
		})
	}()
	var fast []*pb.AgentEvent
	fastErr := make(chan error, 1)
	go func() {
		fastErr <- s.Stream(ctx, StreamOptions{UntilIdle: false, StopWhenIdle: func() bool { return len(fast) > 5 }}, func(ev *pb.AgentEvent) error {
			// A client that subscribes after the first events were
			// committed gets them replayed, in one reused message.
			fast = append(fast, proto.CloneOf(ev))
			return nil
		})
	}()
	if err := s.SendUser(ctx, "FLOOD 30000", nil); err != nil {
		t.Fatal(err)
	}
	var slow *SlowConsumerError
	select {
	case err := <-slowErr:
		if !errors.As(err, &slow) {
			t.Fatalf("stalled client ended with %v, want SlowConsumerError", err)
		}
	case <-ctx.Done():
		t.Fatal("stalled client was never cut off")
	}
	if err := <-fastErr; err != nil {
		t.Fatalf("healthy client: %v", err)
	}
	deltas := 0
	for i, ev := range fast {
		if ev.Sequence != uint64(i+1) {
			t.Fatalf("healthy client event %d has sequence %d", i, ev.Sequence)
		}
		if ev.GetTextDelta().GetText() == "x" {
			deltas++
		}
	}
	if deltas != 30000 {
		t.Fatalf("healthy client got %d of 30000 deltas", deltas)
	}
	// The cut client resumes from where it was cut and gets the rest.
	var rest []*pb.AgentEvent
	if err := s.Stream(ctx, StreamOptions{From: slow.LastSeq, UntilIdle: true}, func(ev *pb.AgentEvent) error {
		rest = append(rest, proto.Clone(ev).(*pb.AgentEvent)) // replayed events are reused
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(rest) == 0 || rest[0].Sequence != slow.LastSeq+1 || last(rest) != uint64(len(fast)) {
		t.Fatalf("resume from %d got %d events from %d to %d; want %d to %d", slow.LastSeq, len(rest), rest[0].Sequence, last(rest), slow.LastSeq+1, len(fast))
	}
}

func last(evs []*pb.AgentEvent) uint64 {
	if len(evs) == 0 {
		return 0
	}
	return evs[len(evs)-1].Sequence
}
