package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/betcode-dev/betcode/agent/bridge"
	"github.com/betcode-dev/betcode/agent/claude"
	"github.com/betcode-dev/betcode/agent/eventlog"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// Session status values stored in the log.
const (
	StatusIdle   = "idle"
	StatusActive = "active"
)

// BetCode error codes the session layer produces.
const (
	CodeSubprocessCrashed = "SUBPROCESS_CRASHED"
	CodeSessionNotFound   = "SESSION_NOT_FOUND"
	CodePermissionStale   = "PERMISSION_STALE"
)

const (
	metaAllowedTools = "betcode.allowed_tools"
	metaPlanMode     = "betcode.plan_mode"
)

// Session is one conversation with Claude.
type Session struct {
	m  *Manager
	id string

	// emitMu orders sequence assignment and log appends. It is never taken by
	// the log's writer goroutine, so Append may block under it.
	emitMu sync.Mutex
	seq    uint64
	tr     *bridge.Translator

	mu        sync.Mutex
	meta      eventlog.Session
	pending   []*pb.AgentEvent // sequenced, appended, not yet committed
	committed uint64           // last committed and published sequence
	subs      map[*subscriber]struct{}
	// Turns sent to the CLI and turns whose TurnComplete was published: the
	// session is busy while they differ.
	sentTurns, doneTurns int
	resetAt              uint64 // publishing this sequence settles every turn (crash)
	proc                 *claude.Process
	perms                map[string]json.RawMessage // open can_use_tool request id -> tool input
	cancelRequested      bool

	idemMu sync.Mutex // serialises SendUserOnce
}

func newSession(m *Manager, meta eventlog.Session, lastSeq uint64) *Session {
	return &Session{
		m: m, id: meta.ID, meta: meta, seq: lastSeq, committed: lastSeq,
		tr: bridge.New(m.cfg.Now), subs: map[*subscriber]struct{}{}, perms: map[string]json.RawMessage{},
	}
}

// ID returns the session id (also the Claude Code session id).
func (s *Session) ID() string { return s.id }

// Meta returns a snapshot of the session's metadata with its live status.
func (s *Session) Meta() eventlog.Session {
	s.mu.Lock()
	defer s.mu.Unlock()
	meta := s.meta
	if s.sentTurns != s.doneTurns {
		meta.Status = StatusActive
	}
	return meta
}

// LastSeq returns the last committed sequence.
func (s *Session) LastSeq() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.committed
}

func (s *Session) info(resumed bool) *pb.SessionInfo {
	return &pb.SessionInfo{
		SessionId: s.meta.ID, Model: s.meta.Model, WorkingDirectory: s.meta.WorkingDirectory,
		WorktreeId: s.meta.WorktreeID, MessageCount: uint64(s.meta.MessageCount), IsResumed: resumed,
	}
}

// emit sequences, timestamps and persists events. They reach subscribers
// once committed.
func (s *Session) emit(ctx context.Context, evs ...*pb.AgentEvent) {
	s.emitEvents(ctx, false, evs...)
}

// emitEvents is emit; with settle, publishing the last event also settles
// every open turn (used when the CLI died and its turns will never finish).
func (s *Session) emitEvents(ctx context.Context, settle bool, evs ...*pb.AgentEvent) {
	if len(evs) == 0 {
		return
	}
	s.emitMu.Lock()
	defer s.emitMu.Unlock()
	now := s.m.cfg.Now()
	records := make([]eventlog.Event, 0, len(evs))
	for _, ev := range evs {
		s.seq++
		ev.Sequence = s.seq
		ev.Timestamp = timestamppb.New(now)
		payload, err := proto.Marshal(ev)
		if err != nil {
			s.m.cfg.Logger.Error("session: marshal event", "session_id", s.id, "err", err)
			continue
		}
		records = append(records, eventlog.Event{SessionID: s.id, Seq: ev.Sequence, Time: now, Kind: Kind(ev), Payload: payload})
	}
	s.mu.Lock()
	s.pending = append(s.pending, evs...)
	if settle {
		s.resetAt = s.seq
	}
	s.mu.Unlock()
	for _, r := range records {
		// Appends are not cancelled with the caller's context: an event that
		// got a sequence must reach the log, or later ones would leave a gap.
		if err := s.m.log.Append(context.WithoutCancel(ctx), r); err != nil {
			s.m.cfg.Logger.Error("session: persist event", "session_id", s.id, "seq", r.Seq, "err", err)
		}
	}
}

