package session

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/betcode-dev/betcode/agent/internal/testenv"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// A draining manager refuses new turns and WaitTurns returns once the
// running ones have completed.
func TestDrainRefusesNewTurnsAndWaitsForRunningOnes(t *testing.T) {
	m := newManager(t, Config{DefaultDir: t.TempDir(), CancelGrace: 100 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	hang, err := m.Create(ctx, CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	short, err := m.Create(ctx, CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if err := hang.SendUser(ctx, "HANG", nil); err != nil {
		t.Fatal(err)
	}
	if err := short.SendUser(ctx, "hello", nil); err != nil {
		t.Fatal(err)
	}
	m.Drain()
	for name, err := range map[string]error{
		"message":    short.SendUser(ctx, "more", nil),
		"compaction": func() error { _, err := short.Compact(ctx); return err }(),
		"session":    func() error { _, err := m.Create(ctx, CreateRequest{}); return err }(),
	} {
		if !errors.Is(err, ErrDraining) || !errors.Is(err, ErrClosed) {
			t.Errorf("%s during the drain: %v, want ErrDraining", name, err)
		}
	}
	// The short turn ends on its own (events, not a timer: a loaded
	// machine may take a while); the hanging one does not.
	if err := short.Stream(ctx, StreamOptions{UntilIdle: true}, func(*pb.AgentEvent) error { return nil }); err != nil {
		t.Fatalf("wait for the short turn: %v", err)
	}
	brief, cancelBrief := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancelBrief()
	if err := m.WaitTurns(brief); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitTurns with a hanging turn = %v, want the deadline", err)
	}
	if n := m.RunningTurns(); n != 1 {
		t.Fatalf("RunningTurns = %d, want the hanging one", n)
	}
	waited := make(chan error, 1)
	go func() { waited <- m.WaitTurns(ctx) }()
	if _, err := hang.Cancel(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-waited; err != nil {
		t.Fatalf("WaitTurns after the last turn ended: %v", err)
	}
	if hang.Busy() || short.Busy() {
		t.Fatal("WaitTurns returned with a turn running")
	}
}

// A turn the shutdown cuts ends "interrupted" with AGENT_SHUTTING_DOWN, in
// the log, with no gap.
func TestCloseInterruptsRunningTurn(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "agent.db")
	cfg := Config{DefaultDir: dir, ClaudeBin: testenv.Binaries(t).FakeClaude, Logger: slog.New(slog.NewTextHandler(t.Output(), nil))}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	m, err := Open(ctx, cfg, db)
	if err != nil {
		t.Fatal(err)
	}
	s, err := m.Create(ctx, CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SendUser(ctx, "HANG", nil); err != nil {
		t.Fatal(err)
	}
	m.Drain()
	if err := m.Close(ctx); err != nil {
		t.Fatal(err)
	}

	m2, err := Open(ctx, cfg, db)
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Close(context.Background())
	s2, err := m2.Get(ctx, s.ID())
	if err != nil {
		t.Fatal(err)
	}
	var evs []*pb.AgentEvent
	if err := s2.Stream(ctx, StreamOptions{UntilIdle: true}, func(ev *pb.AgentEvent) error {
		evs = append(evs, proto.Clone(ev).(*pb.AgentEvent))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for i, ev := range evs {
		if ev.Sequence != uint64(i+1) {
			t.Fatalf("event %d has sequence %d: %v", i, ev.Sequence, evs)
		}
	}
	n := len(evs)
	if n < 3 || evs[n-3].GetError().GetCode() != CodeAgentShuttingDown ||
		evs[n-2].GetTurnComplete().GetStopReason() != "interrupted" ||
		evs[n-1].GetStatusChange().GetStatus() != pb.AgentStatus_IDLE {
		t.Fatalf("the cut turn does not end AGENT_SHUTTING_DOWN, interrupted, IDLE: %v", evs)
	}
}
