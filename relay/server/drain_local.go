package server

import (
	"context"
	"strings"

	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/betcode-dev/betcode/relay/router"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// drainExempt are the relay-served services the drain does not gate:
// health keeps answering (NOT_SERVING once the drain starts, which is how
// probes and balancers learn of it), and TunnelService has a drain of its
// own (drainTunnels: refused registrations and tunnels count as "tunnel").
var drainExempt = map[string]bool{
	healthpb.Health_ServiceDesc.ServiceName:  true,
	pb.BetCodeHealth_ServiceDesc.ServiceName: true,
	pb.TunnelService_ServiceDesc.ServiceName: true,
}

// gates reports whether the drain gates the relay-served method fullMethod
// ("/package.Service/Method").
func gates(fullMethod string) bool {
	service, _, ok := strings.Cut(strings.TrimPrefix(fullMethod, "/"), "/")
	return ok && !drainExempt[service]
}

// unaryInterceptor gates the relay's own unary calls (MachineService,
// AdminService, EnrollService, OIDCService) as the router gates forwarded
// ones: refused UNAVAILABLE / RELAY_DRAINING once the drain starts, so that
// the client retries on another replica, and waited for when under way.
func (d *drain) unaryInterceptor(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if !gates(info.FullMethod) {
		return handler(ctx, req)
	}
	_, done, ok := d.Admit(ctx, router.CallUnary)
	if !ok {
		return nil, drainingErr()
	}
	defer done()
	return handler(ctx, req)
}

// streamInterceptor refuses the relay's own streams (reflection) once the
// drain starts. One under way is not cut: a handler blocked in RecvMsg
// cannot be interrupted from here, and such a stream is short (grpcurl's
// listing); it ends with its connection, by the grace at the latest.
func (d *drain) streamInterceptor(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if gates(info.FullMethod) && d.draining.Load() {
		d.m.refuse(router.CallStream)
		return drainingErr()
	}
	return handler(srv, ss)
}
