package client

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// withRetryAfter is an UNAVAILABLE status with BetCode code reason and
// retry_after_ms ms ("" for none).
func withRetryAfter(t *testing.T, c codes.Code, reason, ms string) error {
	t.Helper()
	info := &errdetails.ErrorInfo{Reason: reason, Domain: "betcode.dev"}
	if ms != "" {
		info.Metadata = map[string]string{"retry_after_ms": ms}
	}
	st, err := status.New(c, reason).WithDetails(info)
	if err != nil {
		t.Fatal(err)
	}
	return st.Err()
}

func TestRetryAfter(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want time.Duration
		ok   bool
	}{
		{"machine moving", withRetryAfter(t, codes.Unavailable, "MACHINE_OFFLINE", "100"), 100 * time.Millisecond, true},
		{"rate limited", withRetryAfter(t, codes.ResourceExhausted, "RATE_LIMITED", "2500"), 2500 * time.Millisecond, true},
		{"more than 30 s", withRetryAfter(t, codes.ResourceExhausted, "RATE_LIMITED", "3600000"), 30 * time.Second, true},
		{"none", withRetryAfter(t, codes.Unavailable, "MACHINE_OFFLINE", ""), 0, false},
		{"not a number", withRetryAfter(t, codes.Unavailable, "MACHINE_OFFLINE", "soon"), 0, false},
		{"negative", withRetryAfter(t, codes.Unavailable, "MACHINE_OFFLINE", "-5"), 0, false},
		{"no details", status.Error(codes.Unavailable, "x"), 0, false},
		{"not a status", errors.New("x"), 0, false},
		{"nil", nil, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := RetryAfter(tc.err)
			if got != tc.want || ok != tc.ok {
				t.Fatalf("RetryAfter = %v, %v; want %v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

// movingAgent answers its first offline ResumeSession calls as the relay
// answers a stream for a machine moving between replicas, then streams
// two events.
type movingAgent struct {
	pb.UnimplementedAgentServiceServer
	t       *testing.T
	offline int
	mu      sync.Mutex
	calls   int
}

func (a *movingAgent) ResumeSession(_ *pb.ResumeSessionRequest, s grpc.ServerStreamingServer[pb.AgentEvent]) error {
	a.mu.Lock()
	a.calls++
	n := a.calls
	a.mu.Unlock()
	if n <= a.offline {
		return withRetryAfter(a.t, codes.Unavailable, "MACHINE_OFFLINE", "100")
	}
	for seq := uint64(1); seq <= 2; seq++ {
		if err := s.Send(&pb.AgentEvent{Sequence: seq}); err != nil {
			return err
		}
	}
	return nil
}

// TestReplayTakesTheRelaysRetryAfter: a stream whose machine is moving
// between relay replicas is tried again after the 100 ms the relay asks,
// each time, instead of on the doubling schedule (100, 200, 400 ms...),
// which found the machine up to half a second after it was back.
func TestReplayTakesTheRelaysRetryAfter(t *testing.T) {
	conn := serveAgent(t, &movingAgent{t: t, offline: 4})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()

	var waits []time.Duration
	got := 0
	err := Replay(ctx, pb.NewAgentServiceClient(conn), &pb.ResumeSessionRequest{SessionId: "s1"},
		func(*pb.AgentEvent) error { got++; return nil },
		func(_ error, wait time.Duration) { waits = append(waits, wait) })
	if err != nil || got != 2 {
		t.Fatalf("Replay = %v after %d events; want the 2 events", err, got)
	}
	if len(waits) != 4 {
		t.Fatalf("%d retries (%v), want 4", len(waits), waits)
	}
	for i, w := range waits {
		if w != 100*time.Millisecond {
			t.Errorf("retry %d waited %v, want the 100 ms the relay asked", i+1, w)
		}
	}
}
