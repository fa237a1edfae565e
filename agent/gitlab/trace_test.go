package gitlab

import (
	"context"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/fakegitlab"
)

// headerRecorder keeps the headers of every request sent to GitLab.
type headerRecorder struct {
	mu   sync.Mutex
	sent []http.Header
}

func (r *headerRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	r.mu.Lock()
	r.sent = append(r.sent, req.Header.Clone())
	r.mu.Unlock()
	return http.DefaultTransport.RoundTrip(req)
}

// TestGitLabRequestsAreTracedUnderTheCall checks that a ListMergeRequests
// call has a server span with one client span per HTTP request to GitLab
// (a retried one included), that no trace context is sent to GitLab, and
// that the token is in no span.
func TestGitLabRequestsAreTracedUnderTheCall(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	serverEnded := &spanEnded{kind: trace.SpanKindServer, ch: make(chan struct{})}
	// The exporter first: when serverEnded fires, the span is exported.
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithSpanProcessor(serverEnded))
	t.Cleanup(func() { tp.Shutdown(t.Context()) })
	// A process-wide W3C propagator, as a host program may set: GitLab
	// must still get no trace context.
	prev := otel.GetTextMapPropagator()
	otel.SetTextMapPropagator(propagation.TraceContext{})
	t.Cleanup(func() { otel.SetTextMapPropagator(prev) })
	rec := &headerRecorder{}
	f := newFixture(t, 30, func(o *Options) {
		o.TracerProvider = tp
		o.HTTPClient = &http.Client{Transport: rec}
	})
	srv := grpc.NewServer(grpc.StatsHandler(otelgrpc.NewServerHandler(
		otelgrpc.WithTracerProvider(tp), otelgrpc.WithMeterProvider(metricnoop.NewMeterProvider()))))
	pb.RegisterGitLabServiceServer(srv, f.svc)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })

	// Two pages, the first answered 503 once and retried: three requests.
	f.fake.FailNext(fakegitlab.Failure{Status: http.StatusServiceUnavailable})
	resp, err := pb.NewGitLabServiceClient(conn).ListMergeRequests(t.Context(), &pb.ListMrsRequest{Project: repo, Limit: 10, Offset: 15})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.MergeRequests) != 10 {
		t.Fatalf("%d merge requests, want 10", len(resp.MergeRequests))
	}
	requests := len(f.fake.Requests())
	if requests != 3 {
		t.Fatalf("%d GitLab requests, want 3 (two pages, one retried)", requests)
	}

	// The server span ends once the answer is sent: wait for it.
	var server tracetest.SpanStub
	var clients tracetest.SpanStubs
	select {
	case <-serverEnded.ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("no server span exported; spans: %v", exp.GetSpans())
	}
	for _, s := range exp.GetSpans() {
		switch s.SpanKind {
		case trace.SpanKindServer:
			server = s
		case trace.SpanKindClient:
			clients = append(clients, s)
		}
	}
	if server.Name != "betcode.v1.GitLabService/ListMergeRequests" {
		t.Errorf("server span %q, want betcode.v1.GitLabService/ListMergeRequests", server.Name)
	}
	if len(clients) != requests {
		t.Fatalf("%d client spans, want one per GitLab request (%d)", len(clients), requests)
	}
	statuses := map[int64]int{}
	for _, c := range clients {
		if c.Parent.SpanID() != server.SpanContext.SpanID() || c.SpanContext.TraceID() != server.SpanContext.TraceID() {
			t.Errorf("client span %q has parent %s, want the server span %s", c.Name, c.Parent.SpanID(), server.SpanContext.SpanID())
		}
		if c.Name != "GitLab GET" {
			t.Errorf("client span named %q, want \"GitLab GET\"", c.Name)
		}
		for _, a := range c.Attributes {
			if a.Key == "http.response.status_code" {
				statuses[a.Value.AsInt64()]++
			}
		}
	}
	if statuses[200] != 2 || statuses[503] != 1 {
		t.Errorf("client spans' status codes %v, want two 200 and one 503", statuses)
	}

	for _, s := range exp.GetSpans() {
		for _, a := range s.Attributes {
			if strings.Contains(a.Value.String(), testToken) {
				t.Errorf("span %q attribute %s holds the token", s.Name, a.Key)
			}
		}
		for _, ev := range s.Events {
			for _, a := range ev.Attributes {
				if strings.Contains(a.Value.String(), testToken) {
					t.Errorf("span %q event %q attribute %s holds the token", s.Name, ev.Name, a.Key)
				}
			}
		}
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.sent) != requests {
		t.Fatalf("recorded %d requests, want %d", len(rec.sent), requests)
	}
	for _, h := range rec.sent {
		for _, k := range []string{"Traceparent", "Tracestate", "Baggage"} {
			if v := h.Get(k); v != "" {
				t.Errorf("GitLab was sent %s: %s", k, v)
			}
		}
	}
}

// spanEnded is a span processor that closes ch when the first span of
// kind ends.
type spanEnded struct {
	kind trace.SpanKind
	ch   chan struct{}
	once sync.Once
}

func (p *spanEnded) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (p *spanEnded) OnEnd(s sdktrace.ReadOnlySpan) {
	if s.SpanKind() == p.kind {
		p.once.Do(func() { close(p.ch) })
	}
}
func (p *spanEnded) Shutdown(context.Context) error   { return nil }
func (p *spanEnded) ForceFlush(context.Context) error { return nil }
