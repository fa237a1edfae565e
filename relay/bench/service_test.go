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

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// The benchmark service is hand-written (no protoc), like the one behind
// perf-baselines.md: server-streaming Stream of 64-byte
// google.protobuf.StringValue messages (66 bytes encoded), and a unary
// "Echo" of a 64-byte string. Echo answers under the name of a real unary
// agent method, AgentService/RenameSession (a RenameSessionRequest in, a
// SessionSummary with the same id and name out: 73 bytes each way), so that
// the relay treats it as it treats every agent unary call: it takes the
// direct connection's unary path only for methods its protobuf registry
// knows to be unary (tunnel.UnaryMethod).
const (
	benchService = "betcode.bench.v1.Bench"
	echoService  = "betcode.v1.AgentService"
	echoMethod   = "/" + echoService + "/RenameSession"
	streamMethod = "/" + benchService + "/Stream"
)

var payload64 = strings.Repeat("x", 64)

var benchDesc = grpc.ServiceDesc{
	ServiceName: benchService,
	HandlerType: (*any)(nil),
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
	s.RegisterService(&echoDesc, struct{}{})
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

// echoDesc serves Echo (see echoMethod).
var echoDesc = grpc.ServiceDesc{
	ServiceName: echoService,
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "RenameSession",
		Handler: func(_ any, _ context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			in := new(pb.RenameSessionRequest)
			if err := dec(in); err != nil {
				return nil, err
			}
			return &pb.SessionSummary{Id: in.SessionId, Name: in.Name}, nil
		},
	}},
}

func echo(ctx context.Context, cc *grpc.ClientConn) error {
	out := new(pb.SessionSummary)
	if err := cc.Invoke(ctx, echoMethod, &pb.RenameSessionRequest{SessionId: "bench", Name: payload64}, out); err != nil {
		return err
	}
	if out.Name != payload64 {
		return errors.New("echo answered a different name")
	}
	return nil
}
