package router

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// recorded is a Tracing whose spans a test reads back.
type recorded struct {
	tp  *sdktrace.TracerProvider
	rec *tracetest.SpanRecorder
}

func (r recorded) Tracer(name string) trace.Tracer           { return r.tp.Tracer(name) }
func (r recorded) Propagator() propagation.TextMapPropagator { return propagation.TraceContext{} }

func TestForwardSpan(t *testing.T) {
	const clientTP = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	for _, tc := range []struct {
		name        string
		traceparent string
		answer      http.Header // what the agent's answer left in the response headers
		wantCode    string
		wantParent  string
	}{
		{name: "ok in trailers", traceparent: clientTP, answer: http.Header{http.TrailerPrefix + "Grpc-Status": {"0"}}, wantCode: "0", wantParent: "00f067aa0ba902b7"},
		{name: "trailers-only error", traceparent: clientTP, answer: http.Header{"Grpc-Status": {"14"}}, wantCode: "14", wantParent: "00f067aa0ba902b7"},
		{name: "client left", answer: http.Header{}, wantCode: "1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := tracetest.NewSpanRecorder()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
			rt := &Router{Tracing: recorded{tp: tp, rec: rec}}
			r := httptest.NewRequest(http.MethodPost, "/betcode.v1.AgentService/Converse", nil)
			r.Header.Set("Authorization", "Bearer secret-token")
			if tc.traceparent != "" {
				r.Header.Set("Traceparent", tc.traceparent)
			}
			headers := http.Header{}
			ctx, span := rt.startSpan(context.Background(), r, "m1", headers)
			span.end(tc.answer)

			ended := rec.Ended()
			if len(ended) != 1 {
				t.Fatalf("%d spans ended", len(ended))
			}
			s := ended[0]
			if s.Name() != "betcode.v1.AgentService/Converse" || s.SpanKind() != trace.SpanKindServer {
				t.Fatalf("span %q kind %v", s.Name(), s.SpanKind())
			}
			if got := s.Parent().SpanID().String(); tc.wantParent != "" && got != tc.wantParent {
				t.Fatalf("parent %s, want %s", got, tc.wantParent)
			}
			if tc.wantParent == "" && s.Parent().IsValid() {
				t.Fatalf("a parent without a traceparent: %v", s.Parent())
			}
			attrs := map[string]string{}
			for _, kv := range s.Attributes() {
				attrs[string(kv.Key)] = kv.Value.String()
				if kv.Value.String() == "Bearer secret-token" {
					t.Fatalf("the token is in attribute %s", kv.Key)
				}
			}
			if attrs["rpc.grpc.status_code"] != tc.wantCode || attrs["betcode.machine_id"] != "m1" || attrs["rpc.method"] != "Converse" {
				t.Fatalf("attributes %v", attrs)
			}
			// The agent gets the relay span as its parent, and logs under
			// ctx carry it.
			want := "00-" + s.SpanContext().TraceID().String() + "-" + s.SpanContext().SpanID().String() + "-01"
			if got := headers.Get("Traceparent"); got != want {
				t.Fatalf("forwarded traceparent %q, want %q", got, want)
			}
			if trace.SpanContextFromContext(ctx).SpanID() != s.SpanContext().SpanID() {
				t.Fatal("ctx does not carry the relay span")
			}
		})
	}
}

func TestNoTracingNoHeaders(t *testing.T) {
	rt := &Router{}
	r := httptest.NewRequest(http.MethodPost, "/betcode.v1.AgentService/Converse", nil)
	headers := http.Header{}
	ctx, span := rt.startSpan(context.Background(), r, "m1", headers)
	span.end(http.Header{})
	if len(headers) != 0 || trace.SpanContextFromContext(ctx).IsValid() {
		t.Fatalf("headers %v without tracing", headers)
	}
}
