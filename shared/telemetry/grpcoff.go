package telemetry

import (
	"context"

	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// Without an exporter there are no spans to make, only trace context to
// pass on. A stats handler would do that too, but grpc-go then builds a
// payload record for every message of every call; these interceptors work
// once per call.

// ServerOptions instrument a grpc.Server: the otelgrpc server handler when
// spans are exported; otherwise interceptors that only put the caller's
// traceparent into the call's context, for the spans and logs made under
// it.
func (t *Tracing) ServerOptions() []grpc.ServerOption {
	if t.Enabled() {
		return []grpc.ServerOption{grpc.StatsHandler(t.ServerHandler())}
	}
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			return h(extractIncoming(ctx), req)
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			ctx := extractIncoming(ss.Context())
			if ctx == ss.Context() {
				return h(srv, ss)
			}
			return h(srv, &ctxStream{ServerStream: ss, ctx: ctx})
		}),
	}
}

// DialOptions instrument a grpc.ClientConn: the otelgrpc client handler
// when spans are exported; otherwise interceptors that send the caller's
// span context, if any, as traceparent.
func (t *Tracing) DialOptions() []grpc.DialOption {
	if t.Enabled() {
		return []grpc.DialOption{grpc.WithStatsHandler(t.ClientHandler())}
	}
	return []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			return invoker(injectOutgoing(ctx), method, req, reply, cc, opts...)
		}),
		grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			return streamer(injectOutgoing(ctx), desc, cc, method, opts...)
		}),
	}
}

// extractIncoming returns ctx with the remote span context of the call's
// traceparent, or ctx itself when the call carries none.
func extractIncoming(ctx context.Context) context.Context {
	md, ok := metadata.FromIncomingContext(ctx)
	if !ok || len(md["traceparent"]) == 0 {
		return ctx
	}
	return propagator.Extract(ctx, metadataCarrier(md))
}

// injectOutgoing adds ctx's span context, if valid, to the outgoing
// metadata.
func injectOutgoing(ctx context.Context) context.Context {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ctx
	}
	md, _ := metadata.FromOutgoingContext(ctx)
	md = md.Copy()
	propagator.Inject(ctx, metadataCarrier(md))
	return metadata.NewOutgoingContext(ctx, md)
}

// metadataCarrier adapts gRPC metadata to the propagator.
type metadataCarrier metadata.MD

func (c metadataCarrier) Get(key string) string {
	if v := metadata.MD(c).Get(key); len(v) > 0 {
		return v[0]
	}
	return ""
}

func (c metadataCarrier) Set(key, value string) { metadata.MD(c).Set(key, value) }

func (c metadataCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}

// ctxStream is a ServerStream with another context.
type ctxStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *ctxStream) Context() context.Context { return s.ctx }
