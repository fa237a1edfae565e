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
		// The typed stream keeps Detach: it is a tunnelsvc.Detacher.
		return tunnels.OpenTunnel(grpcstream.Typed[pb.TunnelFrame, pb.TunnelFrame]{ServerStream: ss})
	}, rest)
}
