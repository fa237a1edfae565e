package main

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/betcode-dev/betcode/agent/client"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/telemetry/otlptest"
)

// traceAgent records the traceparent of ListSessions calls.
type traceAgent struct {
	pb.UnimplementedAgentServiceServer
	mu   sync.Mutex
	seen []string
}

func (a *traceAgent) ListSessions(ctx context.Context, _ *pb.ListSessionsRequest) (*pb.ListSessionsResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	a.mu.Lock()
	a.seen = append(a.seen, strings.Join(md.Get("traceparent"), ","))
	a.mu.Unlock()
	return &pb.ListSessionsResponse{}, nil
}

func (a *traceAgent) last() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.seen) == 0 {
		return "<no call>"
	}
	return a.seen[len(a.seen)-1]
}

// TestCLITracing checks that with --otlp-endpoint (or BETCODE_OTLP_ENDPOINT)
// a command's call starts a trace: betcode exports a client span, flushed
// before the command returns, whose trace and span ids reach the agent as
// traceparent. Without an endpoint nothing is exported and no traceparent
// is made up.
func TestCLITracing(t *testing.T) {
	cliEnv(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	agent := &traceAgent{}
	srv := grpc.NewServer()
	pb.RegisterAgentServiceServer(srv, agent)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	t.Cleanup(func() {
		srv.Stop()
		<-done
	})
	base := []string{"--agent", ln.Addr().String(), "--agent-token", "t"}

	tests := []struct {
		name      string
		flags     bool // --otlp-endpoint, else BETCODE_OTLP_ENDPOINT
		endpoint  bool
		wantSpans bool
	}{
		{name: "flag", flags: true, endpoint: true, wantSpans: true},
		{name: "environment", endpoint: true, wantSpans: true},
		{name: "no endpoint: tracing off"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			col := otlptest.Start(t)
			args := append([]string(nil), base...)
			switch {
			case tt.endpoint && tt.flags:
				args = append(args, "--otlp-endpoint", col.Addr)
			case tt.endpoint:
				t.Setenv("BETCODE_OTLP_ENDPOINT", col.Addr)
			}
			if _, _, err := runCLI(t, "", append(args, "sessions")...); err != nil {
				t.Fatalf("sessions: %v", err)
			}
			tp := agent.last()
			// The spans are flushed when the command returns: no wait.
			var clientSpans []otlptest.Span
			for _, s := range col.Spans() {
				if s.Service == "betcode" && s.Name == "betcode.v1.AgentService/ListSessions" {
					clientSpans = append(clientSpans, s)
				}
			}
			if !tt.wantSpans {
				if n := len(col.Spans()); n != 0 || tp != "" {
					t.Fatalf("tracing off: %d spans exported, traceparent %q; want none", n, tp)
				}
				return
			}
			if len(clientSpans) != 1 {
				t.Fatalf("client spans %d, want 1 (all: %d)", len(clientSpans), len(col.Spans()))
			}
			s := clientSpans[0]
			if want := "00-" + s.TraceID() + "-" + s.ID() + "-01"; tp != want {
				t.Fatalf("agent got traceparent %q, want the client span's %q", tp, want)
			}
			if s.Parent() != "" {
				t.Fatalf("client span has parent %s; the CLI's call should start the trace", s.Parent())
			}
		})
	}
}

func TestCLITracingBadEndpoint(t *testing.T) {
	cliEnv(t)
	_, _, err := runCLI(t, "", "--agent", "127.0.0.1:1", "--otlp-endpoint", "no-port", "sessions")
	if code := client.ExitCode(err); code != client.ExitInvalidArgs {
		t.Fatalf("exit code %d (%v), want %d", code, err, client.ExitInvalidArgs)
	}
}
