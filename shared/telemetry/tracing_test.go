package telemetry

import (
	"bytes"
	"context"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/betcode-dev/betcode/shared/telemetry/otlptest"
)

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name      string
		c         Config
		wantErr   bool
		plaintext bool
	}{
		{name: "off", c: Config{}},
		{name: "loopback is plaintext", c: Config{Endpoint: "127.0.0.1:4317"}, plaintext: true},
		{name: "localhost is plaintext", c: Config{Endpoint: "localhost:4317"}, plaintext: true},
		{name: "remote is TLS", c: Config{Endpoint: "otel.example.com:4317"}},
		{name: "remote insecure", c: Config{Endpoint: "otel.example.com:4317", Insecure: true}, plaintext: true},
		{name: "no port", c: Config{Endpoint: "otel.example.com"}, wantErr: true},
		{name: "URL", c: Config{Endpoint: "http://otel:4317"}, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.c.Validate()
			if (err != nil) != tc.wantErr {
				t.Fatalf("Validate() = %v, want error %v", err, tc.wantErr)
			}
			if tc.c.Endpoint != "" && !tc.wantErr && tc.c.plaintext() != tc.plaintext {
				t.Fatalf("plaintext = %v, want %v", tc.c.plaintext(), tc.plaintext)
			}
		})
	}
}

// otelGoroutines counts goroutines running OpenTelemetry SDK or exporter
// code (the batch span processor's loop, the exporter's connection).
func otelGoroutines(t *testing.T) int {
	t.Helper()
	var buf bytes.Buffer
	if err := pprof.Lookup("goroutine").WriteTo(&buf, 2); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, g := range strings.Split(buf.String(), "\n\n") {
		if strings.Contains(g, "go.opentelemetry.io/otel/sdk") || strings.Contains(g, "go.opentelemetry.io/otel/exporters") {
			n++
		}
	}
	return n
}

// waitGoroutines polls (the exporter's goroutines end asynchronously after
// Shutdown) until want holds for the count of OTel goroutines.
func waitGoroutines(t *testing.T, what string, want func(int) bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for n := otelGoroutines(t); !want(n); n = otelGoroutines(t) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d OpenTelemetry goroutines", what, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestNoEndpointRunsNoExporter(t *testing.T) {
	ctx := context.Background()
	waitGoroutines(t, "before", func(n int) bool { return n == 0 })
	tr, err := Start(ctx, Config{ServiceName: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if tr.Enabled() {
		t.Fatal("tracing enabled without an endpoint")
	}
	// Spans through the grpc handlers and the tracer cost nothing.
	_, span := tr.Tracer("test").Start(ctx, "x")
	if span.IsRecording() || span.SpanContext().IsSampled() {
		t.Fatal("a span was recorded or sampled with tracing off")
	}
	span.End()
	if n := otelGoroutines(t); n != 0 {
		t.Fatalf("%d OpenTelemetry goroutines with tracing off", n)
	}
	if err := tr.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}

	// The same check sees the exporter when there is one.
	col := otlptest.Start(t)
	on, err := Start(ctx, Config{Endpoint: col.Addr, ServiceName: "test"})
	if err != nil {
		t.Fatal(err)
	}
	waitGoroutines(t, "with an endpoint", func(n int) bool { return n > 0 })
	if err := on.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	waitGoroutines(t, "after Shutdown", func(n int) bool { return n == 0 })
}

func TestShutdownFlushes(t *testing.T) {
	ctx := context.Background()
	col := otlptest.Start(t)
	// A batch timeout far past the test: only Shutdown can send the span.
	tr, err := Start(ctx, Config{Endpoint: col.Addr, ServiceName: "betcode-test", ServiceVersion: "1.2.3", BatchTimeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	_, span := tr.Tracer("test").Start(ctx, "work")
	span.End()
	if err := tr.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	spans := col.Spans()
	if len(spans) != 1 || spans[0].Name != "work" || spans[0].Service != "betcode-test" {
		t.Fatalf("collector got %v", spans)
	}
}
