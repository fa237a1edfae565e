package telemetry

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"go.opentelemetry.io/otel/trace"
)

// Log formats of NewLogger.
const (
	FormatText = "text"
	FormatJSON = "json"
)

// Log keys TraceHandler adds.
const (
	TraceIDKey = "trace_id"
	SpanIDKey  = "span_id"
)

// NewLogger returns the process's logger writing to w: format "text" (the
// default when empty) or "json", level "debug", "info", "warn" or "error".
// Records logged with a context that carries a span (InfoContext and the
// like) get its trace_id and span_id.
func NewLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: l}
	var h slog.Handler
	switch format {
	case FormatText, "":
		h = slog.NewTextHandler(w, opts)
	case FormatJSON:
		h = slog.NewJSONHandler(w, opts)
	default:
		return nil, fmt.Errorf("--log-format %q: want text or json", format)
	}
	return slog.New(TraceHandler{h}), nil
}

// TraceHandler adds the trace_id and span_id of the record's context, when
// it carries a valid span, to every record it passes to Handler. Under
// WithGroup they land inside the group, as any attribute would.
type TraceHandler struct {
	slog.Handler
}

var _ slog.Handler = TraceHandler{}

// Handle adds the span's ids and passes r on.
func (h TraceHandler) Handle(ctx context.Context, r slog.Record) error {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		r = r.Clone()
		r.AddAttrs(slog.String(TraceIDKey, sc.TraceID().String()), slog.String(SpanIDKey, sc.SpanID().String()))
	}
	return h.Handler.Handle(ctx, r)
}

// WithAttrs keeps the trace ids on the derived handler.
func (h TraceHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return TraceHandler{h.Handler.WithAttrs(attrs)}
}

// WithGroup keeps the trace ids on the derived handler.
func (h TraceHandler) WithGroup(name string) slog.Handler {
	return TraceHandler{h.Handler.WithGroup(name)}
}
