package session

import (
	"context"
	"log/slog"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// turnSpanName names the span of one CLI turn: from the user message
// handed to the CLI to the TurnComplete that settles it.
const turnSpanName = "claude.turn"

// turnTrace is a session's open turn spans, oldest first (the CLI answers
// its turns in order), and the usage reported for the oldest. Under s.mu.
type turnTrace struct {
	open  []openTurn
	usage *pb.UsageReport
	// lastErr is the last ErrorEvent of the open turns ("CODE: message"):
	// why a turn that crashed or was interrupted ended. endErr is why the
	// last failed turn ended, for the turns settled with it.
	lastErr, endErr string
}

// Why a turn failed when no ErrorEvent said so.
const (
	whyCrashed     = "the CLI exited mid-turn"
	whyInterrupted = "the agent shut down mid-turn"
	whyDeleted     = "the session was deleted mid-turn"
)

// failure is why a turn that ended with reason failed, or "" if it did not
// fail: it completed, or its user cancelled it.
func (tt *turnTrace) failure(reason string) string {
	why := tt.lastErr
	switch reason {
	case "crashed":
		if why == "" {
			why = whyCrashed
		}
	case "interrupted":
		if why == "" {
			why = whyInterrupted
		}
	case "settled": // by the crash or shutdown that ended the turn before
		return tt.endErr
	default:
		return ""
	}
	tt.endErr = why
	return why
}

type openTurn struct {
	ctx  context.Context // carries the span, for the turn's logs
	span trace.Span
}

// startTurnSpanLocked opens the span of a turn just sent to the CLI, a
// child of the call that sent it (ctx). s.mu is held.
func (s *Session) startTurnSpanLocked(ctx context.Context) {
	tr := s.m.cfg.Tracer
	if tr == nil {
		return
	}
	ctx, span := tr.Start(context.WithoutCancel(ctx), turnSpanName, trace.WithAttributes(
		attribute.String("betcode.session_id", s.id),
		attribute.String("betcode.model", s.meta.Model),
	))
	s.turns.open = append(s.turns.open, openTurn{ctx: ctx, span: span})
	s.m.cfg.Logger.DebugContext(ctx, "session: turn started", "session_id", s.id)
}

// traceLocked follows a published event: it keeps the turn's usage and
// errors and, when publishing ev ended turns, ends their spans with the
// stop reason, model and token counts, and an error status when the turn
// crashed or the shutdown interrupted it. s.mu is held.
func (s *Session) traceLocked(ev *pb.AgentEvent, ended int) {
	if len(s.turns.open) == 0 {
		return
	}
	if u := ev.GetUsage(); u != nil {
		s.turns.usage = u
	}
	if e := ev.GetError(); e != nil {
		s.turns.lastErr = e.GetCode() + ": " + e.GetMessage()
	}
	if ended <= 0 {
		return
	}
	reason := ev.GetTurnComplete().GetStopReason()
	if reason == "" {
		reason = "settled" // a crash or shutdown settled every open turn
	}
	s.endTurnSpansLocked(ended, reason, s.turns.failure(reason))
}

// endTurnSpansLocked ends the n oldest open turn spans with the stop
// reason, the usage reported and, if failure is set, an error status
// saying why. s.mu is held.
func (s *Session) endTurnSpansLocked(n int, reason, failure string) {
	for ; n > 0 && len(s.turns.open) > 0; n-- {
		t := s.turns.open[0]
		s.turns.open[0] = openTurn{}
		s.turns.open = s.turns.open[1:]
		attrs := []attribute.KeyValue{attribute.String("betcode.stop_reason", reason)}
		if u := s.turns.usage; u != nil {
			attrs = append(attrs,
				attribute.String("betcode.model", u.Model),
				attribute.Int64("betcode.input_tokens", int64(u.InputTokens)),
				attribute.Int64("betcode.output_tokens", int64(u.OutputTokens)),
				attribute.Int64("betcode.cache_read_tokens", int64(u.CacheReadTokens)),
				attribute.Int64("betcode.cache_creation_tokens", int64(u.CacheCreationTokens)))
		}
		t.span.SetAttributes(attrs...)
		if failure != "" {
			t.span.SetStatus(codes.Error, failure)
		}
		t.span.End()
		if s.m.cfg.Logger.Enabled(t.ctx, slog.LevelDebug) {
			s.m.cfg.Logger.DebugContext(t.ctx, "session: turn ended", "session_id", s.id, "stop_reason", reason)
		}
	}
	s.turns.usage = nil
	s.turns.lastErr = ""
	if len(s.turns.open) == 0 {
		s.turns.open = nil
		s.turns.endErr = ""
	}
}

// abandonTurnSpans ends the spans of turns no event will ever settle (the
// session was deleted, or the agent closed without publishing their end),
// as failed for why: a span never ended is never exported.
func (s *Session) abandonTurnSpans(reason, why string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.endTurnSpansLocked(len(s.turns.open), reason, why)
}

// turnContext returns ctx carrying the span of the oldest open turn, if
// any, so that what is logged about it carries its trace id.
func (s *Session) turnContext(ctx context.Context) context.Context {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.turns.open) == 0 {
		return ctx
	}
	return trace.ContextWithSpan(ctx, s.turns.open[0].span)
}