// Kind is the short type tag stored with an event.
func Kind(ev *pb.AgentEvent) string {
	switch ev.Event.(type) {
	case *pb.AgentEvent_TextDelta:
		return "text_delta"
	case *pb.AgentEvent_ToolCallStart:
		return "tool_call_start"
	case *pb.AgentEvent_ToolCallResult:
		return "tool_call_result"
	case *pb.AgentEvent_PermissionRequest:
		return "permission_request"
	case *pb.AgentEvent_UserQuestion:
		return "user_question"
	case *pb.AgentEvent_TodoUpdate:
		return "todo_update"
	case *pb.AgentEvent_StatusChange:
		return "status_change"
	case *pb.AgentEvent_SessionInfo:
		return "session_info"
	case *pb.AgentEvent_Error:
		return "error"
	case *pb.AgentEvent_Usage:
		return "usage"
	case *pb.AgentEvent_PlanMode:
		return "plan_mode"
	case *pb.AgentEvent_TurnComplete:
		return "turn_complete"
	}
	return "unknown"
}

// publishUpTo hands committed events to subscribers. It runs on the log's
// writer goroutine and never blocks.
func (s *Session) publishUpTo(seq uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for n < len(s.pending) && s.pending[n].Sequence <= seq {
		ev := s.pending[n]
		n++
		s.committed = ev.Sequence
		if ev.GetTurnComplete() != nil && s.doneTurns < s.sentTurns {
			s.doneTurns++
		}
		if ev.Sequence == s.resetAt {
			s.doneTurns = s.sentTurns
		}
		for sub := range s.subs {
			sub.offer(ev)
		}
	}
	clear(s.pending[:n])
	s.pending = s.pending[n:]
	if s.sentTurns == s.doneTurns && s.meta.Status == StatusActive {
		s.meta.Status = StatusIdle
	}
}

// idleAt reports whether every sent turn has completed and been published,
// and the last published sequence.
func (s *Session) idleAt() (uint64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.committed, s.sentTurns == s.doneTurns
}

// Busy reports whether a turn is running (or queued).
func (s *Session) Busy() bool {
	_, idle := s.idleAt()
	return !idle
}

// SendUser sends a user message, starting the CLI (with --resume when the
// session has history) if it is not running.
func (s *Session) SendUser(ctx context.Context, text string, attachments []*pb.Attachment) error {
	if strings.TrimSpace(text) == "" && len(attachments) == 0 {
		return invalidf("user message is empty")
	}
	if !utf8.ValidString(text) {
		return invalidf("user message is not valid UTF-8")
	}
	if len(text) > s.m.cfg.MaxMessageBytes {
		return invalidf("user message is %d bytes; the limit is %d", len(text), s.m.cfg.MaxMessageBytes)
	}
	content, err := buildContent(text, attachments, s.m.cfg.MaxMessageBytes)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.ensureProcessLocked(ctx); err != nil {
		return err
	}
	if err := s.proc.SendUser(content, ""); err != nil {
		return fmt.Errorf("send message to claude: %w", err)
	}
	s.sentTurns++
	s.cancelRequested = false
	s.meta.Status = StatusActive
	s.meta.MessageCount++
	s.meta.LastMessagePreview = preview(text)
	s.meta.UpdatedAt = s.m.cfg.Now()
	meta := s.meta
	go func() {
		// Persist the new status off the caller's path; a failure is logged.
		if err := s.m.log.PutSession(context.WithoutCancel(ctx), meta); err != nil {
			s.m.cfg.Logger.Error("session: save", "session_id", s.id, "err", err)
		}
	}()
	return nil
}

func preview(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	const max = 120
	if utf8.RuneCountInString(s) <= max {
		return s
	}
	r := []rune(s)
	return string(r[:max]) + "…"
}

