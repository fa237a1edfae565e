package telemetry

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/stats"

	"github.com/betcode-dev/betcode/shared/mtls"
)

// Config says where spans go.
type Config struct {
	// Endpoint is the host:port of an OTLP/gRPC collector. Empty turns
	// tracing off: spans are not sampled, recorded nor exported.
	Endpoint string
	// Insecure sends spans in plaintext off loopback. Without it the
	// exporter uses TLS with the system roots, except to a loopback
	// Endpoint (a local collector or sidecar), which is always plaintext.
	Insecure bool
	// ServiceName and ServiceVersion name the process in its spans
	// (service.name, service.version), e.g. "betcode-relay", "0.1.0".
	ServiceName, ServiceVersion string
	// BatchTimeout is the longest a finished span waits before it is
	// exported (default 5s; tests use less).
	BatchTimeout time.Duration
}

// Validate checks Endpoint.
func (c Config) Validate() error {
	if c.Endpoint == "" {
		return nil
	}
	host, port, err := net.SplitHostPort(c.Endpoint)
	if err != nil || host == "" || port == "" {
		return fmt.Errorf("--otlp-endpoint %q: want host:port of an OTLP/gRPC collector", c.Endpoint)
	}
	return nil
}

// plaintext reports whether spans go without TLS.
func (c Config) plaintext() bool {
	return c.Insecure || mtls.LoopbackAddr(c.Endpoint)
}

// Tracing is a process's tracing: a TracerProvider and the propagator of
// W3C trace context. A nil *Tracing is tracing off, like one built from an
// empty Config.
type Tracing struct {
	tp  trace.TracerProvider
	sdk *sdktrace.TracerProvider // nil when off
}

// propagator is W3C tracecontext (traceparent, tracestate).
var propagator propagation.TextMapPropagator = propagation.TraceContext{}

// Off is tracing turned off: a no-op provider and the W3C propagator, so
// that a process that does not trace still passes its callers' trace
// context on.
func Off() *Tracing {
	return &Tracing{tp: noop.NewTracerProvider()}
}

// Start builds the process's tracing from c. With an Endpoint it exports
// every span of a sampled trace (new traces are sampled, and a caller's
// decision is followed) in batches; Shutdown flushes them. Without one it
// returns Off(). The exporter connects lazily: an unreachable collector
// costs dropped spans, not a failed start.
func Start(ctx context.Context, c Config) (*Tracing, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if c.Endpoint == "" {
		return Off(), nil
	}
	opts := []otlptracegrpc.Option{otlptracegrpc.WithEndpoint(c.Endpoint)}
	if c.plaintext() {
		opts = append(opts, otlptracegrpc.WithInsecure())
	} else {
		opts = append(opts, otlptracegrpc.WithTLSCredentials(credentials.NewTLS(&tls.Config{MinVersion: tls.VersionTLS12})))
	}
	exp, err := otlptracegrpc.New(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("otlp exporter for %s: %w", c.Endpoint, err)
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(
		semconv.ServiceName(c.ServiceName), semconv.ServiceVersion(c.ServiceVersion)))
	if err != nil {
		return nil, fmt.Errorf("otel resource: %w", err)
	}
	var bopts []sdktrace.BatchSpanProcessorOption
	if c.BatchTimeout > 0 {
		bopts = append(bopts, sdktrace.WithBatchTimeout(c.BatchTimeout))
	}
	sdk := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp, bopts...),
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.AlwaysSample())),
	)
	return &Tracing{tp: sdk, sdk: sdk}, nil
}

// Enabled reports whether spans are exported.
func (t *Tracing) Enabled() bool { return t != nil && t.sdk != nil }

// TracerProvider returns the provider (a no-op one when tracing is off).
func (t *Tracing) TracerProvider() trace.TracerProvider {
	if t == nil {
		return noop.NewTracerProvider()
	}
	return t.tp
}

// Tracer returns the tracer of an instrumentation scope, by convention the
// package path.
func (t *Tracing) Tracer(name string) trace.Tracer {
	return t.TracerProvider().Tracer(name)
}

// Propagator returns the W3C trace-context propagator.
func (t *Tracing) Propagator() propagation.TextMapPropagator { return propagator }

// ServerHandler is the otelgrpc stats handler for a grpc.Server: a server
// span per call, its parent taken from the call's traceparent. No
// metadata is recorded, so bearer tokens never reach a span.
func (t *Tracing) ServerHandler() stats.Handler {
	return otelgrpc.NewServerHandler(t.grpcOptions()...)
}

// ClientHandler is the otelgrpc stats handler for a grpc.ClientConn: a
// client span per call whose context goes out as traceparent.
func (t *Tracing) ClientHandler() stats.Handler {
	return otelgrpc.NewClientHandler(t.grpcOptions()...)
}

func (t *Tracing) grpcOptions() []otelgrpc.Option {
	return []otelgrpc.Option{
		otelgrpc.WithTracerProvider(t.TracerProvider()),
		otelgrpc.WithPropagators(propagator),
		// Metrics are Prometheus's job (--metrics-listen).
		otelgrpc.WithMeterProvider(metricnoop.NewMeterProvider()),
	}
}

// Shutdown exports the spans still buffered and stops the exporter; ctx
// bounds the wait. It is a no-op when tracing is off.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if !t.Enabled() {
		return nil
	}
	if err := t.sdk.Shutdown(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("flush spans: %w", err)
	}
	return nil
}
