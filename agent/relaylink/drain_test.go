package relaylink

import (
	"errors"
	"io"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// frames is a FrameStream that returns its frames, then err.
type frames struct {
	f   []*pb.TunnelFrame
	err error
}

func (s *frames) Send(*pb.TunnelFrame) error { return nil }

func (s *frames) Recv() (*pb.TunnelFrame, error) {
	if len(s.f) == 0 {
		return nil, s.err
	}
	f := s.f[0]
	s.f = s.f[1:]
	return f, nil
}

func withReason(t *testing.T, c codes.Code, reason string) error {
	st, err := status.New(c, reason).WithDetails(&errdetails.ErrorInfo{Reason: reason, Domain: "betcode.dev"})
	if err != nil {
		t.Fatal(err)
	}
	return st.Err()
}

func TestWatchedStreamNotesTheRelaysDrainSignal(t *testing.T) {
	errorFrame := func(id, code string) *pb.TunnelFrame {
		return &pb.TunnelFrame{RequestId: id, Payload: &pb.TunnelFrame_Error{Error: &pb.ErrorFrame{Code: code}}}
	}
	data := &pb.TunnelFrame{Payload: &pb.TunnelFrame_Stream{Stream: &pb.StreamFrame{Data: []byte("x")}}}
	for _, tc := range []struct {
		name    string
		stream  *frames
		drained bool
	}{
		{"tunnel-level ErrorFrame", &frames{f: []*pb.TunnelFrame{data, errorFrame("", CodeRelayDraining)}, err: io.EOF}, true},
		{"stream status", &frames{f: []*pb.TunnelFrame{data}, err: withReason(t, codes.Unavailable, CodeRelayDraining)}, true},
		{"a call's ErrorFrame", &frames{f: []*pb.TunnelFrame{errorFrame("7", CodeRelayDraining)}, err: io.EOF}, false},
		{"another ErrorFrame", &frames{f: []*pb.TunnelFrame{errorFrame("", "CANCELLED")}, err: io.EOF}, false},
		{"another status", &frames{err: withReason(t, codes.Unavailable, "TUNNEL_DISCONNECTED")}, false},
		{"connection lost", &frames{f: []*pb.TunnelFrame{data}, err: io.ErrUnexpectedEOF}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &watchedStream{FrameStream: tc.stream}
			for {
				if _, err := w.Recv(); err != nil {
					break
				}
			}
			if got := w.drained.Load(); got != tc.drained {
				t.Fatalf("drained = %v; want %v", got, tc.drained)
			}
			cause := w.cause(errors.New("tunnel closed"))
			if got := errors.Is(cause, errRelayDraining); got != tc.drained {
				t.Fatalf("cause = %v; errRelayDraining %v, want %v", cause, got, tc.drained)
			}
		})
	}
}

func TestRegisterRefusedDrainingCounts(t *testing.T) {
	if !drainingStatus(withReason(t, codes.Unavailable, CodeRelayDraining)) {
		t.Fatal("RELAY_DRAINING status not recognised")
	}
	if drainingStatus(status.Error(codes.Unavailable, "down")) || drainingStatus(errors.New("x")) {
		t.Fatal("a status without RELAY_DRAINING recognised as one")
	}
}

// TestDrainHandsOver: told RELAY_DRAINING, the agent registers again at once
// (its relay's Service sends it to another replica) while its old tunnel
// stays open, serving the calls under way there, until the replica ends it:
// its machine is reachable elsewhere within a reconnection, and no call
// under way is cut. The agent says it hands over when it opens the tunnel
// (tunnel.HandoverHeader), so a draining replica tells it first; and the
// link counts as connected throughout.
func TestDrainHandsOver(t *testing.T) {
	// Only the hand-over can register again within the test.
	relay, link, logs := linkWithSlowSchedule(t)
	waitLog(t, logs, "relay link up")
	if !<-relay.handover {
		t.Fatal("the agent's tunnel does not offer to hand over")
	}
	<-relay.registered

	relay.drain <- struct{}{}
	waitLog(t, logs, "relay replica draining; registering with another while its calls finish")
	waitLog(t, logs, "relay link up") // the second tunnel
	if n := relay.live.Load(); n != 2 {
		t.Fatalf("%d tunnels open after the hand-over, want 2: the old one serves its calls until the replica ends it", n)
	}
	if up, _ := link.Connected(); !up {
		t.Fatal("the link says it is down during the hand-over")
	}
	relay.kick <- struct{}{} // the replica ends the old tunnel once its calls are done
	waitLog(t, logs, "relay tunnel handed over has ended")
	if up, _ := link.Connected(); !up {
		t.Fatal("the link says it is down once the old tunnel ended")
	}
	if n := logs.count("WARN relay link down; reconnecting") + logs.count("WARN relay link lost; reconnecting"); n != 0 {
		t.Errorf("%d reconnections after the hand-over, want none", n)
	}
}
