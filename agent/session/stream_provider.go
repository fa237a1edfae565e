package session

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"time"

	"github.com/betcode-dev/betcode/agent/permission"
	"github.com/betcode-dev/betcode/agent/provider"
)

// This file is the session manager's provider-agnostic output path: a
// provider.Stream (ACP agents, the OpenAI API) hands over AgentEvents and
// permission requests, which go through the same sequencing, event log,
// fan-out, permission engine and turn accounting as Claude Code's
// stream-json (session.go) and Codex's events (codex.go).

// metaResumeID is the metadata key of a Stream provider's own id of the
// conversation (provider.Stream.ResumeID), which resumes it.
const metaResumeID = "betcode.provider_resume_id"

// startStreamLocked records the conversation's resume id and starts
// reading its output. s.mu is held; s.proc and s.readerDone are set.
func (s *Session) startStreamLocked(ctx context.Context, out provider.Stream, resumed bool, restart int) {
	if s.meta.Metadata == nil {
		s.meta.Metadata = map[string]string{}
	}
	if id := out.ResumeID(); s.meta.Metadata[metaResumeID] != id || !s.meta.ClaudeStarted {
		// ClaudeStarted: the provider's conversation exists (resume it).
		if id != "" {
			s.meta.Metadata[metaResumeID] = id
		}
		s.meta.ClaudeStarted = true
		// Saved off s.mu; Close waits for it (procs) before closing the log.
		// The reader's own Add is done, so this Add cannot race a Wait at zero.
		s.m.procs.Go(func() { s.saveMeta(context.WithoutCancel(ctx)) })
	}
	go s.streamReadLoop(out, resumed, restart, s.readerDone)
}

// streamReadLoop publishes a Stream's output until the conversation ends.
func (s *Session) streamReadLoop(out provider.Stream, resumed bool, restart int, done chan struct{}) {
	defer s.m.procs.Done()
	defer close(done)
	defer s.m.releaseSlot()
	ctx := context.Background()
	name := provider.Name(s.Provider())
	log := s.m.cfg.Logger.With("session_id", s.id, "pid", out.Pid(), "provider", name)
	var lastOutput atomic.Int64
	lastOutput.Store(time.Now().UnixNano())
	var hung atomic.Bool
	stopWatch := s.watchHang(out, &lastOutput, &hung)
	defer stopWatch()
	s.announceStart(ctx, name+" restarted with its conversation resumed", restart, resumed)
	for {
		o, ok := out.Next()
		lastOutput.Store(time.Now().UnixNano())
		if !ok {
			break
		}
		s.handleStream(ctx, out, o)
	}
	s.finishReader(ctx, out, log, &hung, name, func() {})
}

// handleStream processes one step of a Stream's output.
func (s *Session) handleStream(ctx context.Context, p provider.Conversation, o provider.Output) {
	if o.Withdrawn != "" {
		s.withdrawPending(ctx, o.Withdrawn, "withdrawn by the agent (turn interrupted)")
	}
	if a := o.Permission; a != nil {
		input := a.Input
		if len(input) == 0 {
			input = []byte("{}")
		}
		if a.ReadOnly && s.allowRead(ctx, p, a, input) {
			return
		}
		if !s.decideTool(ctx, p, a.ID, a.Tool, input, a.ToolUseID) {
			return // decided by a rule: nothing for the user to see
		}
	}
	if o.TurnEnded {
		s.mu.Lock()
		s.crashes = 0 // a turn finished: the provider works
		cancelled := s.cancelRequested
		s.cancelRequested = false
		stopping := s.stopping
		s.mu.Unlock()
		evs := endedTurn(o.Events, cancelled, stopping)
		s.recordResult(evs)
		s.emit(ctx, evs...)
		s.saveMeta(ctx)
		return
	}
	s.emit(ctx, o.Events...)
}

// allowRead allows a read-only tool call that no rule decides, as Claude
// Code does its own reads; it reports whether it answered. A rule that
// matches (allow, deny or ask) is left to decideTool.
func (s *Session) allowRead(ctx context.Context, p provider.Conversation, a *provider.PermissionAsk, input json.RawMessage) bool {
	var in map[string]any
	_ = json.Unmarshal(input, &in)
	s.mu.Lock()
	cwd := s.meta.WorkingDirectory
	s.mu.Unlock()
	if d := s.engine().Decide(permission.Request{Tool: a.Tool, Input: in, Cwd: cwd}); d.Rule != nil {
		return false
	}
	_ = p.Answer(a.ID, allowAnswer(input))
	s.logDecision(ctx, LogEntry{RequestID: a.ID, Tool: a.Tool, Input: input, Decision: "allow",
		Source: "mode", Rule: "read-only tool", Reason: "reads inside the working directory need no approval"})
	return true
}
