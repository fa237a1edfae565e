package client

import (
	"context"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/telemetry"
	"github.com/betcode-dev/betcode/shared/telemetry/otlptest"
)

// TestDialCarriesTraceparent checks that calls made through Dial carry W3C
// trace context: the client span's when the client traces, the caller's
// own otherwise.
func TestDialCarriesTraceparent(t *testing.T) {
	got := make(chan string, 1)
	srv := grpc.NewServer(grpc.UnknownServiceHandler(func(_ any, ss grpc.ServerStream) error {
		md, _ := metadata.FromIncomingContext(ss.Context())
		got <- first(md.Get("traceparent"))
		return status.Error(12, "only headers are looked at")
	}))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(srv.Stop)

	col := otlptest.Start(t)
	ctx := context.Background()
	on, err := telemetry.Start(ctx, telemetry.Config{Endpoint: col.Addr, ServiceName: "client-test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { on.Shutdown(ctx) })
	parentCtx, parent := on.Tracer("test").Start(ctx, "chat")
	defer parent.End()

	for _, tc := range []struct {
		name    string
		tracing *telemetry.Tracing
		// wantSpanOf: "client" (a client span of its own, child of the
		// caller's) or "caller" (the caller's span passed on).
		wantSpanOf string
	}{
		{name: "tracing on", tracing: on, wantSpanOf: "client"},
		{name: "tracing off", tracing: nil, wantSpanOf: "caller"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := Dial(ln.Addr().String(), DialOptions{Tracing: tc.tracing})
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			cctx, cancel := context.WithTimeout(parentCtx, 10*time.Second)
			defer cancel()
			_, _ = pb.NewAgentServiceClient(conn).ListSessions(cctx, &pb.ListSessionsRequest{})
			tp := <-got
			sc := parent.SpanContext()
			wantPrefix := "00-" + sc.TraceID().String() + "-"
			if len(tp) != 55 || tp[:len(wantPrefix)] != wantPrefix {
				t.Fatalf("traceparent %q, want one of trace %s", tp, sc.TraceID())
			}
			spanID := tp[len(wantPrefix) : len(wantPrefix)+16]
			if (spanID == sc.SpanID().String()) != (tc.wantSpanOf == "caller") {
				t.Fatalf("traceparent span %s, caller's %s: want the %s's", spanID, sc.SpanID(), tc.wantSpanOf)
			}
		})
	}
}

func first(v []string) string {
	if len(v) == 0 {
		return ""
	}
	return v[0]
}
