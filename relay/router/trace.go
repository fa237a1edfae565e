package router

import (
	"context"
	"net/http"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	otelcodes "go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/codes"

	"github.com/betcode-dev/betcode/shared/telemetry"
	"github.com/betcode-dev/betcode/shared/tunnel"
)

// tracerName is the instrumentation scope of the router's spans.
const tracerName = "github.com/betcode-dev/betcode/relay/router"

// Tracing is what the router needs to trace forwarded calls.
type Tracing interface {
	Tracer(name string) trace.Tracer
	Propagator() propagation.TextMapPropagator
}

var _ Tracing = (*telemetry.Tracing)(nil)

// callSpan is the relay's server span of one forwarded call.
type callSpan struct {
	span trace.Span
}

// startSpan starts the server span of a call about to be forwarded: its
// parent is the client's traceparent, if any; ctx carries it for the
// router's logs, and headers (the metadata the relay adds to the call)
// get its traceparent, so the agent's span is its child. Only the method
// and the machine are recorded: no header, no token.
func (rt *Router) startSpan(ctx context.Context, r *http.Request, machineID string, headers http.Header) (context.Context, callSpan) {
	if rt.Tracing == nil {
		return ctx, callSpan{}
	}
	prop := rt.Tracing.Propagator()
	ctx = prop.Extract(ctx, propagation.HeaderCarrier(r.Header))
	service, method, _ := tunnel.SplitMethod(r.URL.Path)
	ctx, span := rt.Tracing.Tracer(tracerName).Start(ctx, service+"/"+method,
		trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(
			attribute.String("rpc.system", "grpc"),
			attribute.String("rpc.service", service),
			attribute.String("rpc.method", method),
			attribute.String("betcode.machine_id", machineID),
		))
	if span.SpanContext().IsValid() {
		prop.Inject(ctx, propagation.HeaderCarrier(headers))
	}
	return ctx, callSpan{span: span}
}

// end records the call's gRPC status (from the answer's trailers, or its
// headers for a trailers-only answer; CANCELLED when it carried none) and
// ends the span.
func (c callSpan) end(h http.Header) {
	if c.span == nil || !c.span.IsRecording() {
		if c.span != nil {
			c.span.End()
		}
		return
	}
	code := codes.Canceled
	s := h[http.TrailerPrefix+"Grpc-Status"]
	if len(s) == 0 {
		s = h["Grpc-Status"]
	}
	if len(s) > 0 {
		if n, err := strconv.Atoi(s[0]); err == nil {
			code = codes.Code(n)
		} else {
			code = codes.Unknown
		}
	}
	c.span.SetAttributes(attribute.Int("rpc.grpc.status_code", int(code)))
	switch code {
	case codes.Unknown, codes.DeadlineExceeded, codes.Unimplemented, codes.Internal, codes.Unavailable, codes.DataLoss:
		c.span.SetStatus(otelcodes.Error, code.String())
	}
	c.span.End()
}
