package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// drainingStatus is what a draining relay replica ends a stream with.
func drainingStatus(t *testing.T) error { return unavailable(t, CodeRelayDraining) }

// unavailable is UNAVAILABLE with BetCode error code reason.
func unavailable(t *testing.T, reason string) error {
	st, err := status.New(codes.Unavailable, reason).WithDetails(&errdetails.ErrorInfo{Reason: reason, Domain: "betcode.dev"})
	if err != nil {
		t.Fatal(err)
	}
	return st.Err()
}

func TestRelayDraining(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"draining", drainingStatus(t), true},
		{"machine offline", unavailable(t, "MACHINE_OFFLINE"), false},
		{"plain unavailable", status.Error(codes.Unavailable, "x"), false},
		{"not a status", errors.New("x"), false},
		{"nil", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := RelayDraining(tc.err); got != tc.want {
				t.Fatalf("RelayDraining(%v) = %v; want %v", tc.err, got, tc.want)
			}
		})
	}
}

// drainingAgent serves Converse: the first stream ends after sequence 3
// with RELAY_DRAINING, as a draining relay ends it; a resumed one replays
// from the sequence asked (repeating one event, as a replay may) to the
// end of the turn.
type drainingAgent struct {
	pb.UnimplementedAgentServiceServer
	t  *testing.T
	mu sync.Mutex
	// starts are the StartConversation of each stream.
	starts []*pb.StartConversation
	// resumes are the FromSequence of each ResumeSession.
	resumes []uint64
}

func (a *drainingAgent) Converse(s grpc.BidiStreamingServer[pb.AgentRequest, pb.AgentEvent]) error {
	req, err := s.Recv()
	if err != nil {
		return err
	}
	start := req.GetStart()
	a.mu.Lock()
	a.starts = append(a.starts, start)
	n := len(a.starts)
	a.mu.Unlock()
	ev := func(seq uint64) *pb.AgentEvent {
		if seq == 1 {
			return &pb.AgentEvent{Sequence: 1, Event: &pb.AgentEvent_SessionInfo{SessionInfo: &pb.SessionInfo{SessionId: "s1"}}}
		}
		if seq == 6 {
			return &pb.AgentEvent{Sequence: 6, Event: &pb.AgentEvent_TurnComplete{TurnComplete: &pb.TurnComplete{}}}
		}
		return &pb.AgentEvent{Sequence: seq, Event: &pb.AgentEvent_TextDelta{TextDelta: &pb.TextDelta{Text: fmt.Sprint(seq)}}}
	}
	if n == 1 {
		for seq := uint64(1); seq <= 3; seq++ {
			if err := s.Send(ev(seq)); err != nil {
				return err
			}
		}
		return drainingStatus(a.t)
	}
	from, _ := strconv.ParseUint(start.GetMetadata()["from_sequence"], 10, 64)
	for seq := max(from, 1); seq <= 6; seq++ { // from itself again: a duplicate
		if err := s.Send(ev(seq)); err != nil {
			return err
		}
	}
	<-s.Context().Done()
	return nil
}

func TestConversationResumesAfterRelayDrainingWithoutGapOrDuplicate(t *testing.T) {
	agent := &drainingAgent{t: t}
	conn := serveAgent(t, agent)

	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	conv, err := Start(ctx, pb.NewAgentServiceClient(conn), &pb.StartConversation{WorkingDirectory: "/w"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer conv.Close()
	var notices []error
	conv.OnReconnect = func(err error, wait time.Duration) {
		notices = append(notices, err)
		if wait > 200*time.Millisecond {
			t.Errorf("reconnecting after a drain waits %s; want at most the first step (100 ms ±20%%)", wait)
		}
	}
	var seqs []uint64
	for {
		ev, err := conv.Recv(ctx)
		if err != nil {
			t.Fatalf("Recv after %v: %v", seqs, err)
		}
		seqs = append(seqs, ev.Sequence)
		if ev.GetTurnComplete() != nil {
			break
		}
	}
	if fmt.Sprint(seqs) != "[1 2 3 4 5 6]" {
		t.Fatalf("sequences = %v; want 1 to 6 once each", seqs)
	}
	if len(notices) != 1 || !RelayDraining(notices[0]) {
		t.Fatalf("reconnect notices = %v; want one, RELAY_DRAINING", notices)
	}
	agent.mu.Lock()
	defer agent.mu.Unlock()
	if len(agent.starts) != 2 || agent.starts[1].SessionId != "s1" || agent.starts[1].Metadata["from_sequence"] != "3" {
		t.Fatalf("streams started with %v; want a resume of s1 from 3", agent.starts)
	}
}

// ResumeSession serves events 1 to 6: the first stream ends after 3 with
// RELAY_DRAINING; a later one replays from the sequence asked (repeating
// it) and ends.
func (a *drainingAgent) ResumeSession(req *pb.ResumeSessionRequest, s grpc.ServerStreamingServer[pb.AgentEvent]) error {
	a.mu.Lock()
	a.resumes = append(a.resumes, req.FromSequence)
	n := len(a.resumes)
	a.mu.Unlock()
	last := uint64(6)
	if n == 1 {
		last = 3
	}
	for seq := max(req.FromSequence, 1); seq <= last; seq++ {
		if err := s.Send(&pb.AgentEvent{Sequence: seq, Event: &pb.AgentEvent_TextDelta{TextDelta: &pb.TextDelta{Text: fmt.Sprint(seq)}}}); err != nil {
			return err
		}
	}
	if n == 1 {
		return drainingStatus(a.t)
	}
	return nil
}

func TestReplayResumesAfterRelayDrainingWithoutGapOrDuplicate(t *testing.T) {
	agent := &drainingAgent{t: t}
	conn := serveAgent(t, agent)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()

	var seqs []uint64
	reconnects := 0
	err := Replay(ctx, pb.NewAgentServiceClient(conn), &pb.ResumeSessionRequest{SessionId: "s1"},
		func(ev *pb.AgentEvent) error { seqs = append(seqs, ev.Sequence); return nil },
		func(err error, _ time.Duration) {
			reconnects++
			if !RelayDraining(err) {
				t.Errorf("reconnect after %v; want RELAY_DRAINING", err)
			}
		})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(seqs) != "[1 2 3 4 5 6]" || reconnects != 1 {
		t.Fatalf("sequences %v after %d reconnects; want 1 to 6 once each after one", seqs, reconnects)
	}
	if fmt.Sprint(agent.resumes) != "[0 3]" {
		t.Fatalf("ResumeSession from %v; want [0 3]", agent.resumes)
	}
}

// serveAgent serves impl as the AgentService on a loopback port for the
// test and returns a client connection to it.
func serveAgent(t *testing.T, impl pb.AgentServiceServer) *grpc.ClientConn {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	pb.RegisterAgentServiceServer(srv, impl)
	served := make(chan struct{})
	go func() {
		defer close(served)
		srv.Serve(ln)
	}()
	conn, err := Dial(ln.Addr().String(), DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(); srv.Stop(); <-served })
	return conn
}
