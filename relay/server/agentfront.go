package server

import (
	"net/http"

	"github.com/betcode-dev/betcode/relay/internal/grpcstream"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// agentHandler serves agents' connections on the relay's own HTTP/2
// server (--front=engine): OpenTunnel with grpcstream, which lets the
// tunnel outlive its request's goroutine, and every other TunnelService
// or EnrollService call with the agents' grpc-go server (its ServeHTTP).
func agentHandler(tunnels pb.TunnelServiceServer, rest http.Handler) http.Handler {
	return grpcstream.Handler(pb.TunnelService_OpenTunnel_FullMethodName, func(ss *grpcstream.ServerStream) error {
		return tunnels.OpenTunnel(tunnelStream{ss})
	}, rest)
}

// tunnelStream is an OpenTunnel call served by grpcstream: the typed
// stream TunnelService takes, and a tunnelsvc.Detacher (its Detach is the
// ServerStream's).
type tunnelStream struct{ *grpcstream.ServerStream }

// Send sends one frame to the agent.
func (s tunnelStream) Send(f *pb.TunnelFrame) error { return s.SendMsg(f) }

// Recv reads the agent's next frame.
func (s tunnelStream) Recv() (*pb.TunnelFrame, error) {
	f := new(pb.TunnelFrame)
	if err := s.RecvMsg(f); err != nil {
		return nil, err
	}
	return f, nil
}
