package e2e

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/betcode-dev/betcode/agent/internal/testenv"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

func TestMain(m *testing.M) { testenv.Main(m) }

type convStream = grpc.BidiStreamingClient[pb.AgentRequest, pb.AgentEvent]

// startConv opens Converse and sends StartConversation.
func startConv(t *testing.T, ctx context.Context, api pb.AgentServiceClient, start *pb.StartConversation) convStream {
	t.Helper()
	s, err := api.Converse(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(&pb.AgentRequest{Request: &pb.AgentRequest_Start{Start: start}}); err != nil {
		t.Fatal(err)
	}
	return s
}

func say(t testing.TB, s convStream, text string) {
	t.Helper()
	if err := s.Send(&pb.AgentRequest{Request: &pb.AgentRequest_Message{Message: &pb.UserMessage{Content: text}}}); err != nil {
		t.Fatal(err)
	}
}

type recver interface {
	Recv() (*pb.AgentEvent, error)
}

// until receives events until pred is true for one (inclusive).
func until(t testing.TB, s recver, pred func(*pb.AgentEvent) bool) []*pb.AgentEvent {
	t.Helper()
	var out []*pb.AgentEvent
	for {
		ev, err := s.Recv()
		if err != nil {
			t.Fatalf("recv after %d events: %v (last: %v)", len(out), err, last(out))
		}
		out = append(out, ev)
		if pred(ev) {
			return out
		}
	}
}

// drain receives until the stream ends normally.
func drain(t *testing.T, s recver) []*pb.AgentEvent {
	t.Helper()
	var out []*pb.AgentEvent
	for {
		ev, err := s.Recv()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("recv after %d events: %v", len(out), err)
		}
		out = append(out, ev)
	}
}

func last(evs []*pb.AgentEvent) *pb.AgentEvent {
	if len(evs) == 0 {
		return nil
	}
	return evs[len(evs)-1]
}

func isTurnComplete(ev *pb.AgentEvent) bool { return ev.GetTurnComplete() != nil }

func sessionID(t testing.TB, evs []*pb.AgentEvent) string {
	t.Helper()
	for _, ev := range evs {
		if si := ev.GetSessionInfo(); si != nil {
			return si.SessionId
		}
	}
	t.Fatal("no SessionInfo event")
	return ""
}

func text(evs []*pb.AgentEvent) string {
	var b strings.Builder
	for _, ev := range evs {
		if d := ev.GetTextDelta(); d != nil && ev.ParentToolUseId == "" {
			b.WriteString(d.Text)
		}
	}
	return b.String()
}

// checkSequences asserts the events carry from+1, from+2, ... with no gap.
func checkSequences(t *testing.T, evs []*pb.AgentEvent, from uint64) {
	t.Helper()
	for i, ev := range evs {
		if want := from + uint64(i) + 1; ev.Sequence != want {
			t.Fatalf("event %d has sequence %d, want %d (%v)", i, ev.Sequence, want, ev)
		}
		if ev.Timestamp == nil {
			t.Fatalf("event %d has no timestamp", i)
		}
	}
}

func ctxT(t *testing.T) context.Context { return testenv.Ctx(t, 90*time.Second) }
