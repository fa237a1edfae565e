package bench

import (
	"context"
	"errors"
	"io"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// The benchmark service is hand-written (no protoc), like the one behind
// perf-baselines.md: unary Echo and server-streaming Stream of 64-byte
// google.protobuf.StringValue messages (66 bytes encoded).
const (
	benchService = "betcode.bench.v1.Bench"
	echoMethod   = "/" + benchService + "/Echo"
	streamMethod = "/" + benchService + "/Stream"
)

var payload64 = strings.Repeat("x", 64)

var benchDesc = grpc.ServiceDesc{
	ServiceName: benchService,
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Echo",
		Handler: func(_ any, _ context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			in := new(wrapperspb.StringValue)
			if err := dec(in); err != nil {
				return nil, err
			}
			return in, nil
		},
	}},
	Streams: []grpc.StreamDesc{{
		StreamName:    "Stream",
		ServerStreams: true,
		// Stream sends the requested number of 64-byte events.
		Handler: func(_ any, stream grpc.ServerStream) error {
			req := new(wrapperspb.UInt64Value)
			if err := stream.RecvMsg(req); err != nil {
				return err
			}
			ev := wrapperspb.String(payload64)
			for range req.Value {
				if err := stream.SendMsg(ev); err != nil {
					return err
				}
			}
			return nil
		},
	}},
}

// newBenchServer returns the agent's server, with the agent's window
// settings (static windows: no BDP pings; the relay's health pings on an
// idle direct connection allowed).
func newBenchServer(opts ...grpc.ServerOption) *grpc.Server {
	opts = append(opts, grpc.InitialWindowSize(1<<20), grpc.InitialConnWindowSize(4<<20),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}))
	s := grpc.NewServer(opts...)
	s.RegisterService(&benchDesc, struct{}{})
	return s
}

// streamEvents asks for n events on one stream and receives them all.
func streamEvents(ctx context.Context, cc *grpc.ClientConn, n uint64) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s, err := cc.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, streamMethod)
	if err != nil {
		return err
	}
	if err := s.SendMsg(wrapperspb.UInt64(n)); err != nil {
		return err
	}
	if err := s.CloseSend(); err != nil {
		return err
	}
	ev := new(wrapperspb.StringValue)
	var got uint64
	for {
		err := s.RecvMsg(ev)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		got++
	}
	if got != n {
		return errors.New("stream ended early")
	}
	return nil
}

func echo(ctx context.Context, cc *grpc.ClientConn) error {
	out := new(wrapperspb.StringValue)
	return cc.Invoke(ctx, echoMethod, wrapperspb.String(payload64), out)
}
