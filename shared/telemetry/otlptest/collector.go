// Package otlptest is an OTLP/gRPC trace collector for tests: a real
// grpc.Server on loopback implementing the collector's TraceService, which
// keeps every span it receives.
package otlptest

import (
	"context"
	"encoding/hex"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
)

// Span is one received span with the service that sent it.
type Span struct {
	Service string // the resource's service.name
	*tracepb.Span
}

// TraceID is the span's trace id in hex, as logs carry it.
func (s Span) TraceID() string { return hex.EncodeToString(s.Span.TraceId) }

// ID is the span's id in hex.
func (s Span) ID() string { return hex.EncodeToString(s.SpanId) }

// Parent is the parent span's id in hex ("" for a root).
func (s Span) Parent() string { return hex.EncodeToString(s.ParentSpanId) }

// Attr returns the string form of attribute key ("" when absent).
func (s Span) Attr(key string) string {
	for _, kv := range s.Attributes {
		if kv.Key == key {
			return anyString(kv.Value)
		}
	}
	return ""
}

func anyString(v *commonpb.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return fmt.Sprint(x.IntValue)
	case *commonpb.AnyValue_BoolValue:
		return fmt.Sprint(x.BoolValue)
	case *commonpb.AnyValue_DoubleValue:
		return fmt.Sprint(x.DoubleValue)
	}
	return v.String()
}

// Collector receives spans.
type Collector struct {
	coltracepb.UnimplementedTraceServiceServer
	// Addr is the collector's host:port on loopback (plaintext).
	Addr string

	mu      sync.Mutex
	spans   []Span
	raw     []*coltracepb.ExportTraceServiceRequest
	changed chan struct{} // closed and replaced on every export
}

// Start runs a collector until the test ends.
func Start(t testing.TB) *Collector {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &Collector{Addr: ln.Addr().String(), changed: make(chan struct{})}
	srv := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(srv, c)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	t.Cleanup(func() {
		srv.Stop()
		<-done
	})
	return c
}

// Export keeps the request's spans.
func (c *Collector) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.raw = append(c.raw, req)
	for _, rs := range req.ResourceSpans {
		svc := ""
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.Key == "service.name" {
				svc = kv.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.ScopeSpans {
			for _, sp := range ss.Spans {
				c.spans = append(c.spans, Span{Service: svc, Span: sp})
			}
		}
	}
	close(c.changed)
	c.changed = make(chan struct{})
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

// Spans returns the spans received so far.
func (c *Collector) Spans() []Span {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Span(nil), c.spans...)
}

// Requests returns the export requests received so far, as sent.
func (c *Collector) Requests() []*coltracepb.ExportTraceServiceRequest {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*coltracepb.ExportTraceServiceRequest(nil), c.raw...)
}

// WaitFor waits until ok holds for the spans received, or fails the test
// after d.
func (c *Collector) WaitFor(t testing.TB, d time.Duration, what string, ok func([]Span) bool) []Span {
	t.Helper()
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for {
		c.mu.Lock()
		spans := append([]Span(nil), c.spans...)
		changed := c.changed
		c.mu.Unlock()
		if ok(spans) {
			return spans
		}
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("otlptest: %s: not within %s; got %d spans: %v", what, d, len(spans), names(spans))
		}
	}
}

func names(spans []Span) []string {
	out := make([]string, len(spans))
	for i, s := range spans {
		out[i] = s.Service + ":" + s.Name
	}
	return out
}