// ensureProcessLocked starts the CLI if it is not running. s.mu is held.
func (s *Session) ensureProcessLocked(ctx context.Context) error {
	if s.proc != nil {
		return nil
	}
	s.m.mu.Lock()
	closing := s.m.closing
	if !closing {
		s.m.procs.Add(1)
	}
	s.m.mu.Unlock()
	if closing {
		return ErrClosed
	}
	opts := claude.Options{
		Bin: s.m.cfg.ClaudeBin, Dir: s.meta.WorkingDirectory, Model: s.meta.Model,
		SessionID: s.id, Resume: s.meta.ClaudeStarted, Env: s.m.cfg.ClaudeEnv,
		Logger: s.m.cfg.Logger.With("session_id", s.id),
	}
	if v := s.meta.Metadata[metaAllowedTools]; v != "" {
		opts.AllowedTools = splitList(v)
	}
	if s.meta.Metadata[metaPlanMode] == "true" && !s.meta.ClaudeStarted {
		opts.PermissionMode = "plan"
	}
	p, err := claude.Start(ctx, opts)
	if err != nil {
		s.m.procs.Done()
		return err
	}
	if _, err := p.Initialize(); err != nil {
		p.Kill()
		go func() { _ = p.Conn.Drain(context.Background()); _ = p.Wait() }()
		s.m.procs.Done()
		return fmt.Errorf("initialize claude: %w", err)
	}
	s.proc = p
	resumed := s.meta.ClaudeStarted
	go s.readLoop(p, resumed)
	return nil
}

// readLoop turns the CLI's output into events until it exits.
func (s *Session) readLoop(p *claude.Process, resumed bool) {
	defer s.m.procs.Done()
	ctx := context.Background()
	log := s.m.cfg.Logger.With("session_id", s.id, "pid", p.Pid())
	if resumed {
		s.mu.Lock()
		info := s.info(true)
		s.mu.Unlock()
		s.emit(ctx, &pb.AgentEvent{Event: &pb.AgentEvent_SessionInfo{SessionInfo: info}})
	}
	for {
		env, err := p.Next()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				log.Warn("session: reading claude output", "err", err)
			}
			break
		}
		s.handle(ctx, p, env)
	}
	waitErr := p.Wait()
	s.mu.Lock()
	s.proc = nil
	s.perms = map[string]json.RawMessage{}
	s.mu.Unlock()
	if bad := p.BadLines(); bad > 0 {
		log.Warn("session: claude wrote malformed lines", "bad_lines", bad)
	}
	if !s.unsettled() {
		log.Debug("session: claude exited", "err", waitErr)
		return
	}
	msg := fmt.Sprintf("Claude process exited mid-turn (%v)", exitText(waitErr))
	if tail := p.Stderr(); tail != "" {
		msg += ": " + lastLine(tail)
	}
	log.Warn("session: claude crashed mid-turn", "err", waitErr, "stderr", p.Stderr())
	s.emitCrash(ctx, msg)
}

// unsettled reports whether, counting events not yet published, a turn is
// still open.
func (s *Session) unsettled() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	done := s.doneTurns
	for _, ev := range s.pending {
		if ev.GetTurnComplete() != nil {
			done++
		}
	}
	return done < s.sentTurns
}

func (s *Session) emitCrash(ctx context.Context, msg string) {
	evs := []*pb.AgentEvent{
		bridge.ErrorEvent(CodeSubprocessCrashed, msg+"; the next message restarts it with --resume", false),
		bridge.TurnCompleteEvent("crashed"),
		bridge.StatusEvent(pb.AgentStatus_IDLE, ""),
	}
	s.tr.SetStatus(pb.AgentStatus_IDLE)
	s.emitEvents(ctx, true, evs...)
	s.saveMeta(ctx)
}

func exitText(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// handle processes one CLI line.
func (s *Session) handle(ctx context.Context, p *claude.Process, env *claude.Envelope) {
	switch env.Type {
	case claude.TypeSystem:
		if env.Subtype == "init" {
			s.mu.Lock()
			first := !s.meta.ClaudeStarted
			s.meta.ClaudeStarted = true
			s.mu.Unlock()
			if first {
				s.saveMeta(ctx)
			}
		}
	case claude.TypeControlRequest:
		var req claude.ControlRequest
		if err := json.Unmarshal(env.Request, &req); err != nil {
			_ = p.SendControlError(env.RequestID, "malformed control request")
			return
		}
		if req.Subtype != "can_use_tool" {
			_ = p.SendControlError(env.RequestID, "unsupported control request subtype: "+req.Subtype)
			return
		}
		s.mu.Lock()
		s.perms[env.RequestID] = req.Input
		s.mu.Unlock()
	case claude.TypeControlCancel:
		s.mu.Lock()
		delete(s.perms, env.RequestID)
		s.mu.Unlock()
	}
	evs := s.tr.Translate(env)
	if env.Type == claude.TypeResult {
		s.mu.Lock()
		cancelled := s.cancelRequested
		s.cancelRequested = false
		s.mu.Unlock()
		for _, ev := range evs {
			if tc := ev.GetTurnComplete(); tc != nil && cancelled {
				tc.StopReason = "cancelled"
			}
		}
		s.recordResult(evs)
	}
	s.emit(ctx, evs...)
	if env.Type == claude.TypeResult {
		s.saveMeta(ctx)
	}
}

// recordResult adds a turn's usage to the session totals.
func (s *Session) recordResult(evs []*pb.AgentEvent) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ev := range evs {
		if u := ev.GetUsage(); u != nil {
			s.meta.TotalInputTokens += uint64(u.InputTokens)
			s.meta.TotalOutputTokens += uint64(u.OutputTokens)
			s.meta.TotalCostUSD += u.CostUsd
			if u.Model != "" {
				s.meta.Model = u.Model
			}
		}
	}
	s.meta.MessageCount++
	s.meta.UpdatedAt = s.m.cfg.Now()
}

