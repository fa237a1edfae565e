package telemetry

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// TestOffPassesTraceContextOn checks the interceptors tracing off installs:
// a client sends its caller's span context, a server puts the received one
// into the call's context, where logs find it; without a span, nothing is
// sent.
func TestOffPassesTraceContextOn(t *testing.T) {
	off := Off()
	got := make(chan trace.SpanContext, 4)
	srv := grpc.NewServer(append(off.ServerOptions(),
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			got <- trace.SpanContextFromContext(ctx)
			return h(ctx, req)
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			got <- trace.SpanContextFromContext(ss.Context())
			return h(srv, ss)
		}))...)
	healthpb.RegisterHealthServer(srv, health.NewServer())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(srv.Stop)
	cc, err := grpc.NewClient(ln.Addr().String(), append(off.DialOptions(), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })

	caller := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1, 2, 3}, SpanID: trace.SpanID{4, 5, 6}, TraceFlags: trace.FlagsSampled,
	})
	for _, tc := range []struct {
		name   string
		ctx    context.Context
		stream bool
		want   trace.SpanContext
	}{
		{name: "unary with span", ctx: trace.ContextWithSpanContext(context.Background(), caller), want: caller.WithRemote(true)},
		{name: "stream with span", ctx: trace.ContextWithSpanContext(context.Background(), caller), stream: true, want: caller.WithRemote(true)},
		{name: "unary without span", ctx: context.Background()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(tc.ctx, 10*time.Second)
			defer cancel()
			api := healthpb.NewHealthClient(cc)
			if tc.stream {
				s, err := api.Watch(ctx, &healthpb.HealthCheckRequest{})
				if err != nil {
					t.Fatal(err)
				}
				if _, err := s.Recv(); err != nil {
					t.Fatal(err)
				}
			} else if _, err := api.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
				t.Fatal(err)
			}
			sc := <-got
			if !sc.Equal(tc.want) {
				t.Fatalf("server saw %v, want %v", sc, tc.want)
			}
			if !tc.want.IsValid() {
				return
			}
			var buf bytes.Buffer
			log, _ := NewLogger(&buf, FormatJSON, "info")
			log.InfoContext(trace.ContextWithRemoteSpanContext(context.Background(), sc), "call")
			var rec map[string]any
			if err := json.Unmarshal(buf.Bytes(), &rec); err != nil || rec[TraceIDKey] != caller.TraceID().String() {
				t.Fatalf("log line %s (%v)", buf.String(), err)
			}
		})
	}
}
