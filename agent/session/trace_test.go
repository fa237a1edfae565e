package session

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// TestTurnSpanIsExportedHoweverTheTurnEnds checks that a turn's span is
// ended, and so exported, whatever ends the turn: its result, the
// session's deletion, the CLI stopping or crashing, the agent shutting
// down; every end but the result (and a cancel) is an error saying why.
func TestTurnSpanIsExportedHoweverTheTurnEnds(t *testing.T) {
	tests := []struct {
		name       string
		prompt     string
		end        func(ctx context.Context, m *Manager, s *Session) error // nil: the turn ends by itself
		wantReason string
		wantStatus codes.Code
		wantWhy    string // in the status description
	}{
		{name: "completed", prompt: "hello", wantReason: "end_turn", wantStatus: codes.Unset},
		{name: "deleted", prompt: "HANG", end: func(ctx context.Context, m *Manager, s *Session) error {
			_, err := m.Delete(ctx, s.ID())
			return err
		}, wantReason: "deleted", wantStatus: codes.Error, wantWhy: whyDeleted},
		{name: "provider stopped", prompt: "HANG", end: func(ctx context.Context, _ *Manager, s *Session) error {
			return s.StopProvider(ctx)
		}, wantReason: "crashed", wantStatus: codes.Error, wantWhy: CodeSubprocessCrashed},
		{name: "crashed", prompt: "CRASH", wantReason: "crashed", wantStatus: codes.Error, wantWhy: CodeSubprocessCrashed},
		{name: "agent shutdown", prompt: "HANG", end: func(ctx context.Context, m *Manager, _ *Session) error {
			return m.Close(ctx)
		}, wantReason: "interrupted", wantStatus: codes.Error, wantWhy: CodeAgentShuttingDown},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			exp := tracetest.NewInMemoryExporter()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
			t.Cleanup(func() { tp.Shutdown(context.Background()) })
			m := newManager(t, Config{DefaultDir: t.TempDir(), Tracer: tp.Tracer("test")})
			ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
			defer cancel()
			s, err := m.Create(ctx, CreateRequest{})
			if err != nil {
				t.Fatal(err)
			}
			if err := s.SendUser(ctx, tc.prompt, nil); err != nil {
				t.Fatal(err)
			}
			if tc.end != nil {
				waitForText(ctx, t, s) // mid-turn
				if err := tc.end(ctx, m, s); err != nil {
					t.Fatal(err)
				}
			}
			span := waitForSpan(ctx, t, exp)
			if span.Status.Code != tc.wantStatus || !strings.Contains(span.Status.Description, tc.wantWhy) {
				t.Errorf("status = %v %q; want %v with %q", span.Status.Code, span.Status.Description, tc.wantStatus, tc.wantWhy)
			}
			var reason string
			for _, a := range span.Attributes {
				if a.Key == "betcode.stop_reason" {
					reason = a.Value.AsString()
				}
			}
			if reason != tc.wantReason {
				t.Errorf("betcode.stop_reason = %q, want %q", reason, tc.wantReason)
			}
		})
	}
}

// waitForText returns once the running turn has streamed text: the CLI is
// mid-turn.
func waitForText(ctx context.Context, t *testing.T, s *Session) {
	t.Helper()
	errText := errors.New("text seen")
	err := s.Stream(ctx, StreamOptions{}, func(ev *pb.AgentEvent) error {
		if ev.GetTextDelta() != nil {
			return errText
		}
		return nil
	})
	if !errors.Is(err, errText) {
		t.Fatalf("waiting for the turn's text: %v", err)
	}
}

// waitForSpan returns the one turn span exported, waiting for it: spans
// end as the log publishes the turn's end, after the call that ended it.
func waitForSpan(ctx context.Context, t *testing.T, exp *tracetest.InMemoryExporter) tracetest.SpanStub {
	t.Helper()
	for {
		spans := exp.GetSpans()
		if len(spans) > 1 {
			t.Fatalf("%d spans exported, want the turn's", len(spans))
		}
		if len(spans) == 1 {
			if spans[0].Name != turnSpanName {
				t.Fatalf("span %q exported, want %q", spans[0].Name, turnSpanName)
			}
			return spans[0]
		}
		select {
		case <-ctx.Done():
			t.Fatal("the turn's span was never exported")
		case <-time.After(10 * time.Millisecond):
		}
	}
}
