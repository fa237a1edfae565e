// Package telemetry is what the relay and the agent share for tracing and
// logging: an OpenTelemetry TracerProvider that exports spans by OTLP/gRPC
// when an endpoint is configured and is a no-op otherwise (no exporter, no
// goroutine, no sampling), the W3C trace-context propagator, otelgrpc stats
// handlers bound to both, and a log/slog logger (text or JSON) whose
// records carry the trace_id and span_id of the context they are logged
// with.
//
// Nothing here touches OpenTelemetry's globals: each process builds one
// Tracing and hands it to what it instruments, so tests can run several in
// one process.
package telemetry
