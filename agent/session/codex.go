package session

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"time"

	"github.com/betcode-dev/betcode/agent/codex"
	"github.com/betcode-dev/betcode/agent/provider"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// This file is the session manager's second output path: a Codex
// conversation's events (package codex) go through the same sequencing,
// event log, fan-out, permission engine and turn accounting as Claude
// Code's stream-json (handle in session.go).

// metaCodexThread is the metadata key of a Codex session's thread id,
// which resumes it.
const metaCodexThread = "betcode.codex_thread"

// codexStream is the output side of a Codex conversation
// (*codex.Conversation).
type codexStream interface {
	provider.Conversation
	Next() (codex.Event, bool)
	ThreadID() string
	Model() string
}

var _ codexStream = (*codex.Conversation)(nil)

// startCodexLocked records the conversation's thread and starts reading
// its events. s.mu is held; s.proc and s.readerDone are set.
func (s *Session) startCodexLocked(ctx context.Context, out codexStream, resumed bool, restart int) {
	if s.meta.Metadata == nil {
		s.meta.Metadata = map[string]string{}
	}
	if s.meta.Metadata[metaCodexThread] != out.ThreadID() || !s.meta.ClaudeStarted {
		// ClaudeStarted: the provider's conversation exists (resume it).
		s.meta.Metadata[metaCodexThread] = out.ThreadID()
		s.meta.ClaudeStarted = true
		// Saved off s.mu; Close waits for it (procs) before closing the log.
		// The reader's own Add is done, so this Add cannot race a Wait at zero.
		s.m.procs.Go(func() { s.saveMeta(context.WithoutCancel(ctx)) })
	}
	tr := codex.NewTranslator(out.Model(), s.m.cfg.Now)
	s.trMu.Lock()
	s.ctr = tr
	s.trMu.Unlock()
	go s.codexReadLoop(out, tr, resumed, restart, s.readerDone)
}

// setTranslatorStatus tells the running translator(s) a status announced
// outside them.
func (s *Session) setTranslatorStatus(st pb.AgentStatus) {
	s.trMu.Lock()
	defer s.trMu.Unlock()
	s.tr.SetStatus(st)
	if s.ctr != nil {
		s.ctr.SetStatus(st)
	}
}

// codexReadLoop turns a Codex conversation's events into AgentEvents until
// its app-server exits.
func (s *Session) codexReadLoop(out codexStream, tr *codex.Translator, resumed bool, restart int, done chan struct{}) {
	defer s.m.procs.Done()
	defer close(done)
	defer s.m.releaseSlot()
	ctx := context.Background()
	log := s.m.cfg.Logger.With("session_id", s.id, "pid", out.Pid(), "provider", "codex")
	var lastOutput atomic.Int64
	lastOutput.Store(time.Now().UnixNano())
	var hung atomic.Bool
	stopWatch := s.watchHang(out, &lastOutput, &hung)
	defer stopWatch()
	s.announceStart(ctx, "Codex restarted with its thread resumed", restart, resumed)
	for {
		ev, ok := out.Next()
		lastOutput.Store(time.Now().UnixNano())
		if !ok {
			break
		}
		if _, exited := ev.(*codex.Exited); exited {
			continue // the stream ends next; finishReader reports a crash
		}
		s.handleCodex(ctx, out, tr, ev)
	}
	s.finishReader(ctx, out, log, &hung, "Codex", func() {
		s.trMu.Lock()
		if s.ctr == tr {
			s.ctr = nil
		}
		s.trMu.Unlock()
	})
}

// handleCodex processes one Codex event.
func (s *Session) handleCodex(ctx context.Context, p provider.Conversation, tr *codex.Translator, ev codex.Event) {
	s.trMu.Lock()
	prev := tr.Status()
	evs := tr.Translate(ev)
	s.trMu.Unlock()
	switch e := ev.(type) {
	case *codex.Approval:
		for _, out := range evs {
			req := out.GetPermissionRequest()
			if req == nil {
				continue
			}
			input, err := json.Marshal(req.GetInput().AsMap())
			if err != nil || req.GetInput() == nil {
				input = json.RawMessage("{}")
			}
			if !s.decideTool(ctx, p, e.ID(), req.ToolName, input, req.ToolUseId) {
				// Decided by a rule: nothing for the user to see.
				s.trMu.Lock()
				tr.SetStatus(prev)
				s.trMu.Unlock()
				return
			}
		}
	case *codex.RequestResolved:
		s.withdrawPending(ctx, e.ApprovalID, "withdrawn by Codex (turn interrupted)")
	case *codex.TurnEnded:
		s.mu.Lock()
		s.crashes = 0 // a turn finished: the app-server works
		cancelled := s.cancelRequested
		s.cancelRequested = false
		stopping := s.stopping
		s.mu.Unlock()
		evs = endedTurn(evs, cancelled, stopping)
		s.recordResult(evs)
		s.emit(ctx, evs...)
		s.saveMeta(ctx)
		return
	}
	s.emit(ctx, evs...)
}