func (s *Session) saveMeta(ctx context.Context) {
	s.mu.Lock()
	meta := s.meta
	if s.sentTurns == s.doneTurns {
		meta.Status = StatusIdle
	}
	s.mu.Unlock()
	if err := s.m.log.PutSession(context.WithoutCancel(ctx), meta); err != nil {
		s.m.cfg.Logger.Error("session: save", "session_id", s.id, "err", err)
	}
}

// AnswerPermission answers an open can_use_tool request.
func (s *Session) AnswerPermission(ctx context.Context, requestID string, decision pb.PermissionDecision) error {
	s.mu.Lock()
	input, ok := s.perms[requestID]
	p := s.proc
	if ok {
		delete(s.perms, requestID)
	}
	s.mu.Unlock()
	if !ok || p == nil {
		return ErrStale
	}
	switch decision {
	case pb.PermissionDecision_ALLOW_ONCE, pb.PermissionDecision_ALLOW_SESSION:
		resp := map[string]any{"behavior": "allow"}
		if len(input) > 0 {
			resp["updatedInput"] = input
		}
		return p.SendControlSuccess(requestID, resp)
	case pb.PermissionDecision_DENY:
		return p.SendControlSuccess(requestID, map[string]any{"behavior": "deny", "message": "The user denied this tool call."})
	}
	s.mu.Lock()
	s.perms[requestID] = input
	s.mu.Unlock()
	return invalidf("permission decision must be ALLOW_ONCE, ALLOW_SESSION or DENY")
}

// Cancel interrupts the running turn; it reports whether one was running.
// The turn ends with TurnComplete{stop_reason: "cancelled"}.
func (s *Session) Cancel(ctx context.Context) (bool, error) {
	s.mu.Lock()
	busy := s.sentTurns != s.doneTurns
	p := s.proc
	if busy {
		s.cancelRequested = true
	}
	s.mu.Unlock()
	if !busy || p == nil {
		return false, nil
	}
	if _, err := p.Interrupt(); err != nil {
		return true, fmt.Errorf("interrupt claude: %w", err)
	}
	return true, nil
}

// stopProcess ends the CLI, if any, gracefully.
func (s *Session) stopProcess() {
	s.mu.Lock()
	p := s.proc
	s.mu.Unlock()
	if p != nil {
		p.Stop(s.m.cfg.StopGrace)
	}
}

func joinList(l []string) string { return strings.Join(l, "\x1f") }

func splitList(s string) []string { return strings.Split(s, "\x1f") }

// SendUserOnce is SendUser made idempotent on key: a message whose key was
// taken before is not sent again and dup is true. The key is recorded right
// after the message reached the CLI; an agent crash in between can repeat it
// on redelivery (at least once within that window, exactly once otherwise).
func (s *Session) SendUserOnce(ctx context.Context, key, text string, attachments []*pb.Attachment) (dup bool, err error) {
	if key == "" {
		return false, s.SendUser(ctx, text, attachments)
	}
	s.idemMu.Lock()
	defer s.idemMu.Unlock()
	seen, err := s.m.log.GetKV(ctx, s.id, idemPrefix+key)
	if err != nil {
		return false, fmt.Errorf("check idempotency key: %w", err)
	}
	if _, ok := seen[idemPrefix+key]; ok {
		return true, nil
	}
	if err := s.SendUser(ctx, text, attachments); err != nil {
		return false, err
	}
	if err := s.m.log.PutKV(context.WithoutCancel(ctx), s.id, idemPrefix+key, []byte(s.m.cfg.Now().UTC().Format(time.RFC3339Nano))); err != nil {
		return false, fmt.Errorf("record idempotency key: %w", err)
	}
	return false, nil
}

const idemPrefix = "idem/"
