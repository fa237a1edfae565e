package telemetry

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

func TestNewLogger(t *testing.T) {
	for _, tc := range []struct {
		name, format, level string
		wantErr             string
		wantJSON            bool
		debugShown          bool
	}{
		{name: "text default", format: "", level: "info"},
		{name: "text", format: "text", level: "debug", debugShown: true},
		{name: "json", format: "json", level: "info", wantJSON: true},
		{name: "json debug", format: "json", level: "debug", wantJSON: true, debugShown: true},
		{name: "bad format", format: "xml", level: "info", wantErr: "--log-format"},
		{name: "bad level", format: "json", level: "loud", wantErr: "--log-level"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			log, err := NewLogger(&buf, tc.format, tc.level)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one naming %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			log.Debug("quiet")
			log.Info("hello", "k", "v")
			out := buf.String()
			if got := strings.Contains(out, "quiet"); got != tc.debugShown {
				t.Errorf("debug line shown = %v, want %v:\n%s", got, tc.debugShown, out)
			}
			last := strings.TrimSpace(out[strings.LastIndex(strings.TrimSpace(out), "\n")+1:])
			var m map[string]any
			isJSON := json.Unmarshal([]byte(last), &m) == nil
			if isJSON != tc.wantJSON {
				t.Errorf("JSON = %v, want %v: %s", isJSON, tc.wantJSON, last)
			}
		})
	}
}

func TestTraceHandlerAddsIDs(t *testing.T) {
	tp := sdktrace.NewTracerProvider()
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	ctx, span := tp.Tracer("test").Start(context.Background(), "call")
	defer span.End()
	sc := span.SpanContext()

	for _, tc := range []struct {
		name    string
		ctx     context.Context
		log     func(*bytes.Buffer) func(ctx context.Context)
		wantIDs bool
	}{
		{name: "context with span", ctx: ctx, wantIDs: true},
		{name: "no span", ctx: context.Background(), wantIDs: false},
		{name: "derived logger keeps ids", ctx: ctx, wantIDs: true, log: func(b *bytes.Buffer) func(context.Context) {
			l, _ := NewLogger(b, FormatJSON, "info")
			l = l.With("session_id", "s1")
			return func(ctx context.Context) { l.InfoContext(ctx, "turn") }
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			logf := func(ctx context.Context) {
				l, _ := NewLogger(&buf, FormatJSON, "info")
				l.InfoContext(ctx, "turn")
			}
			if tc.log != nil {
				logf = tc.log(&buf)
			}
			logf(tc.ctx)
			var m map[string]any
			if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
				t.Fatalf("%v: %s", err, buf.String())
			}
			if !tc.wantIDs {
				if _, ok := m[TraceIDKey]; ok {
					t.Fatalf("trace_id without a span: %s", buf.String())
				}
				return
			}
			if m[TraceIDKey] != sc.TraceID().String() || m[SpanIDKey] != sc.SpanID().String() {
				t.Fatalf("ids = %v/%v, want %s/%s", m[TraceIDKey], m[SpanIDKey], sc.TraceID(), sc.SpanID())
			}
		})
	}
}
