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
