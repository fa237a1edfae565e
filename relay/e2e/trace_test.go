package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/protobuf/proto"

	"github.com/betcode-dev/betcode/relay/pki"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/claudecli"
	"github.com/betcode-dev/betcode/shared/mtls"
	"github.com/betcode-dev/betcode/shared/telemetry"
	"github.com/betcode-dev/betcode/shared/telemetry/otlptest"
)

// TestTraceLinksClientRelayAgentAndTurn runs one turn through a real relay
// and a real agent, both exporting to an in-process OTLP collector, and
// checks that a single trace links the client's call span, the relay's
// forward span, the agent's server span and the CLI turn span, each the
// child of the one before; that the JSON log lines of the call in both
// processes carry that trace id; and that the bearer token reaches no span.
func TestTraceLinksClientRelayAgentAndTurn(t *testing.T) {
	col := otlptest.Start(t)
	otlp := []string{"--otlp-endpoint", col.Addr, "--log-format", "json"}
	w := newWorldOf(t, &world{t: t, pki: t.TempDir(), dataDir: t.TempDir(), dbURL: pgURL(t), extraArgs: otlp})
	cert, key := w.machineCert("m1")
	a := w.newAgent("m1")
	env := append([]string{"HOME=" + a.home}, claudecli.Env(a.home, w.api.URL())...)
	a.proc = start(t, "agent m1", env, bin(t, "betcode-agent"), append([]string{"serve", "--listen", "unix://" + a.sock,
		"--data-dir", a.data, "--claude-bin", claudePath(t), "--relay", w.addr, "--relay-ca", filepath.Join(w.pki, pki.CACertFile),
		"--machine-cert", cert, "--machine-key", key, "--machine-name", "name-m1", "--log-level", "debug", "--drain-timeout", "0",
		"--relay-e2e", "optional"}, otlp...)...)
	a.proc.waitLine(t, `relay link up`, 60*time.Second)

	// The client: this process, with its own tracing to the same collector.
	ctx := ctxT(t, 120*time.Second)
	tracing, err := telemetry.Start(ctx, telemetry.Config{Endpoint: col.Addr, ServiceName: "e2e-client", BatchTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tracing.Shutdown(context.Background()) })
	tlsCfg, err := mtls.ClientConfig(filepath.Join(w.pki, pki.CACertFile), "", "", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	token := w.userToken("alice")
	cc, err := grpc.NewClient(w.addr, grpc.WithTransportCredentials(credentials.NewTLS(tlsCfg)),
		grpc.WithPerRPCCredentials(bearer(token)), grpc.WithStatsHandler(tracing.ClientHandler()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })

	s, err := pb.NewAgentServiceClient(cc).Converse(onMachine(ctx, "m1"))
	if err != nil {
		t.Fatal(err)
	}
	s.Send(&pb.AgentRequest{Request: &pb.AgentRequest_Start{Start: &pb.StartConversation{WorkingDirectory: a.project}}})
	s.Send(&pb.AgentRequest{Request: &pb.AgentRequest_Message{Message: &pb.UserMessage{Content: "hello"}}})
	recvUntil(t, s, isTurnComplete)
	s.CloseSend()
	for {
		if _, err := s.Recv(); err != nil {
			break // the stream ended: every span of the call ends with it
		}
	}

	const method = "betcode.v1.AgentService/Converse"
	var client, relay, agentSpan, turn otlptest.Span
	col.WaitFor(t, 30*time.Second, "client, relay, agent and turn spans", func(spans []otlptest.Span) bool {
		for _, sp := range spans {
			switch {
			case sp.Service == "e2e-client" && sp.Name == method:
				client = sp
			case sp.Service == "betcode-relay" && sp.Name == method:
				relay = sp
			case sp.Service == "betcode-agent" && sp.Name == method:
				agentSpan = sp
			case sp.Service == "betcode-agent" && sp.Name == "claude.turn":
				turn = sp
			}
		}
		return client.Span != nil && relay.Span != nil && agentSpan.Span != nil && turn.Span != nil
	})
	traceID := client.TraceID()
	for _, c := range []struct {
		name         string
		span, parent otlptest.Span
	}{
		{"relay forward span", relay, client},
		{"agent server span", agentSpan, relay},
		{"turn span", turn, agentSpan},
	} {
		if c.span.TraceID() != traceID {
			t.Errorf("%s: trace %s, want the client's %s", c.name, c.span.TraceID(), traceID)
		}
		if c.span.Parent() != c.parent.ID() {
			t.Errorf("%s: parent %s, want %s (%s/%s)", c.name, c.span.Parent(), c.parent.ID(), c.parent.Service, c.parent.Name)
		}
	}
	if got := relay.Attr("betcode.machine_id"); got != "m1" {
		t.Errorf("relay span machine = %q", got)
	}
	if got := relay.Attr("rpc.grpc.status_code"); got == "" {
		t.Error("relay span has no rpc.grpc.status_code")
	}
	if turn.Attr("betcode.stop_reason") == "" || turn.Attr("betcode.output_tokens") == "" || turn.Attr("betcode.session_id") == "" {
		t.Errorf("turn span attributes = %v", turn.Attributes)
	}

	// Every log line of the call carries its trace id: the relay's line for
	// the forwarded call, the agent's for the turn.
	for _, c := range []struct {
		p   *proc
		msg string
	}{
		{w.relay, "router: forwarded call"},
		{a.proc, "session: turn started"},
		{a.proc, "session: turn ended"},
	} {
		waitJSONLine(t, c.p, c.msg, traceID)
	}

	// No secret in any span (the token went with every call as metadata).
	for _, req := range col.Requests() {
		b, err := proto.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte(token)) || bytes.Contains(b, []byte(token[len(token)/2:])) {
			t.Fatal("the bearer token reached an exported span")
		}
	}
	for _, p := range []*proc{w.relay, a.proc} {
		if strings.Contains(p.Log(), token) {
			t.Fatalf("the bearer token is in the %s log", p.name)
		}
	}
}

// waitJSONLine waits (the line is written as the call ends, in another
// process) for a JSON log line of p with message msg and trace_id traceID.
func waitJSONLine(t *testing.T, p *proc, msg, traceID string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		for _, l := range strings.Split(p.Log(), "\n") {
			var rec map[string]any
			if json.Unmarshal([]byte(l), &rec) != nil || rec["msg"] != msg {
				continue
			}
			if rec[telemetry.TraceIDKey] == traceID && rec[telemetry.SpanIDKey] != "" {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no JSON log line %q with trace_id %s:\n%s", p.name, msg, traceID, p.Log())
		}
		time.Sleep(50 * time.Millisecond)
	}
}
