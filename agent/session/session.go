package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/google/uuid"

	"github.com/betcode-dev/betcode/agent/bridge"
	"github.com/betcode-dev/betcode/agent/claude"
	"github.com/betcode-dev/betcode/agent/codex"
	"github.com/betcode-dev/betcode/agent/eventlog"
	"github.com/betcode-dev/betcode/agent/internal/wirecodec"
	"github.com/betcode-dev/betcode/agent/permission"
	"github.com/betcode-dev/betcode/agent/provider"
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
	CodeAgentShuttingDown = "AGENT_SHUTTING_DOWN"
	// CodePermissionNotPending: the permission request or question answered
	// is not open (any more).
	CodePermissionNotPending = "PERMISSION_NOT_PENDING"
)

const (
	metaAllowedTools   = "betcode.allowed_tools"
	metaPlanMode       = "betcode.plan_mode"
	metaPermissionMode = "betcode.permission_mode"
	metaStartKey       = "betcode.start_key" // StartSession's idempotency key
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
	pending   []*published // sequenced, appended, not yet committed
	committed uint64       // last committed and published sequence
	subs      map[*subscriber]struct{}
	// Turns sent to the CLI and turns whose TurnComplete was published: the
	// session is busy while they differ.
	sentTurns, doneTurns int
	resetAt              uint64 // publishing this sequence settles every turn (crash)
	proc                 provider.Conversation
	perms                map[string]*pending // open can_use_tool requests by request id
	eng                  *permission.Engine  // agent rules + this session's grants
	engBase              *permission.Engine  // the agent rules eng was built from
	grants               []permission.Rule   // this session's ALLOW_SESSION grants
	cancelRequested      bool
	// bgSubagents are the Agent-tool subagents the CLI runs in the
	// background (by tool_use_id): after its turn ended the CLI is still
	// at work, so the pool does not stop it as idle (steer.go).
	bgSubagents   map[string]struct{}
	stopping      bool   // the agent is stopping the CLI to shut down
	lockHolder    string // client id holding the input lock ("" = free)
	crashes       int    // consecutive crashes of the CLI
	lastCrash     time.Time
	lastUsed      time.Time     // for choosing an idle CLI to stop when the pool is full
	contextTokens uint64        // input + cache-read tokens of the last turn
	readerDone    chan struct{} // closed when the running CLI's reader ends
	// tcWeight: how many user messages a TurnComplete settles, when more
	// than one (the CLI merges messages queued during a turn into one).
	tcWeight    map[*pb.AgentEvent]int
	lastCompact *compactMeta // figures of Claude's last /compact
	turns       turnTrace    // open turn spans (trace.go); under mu

	compactMu sync.Mutex // one compaction at a time

	// trMu guards the translator: the reader goroutine translates, answer
	// paths adjust its status.
	trMu sync.Mutex
	// ctr translates the running Codex conversation's events (nil for
	// Claude); under trMu.
	ctr *codex.Translator

	idemMu sync.Mutex // serialises SendOnce

	// saveMu serialises writes of the metadata row; each copies the
	// metadata under it, so the last write holds the latest state.
	saveMu sync.Mutex
	// deleted is set (under emitMu and mu) when Delete begins: the session
	// then takes no message, emits nothing and saves nothing.
	deleted atomic.Bool
	// status is the last AgentStatus published (under mu).
	status pb.AgentStatus
	// feedFrom: events up to this sequence are not announced to watchers
	// (an adopted transcript's imported events); under mu.
	feedFrom uint64
}

func newSession(m *Manager, meta eventlog.Session, lastSeq uint64) *Session {
	return &Session{
		m: m, id: meta.ID, meta: meta, seq: lastSeq, committed: lastSeq,
		tr: bridge.New(m.cfg.Now), subs: map[*subscriber]struct{}{}, perms: map[string]*pending{},
		eng: m.Permissions(), // engBase nil: engine() builds it on first use
	}
}

// ID returns the session id (also the Claude Code session id).
func (s *Session) ID() string { return s.id }

// Meta returns a snapshot of the session's metadata with its live status.
func (s *Session) Meta() eventlog.Session {
	s.mu.Lock()
	defer s.mu.Unlock()
	meta := s.meta
	meta.Metadata = maps.Clone(s.meta.Metadata) // written under s.mu
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
// once committed, with the encoding written to the log (see StreamEncoded).
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
	if s.deleted.Load() {
		return
	}
	now := s.m.cfg.Now()
	records := make([]eventlog.Event, 0, len(evs))
	pubs := make([]published, len(evs))
	recOf := make([]int, len(evs)) // evs[i]'s index in records, -1 if none
	for i, ev := range evs {
		recOf[i] = -1
		s.seq++
		ev.Sequence = s.seq
		ev.Timestamp = timestamppb.New(now)
		pubs[i].ev = ev
		payload, err := proto.Marshal(ev)
		if err != nil {
			s.m.cfg.Logger.Error("session: marshal event", "session_id", s.id, "err", err)
			continue // no wire: each stream marshals ev
		}
		// The log's payload is also what subscribers' streams send: one
		// marshal per event, not one per subscriber.
		pubs[i].wire = wirecodec.NewWire(payload)
		recOf[i] = len(records)
		records = append(records, eventlog.Event{SessionID: s.id, Seq: ev.Sequence, Time: now, Kind: Kind(ev), Payload: payload})
	}
	s.mu.Lock()
	// The event that settles the last open turn records the session idle
	// in its own transaction (a UserInputEvent records it active).
	done := s.doneTurns
	for _, p := range s.pending {
		done += s.settles(p.ev)
	}
	for i := range pubs {
		s.pending = append(s.pending, &pubs[i])
		done += s.settles(pubs[i].ev)
		idle := pubs[i].ev.GetTurnComplete() != nil && done >= s.sentTurns
		if settle && i == len(pubs)-1 {
			idle = true
		}
		if idle && recOf[i] >= 0 {
			records[recOf[i]].Status = StatusIdle
		}
	}
	for _, ev := range evs {
		if tc := ev.GetTurnComplete(); tc != nil {
			s.meta.LastStopReason = tc.StopReason
		}
	}
	if settle {
		s.resetAt = s.seq
	}
	s.mu.Unlock()
	// Appends are not cancelled with the caller's context: an event that got
	// a sequence must reach the log, or later ones would leave a gap.
	ctx = context.WithoutCancel(ctx)
	for _, r := range records {
		if err := s.m.log.Append(ctx, r); err != nil {
			s.m.cfg.Logger.Error("session: persist event", "session_id", s.id, "seq", r.Seq, "err", err)
		}
	}
}

// announceStart tells clients how a provider's reader started: a
// restart after a crash (what, with the count) or a resumed conversation.
func (s *Session) announceStart(ctx context.Context, what string, restart int, resumed bool) {
	if restart > 0 {
		s.emitStatus(ctx, nil, pb.AgentStatus_THINKING, fmt.Sprintf("%s after a crash (restart %d of %d)", what, restart, s.m.cfg.MaxRestarts))
	}
	if resumed {
		s.mu.Lock()
		info := s.info(true)
		s.mu.Unlock()
		s.emit(ctx, &pb.AgentEvent{Event: &pb.AgentEvent_SessionInfo{SessionInfo: info}})
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
	case *pb.AgentEvent_UserInput:
		return "user_input"
	case *pb.AgentEvent_SubagentTask:
		return "subagent_task"
	}
	return "unknown"
}

// publishUpTo hands committed events to subscribers. It runs on the log's
// writer goroutine and never blocks.
func (s *Session) publishUpTo(seq uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for n < len(s.pending) && s.pending[n].ev.Sequence <= seq {
		p := s.pending[n]
		ev := p.ev
		n++
		s.committed = ev.Sequence
		done := s.doneTurns
		if w := s.settles(ev); w > 0 {
			delete(s.tcWeight, ev)
			s.doneTurns = min(s.doneTurns+w, s.sentTurns)
		}
		if ev.Sequence == s.resetAt {
			s.doneTurns = s.sentTurns
		}
		s.traceLocked(ev, s.doneTurns-done)
		if s.doneTurns != done {
			s.m.turnsEnded()
		}
		s.observeLocked(ev)
		for sub := range s.subs {
			if sub.offer(p) {
				s.m.cfg.Metrics.cut()
			}
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
	// Events emitted but not yet committed (e.g. outside a turn) keep the
	// session "busy" until they are published.
	return s.committed, s.sentTurns == s.doneTurns && len(s.pending) == 0
}

// Busy reports whether a turn is running (or queued).
func (s *Session) Busy() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sentTurns != s.doneTurns
}

// SendUser sends a user message, starting the CLI (with --resume when the
// session has history) if it is not running.
func (s *Session) SendUser(ctx context.Context, text string, attachments []*pb.Attachment) error {
	return s.Send(ctx, Message{Text: text, Attachments: attachments})
}

// SendUserAs is SendUser for a client: it fails with *NoInputLockError when
// another client holds the session's input lock, and takes the free lock for
// a named client.
func (s *Session) SendUserAs(ctx context.Context, clientID, text string, attachments []*pb.Attachment) error {
	return s.Send(ctx, Message{ClientID: clientID, Text: text, Attachments: attachments})
}

// Send sends a user message (see Message for the lock), starting the CLI
// (with --resume when the session has history) if it is not running. A
// message the CLI took is recorded as a UserInputEvent, sequenced before
// any event of the turn it starts.
func (s *Session) Send(ctx context.Context, msg Message) error {
	_, err := s.send(ctx, msg, nil)
	return err
}

// send is Send; with is written to the session's key/value table in the
// same transaction as msg's UserInputEvent. It reports whether with was
// handed to the log that way (false for a message that is not recorded).
func (s *Session) send(ctx context.Context, msg Message, with *eventlog.KV) (bool, error) {
	content, err := s.m.messageContent(msg.Text, msg.Attachments)
	if err != nil {
		return false, err
	}
	if s.m.Draining() {
		return false, ErrDraining
	}
	if err := s.checkLock(msg.ClientID); err != nil {
		return false, err
	}
	if err := s.waitRestartBackoff(ctx); err != nil {
		return false, err
	}
	// emitMu is held until the UserInputEvent is sequenced and appended,
	// so that nothing the CLI answers can be sequenced before it.
	s.emitMu.Lock()
	defer s.emitMu.Unlock()
	rec, err := s.sendLocked(ctx, msg, content)
	if err != nil {
		return false, err
	}
	if rec.Seq != 0 {
		rec.With = with
		rec.Status = StatusActive
		s.appendRecord(ctx, rec)
	}
	// Persist the new status off the caller's path; a failure is logged.
	go s.saveMeta(context.WithoutCancel(ctx))
	return rec.Seq != 0, nil
}

// sendLocked hands content to the CLI, starting it if needed, and returns
// the sequenced record of msg's UserInputEvent (none for an internal
// prompt) for the caller to append. s.emitMu is held; it takes s.mu.
func (s *Session) sendLocked(ctx context.Context, msg Message, content claude.UserContent) (eventlog.Event, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	clientID := msg.ClientID
	if s.lockHolder != "" && s.lockHolder != clientID {
		return eventlog.Event{}, &NoInputLockError{Holder: s.lockHolder}
	}
	// Checked again under mu: a drain that began after the first check
	// either sees this turn in RunningTurns or makes this check refuse it.
	if s.m.Draining() {
		return eventlog.Event{}, ErrDraining
	}
	if s.deleted.Load() {
		return eventlog.Event{}, ErrNotFound
	}
	if s.lockHolder == "" && clientID != "" {
		s.lockHolder = clientID
	}
	if err := s.ensureProcessLocked(ctx); err != nil {
		return eventlog.Event{}, err
	}
	if err := s.proc.SendTurn(provider.Turn{ID: uuid.NewString(), Text: content.Text, Blocks: content.Blocks}); err != nil {
		return eventlog.Event{}, fmt.Errorf("send message to claude: %w", err)
	}
	s.sentTurns++
	s.startTurnSpanLocked(ctx)
	s.lastUsed = s.m.cfg.Now()
	s.cancelRequested = false
	s.meta.Status = StatusActive
	s.meta.UpdatedAt = s.m.cfg.Now()
	if msg.internal {
		return eventlog.Event{}, nil
	}
	s.meta.MessageCount++
	s.meta.LastMessagePreview = preview(msg.Text)
	rec, err := s.sequenceLocked(UserInputEvent(msg))
	if err != nil {
		// The message went to the CLI: it is only not recorded.
		s.m.cfg.Logger.Error("session: marshal event", "session_id", s.id, "err", err)
	}
	return rec, nil
}

// messageContent checks a user message and builds what the CLI is sent.
func (m *Manager) messageContent(text string, attachments []*pb.Attachment) (claude.UserContent, error) {
	if strings.TrimSpace(text) == "" && len(attachments) == 0 {
		return claude.UserContent{}, invalidf("user message is empty")
	}
	if !utf8.ValidString(text) {
		return claude.UserContent{}, invalidf("user message is not valid UTF-8")
	}
	if len(text) > m.cfg.MaxMessageBytes {
		return claude.UserContent{}, invalidf("user message is %d bytes; the limit is %d", len(text), m.cfg.MaxMessageBytes)
	}
	return buildContent(text, attachments, m.cfg.MaxMessageBytes)
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
	if err := s.m.acquireSlot(s); err != nil {
		return err
	}
	s.m.mu.Lock()
	closing := s.m.closing
	if !closing {
		s.m.procs.Add(1)
	}
	s.m.mu.Unlock()
	if closing {
		s.m.releaseSlot()
		return ErrClosed
	}
	prov, err := s.m.cfg.Providers.Lookup(ProviderOf(s.meta))
	if err != nil {
		s.m.procs.Done()
		s.m.releaseSlot()
		return err
	}
	opts := provider.Options{
		SessionID: s.id, Dir: s.meta.WorkingDirectory, Model: s.meta.Model,
		Env: s.m.claudeEnv(s.meta), Config: providerConfig(s.meta), MaxTurns: maxTurns(s.meta),
		Logger: s.m.cfg.Logger.With("session_id", s.id),
	}
	if s.meta.ClaudeStarted {
		switch prov.Kind() {
		case pb.SessionProvider_SESSION_PROVIDER_CLAUDE_CODE:
			opts.ResumeID = s.id
		case pb.SessionProvider_SESSION_PROVIDER_CODEX:
			opts.ResumeID = s.meta.Metadata[metaCodexThread]
		default:
			opts.ResumeID = s.meta.Metadata[metaResumeID]
		}
	}
	if v := s.meta.Metadata[metaAllowedTools]; v != "" {
		opts.AllowedTools = splitList(v)
	}
	if s.meta.Metadata[metaPermissionMode] == PermissionModeAcceptEdits {
		opts.PermissionMode = PermissionModeAcceptEdits
	}
	if s.meta.Metadata[metaPlanMode] == "true" && !s.meta.ClaudeStarted {
		opts.PermissionMode = PermissionModePlan
	}
	p, err := prov.Start(ctx, opts)
	if err != nil {
		s.m.procs.Done()
		s.m.releaseSlot()
		return err
	}
	out, ok := p.(claudeStream)
	cout, codexOK := p.(codexStream)
	sout, streamOK := p.(provider.Stream)
	if !ok && !codexOK && !streamOK {
		// Only these outputs can be read (see claudeStream, codexStream
		// and provider.Stream).
		_ = p.Kill()
		_ = p.Wait()
		s.m.procs.Done()
		s.m.releaseSlot()
		return &provider.NotConfiguredError{Kind: prov.Kind(), Configure: "this agent cannot read its output yet"}
	}
	s.proc = p
	resumed := s.meta.ClaudeStarted
	restart := s.crashes
	s.m.cfg.Metrics.started(restart > 0)
	s.readerDone = make(chan struct{})
	switch {
	case codexOK:
		s.startCodexLocked(ctx, cout, resumed, restart)
		return nil
	case !ok:
		s.startStreamLocked(ctx, sout, resumed, restart)
		return nil
	}
	go s.readLoop(p, out, resumed, restart, s.readerDone)
	return nil
}

// claudeStream is the output side of a Claude Code conversation
// (*claude.Process): the part of the session manager that is not yet
// provider-agnostic. A provider whose Conversation does not implement it
// cannot run sessions until its output is translated here too.
type claudeStream interface {
	Next() (*claude.Envelope, error)
	BadLines() int64
	SendControlError(requestID, msg string) error
}

// readLoop turns the CLI's output into events until it exits.
func (s *Session) readLoop(p provider.Conversation, out claudeStream, resumed bool, restart int, done chan struct{}) {
	defer s.m.procs.Done()
	defer close(done)
	defer s.m.releaseSlot()
	ctx := context.Background()
	log := s.m.cfg.Logger.With("session_id", s.id, "pid", p.Pid())
	var lastOutput atomic.Int64
	lastOutput.Store(time.Now().UnixNano())
	var hung atomic.Bool
	stopWatch := s.watchHang(p, &lastOutput, &hung)
	defer stopWatch()
	s.announceStart(ctx, "Claude restarted with --resume", restart, resumed)
	for {
		env, err := out.Next()
		lastOutput.Store(time.Now().UnixNano())
		if err != nil {
			if !errors.Is(err, io.EOF) {
				log.Warn("session: reading claude output", "err", err)
			}
			break
		}
		s.handle(ctx, p, out, env)
	}
	s.finishReader(ctx, p, log, &hung, "Claude", func() {
		if bad := out.BadLines(); bad > 0 {
			log.Warn("session: claude wrote malformed lines", "bad_lines", bad)
		}
	})
}

// finishReader reaps the provider once its output ended and settles the
// turns it left open: cancelled, interrupted by the shutdown, or crashed.
// name is the provider as users read it ("Claude"); afterWait runs once
// the process was reaped.
func (s *Session) finishReader(ctx context.Context, p provider.Conversation, log *slog.Logger, hung *atomic.Bool, name string, afterWait func()) {
	lname := strings.ToLower(name)
	waitErr := p.Wait()
	s.mu.Lock()
	s.proc = nil
	clear(s.bgSubagents) // they ended with the process
	s.mu.Unlock()
	s.clearPending()
	afterWait()
	if s.deleted.Load() {
		log.Debug("session: "+lname+" stopped for the session's deletion", "err", waitErr)
		return
	}
	if !s.unsettled() {
		log.Debug("session: "+lname+" exited", "err", waitErr)
		return
	}
	s.mu.Lock()
	cancelled := s.cancelRequested
	s.cancelRequested = false
	stopping := s.stopping
	s.mu.Unlock()
	if cancelled {
		// Stopped with SIGINT after an interrupt went unanswered.
		s.endTurns(ctx, bridge.TurnCompleteEvent("cancelled"), bridge.StatusEvent(pb.AgentStatus_IDLE, ""))
		return
	}
	if stopping {
		log.Info("session: turn interrupted by the agent's shutdown", "err", waitErr)
		s.endTurns(ctx, bridge.ErrorEvent(CodeAgentShuttingDown, shutdownMsg, false),
			bridge.TurnCompleteEvent("interrupted"), bridge.StatusEvent(pb.AgentStatus_IDLE, ""))
		return
	}
	msg := fmt.Sprintf("%s process exited mid-turn (%v)", name, exitText(waitErr))
	if hung.Load() {
		msg = fmt.Sprintf("%s produced no output for %s mid-turn and was stopped", name, s.m.cfg.HangTimeout)
	}
	tail := p.Stderr()
	if tail != "" {
		msg += ": " + lastLine(tail)
	}
	log.WarnContext(s.turnContext(ctx), "session: "+lname+" crashed mid-turn", "err", waitErr, "stderr", tail, "hung", hung.Load())
	s.mu.Lock()
	s.crashes++
	s.lastCrash = s.m.cfg.Now()
	s.mu.Unlock()
	s.m.cfg.Metrics.crashed()
	s.emitCrash(ctx, msg)
}

// unsettled reports whether, counting events not yet published, a turn is
// still open.
func (s *Session) unsettled() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	done := s.doneTurns
	for _, p := range s.pending {
		done += s.settles(p.ev)
	}
	return done < s.sentTurns
}

// settles is how many sent turns publishing ev completes: 0 unless it is a
// TurnComplete, which settles its tcWeight (1 by default). s.mu is held.
func (s *Session) settles(ev *pb.AgentEvent) int {
	if ev.GetTurnComplete() == nil {
		return 0
	}
	if n, ok := s.tcWeight[ev]; ok {
		return n
	}
	return 1
}

func (s *Session) emitCrash(ctx context.Context, msg string) {
	s.endTurns(ctx,
		bridge.ErrorEvent(CodeSubprocessCrashed, msg+"; the next message restarts it, resuming its conversation", false),
		bridge.TurnCompleteEvent("crashed"),
		bridge.StatusEvent(pb.AgentStatus_IDLE, ""))
}

// endTurns emits evs (ending with an IDLE status) for a CLI that exited
// mid-turn: publishing them settles every open turn.
func (s *Session) endTurns(ctx context.Context, evs ...*pb.AgentEvent) {
	s.setTranslatorStatus(pb.AgentStatus_IDLE)
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
func (s *Session) handle(ctx context.Context, p provider.Conversation, out claudeStream, env *claude.Envelope) {
	switch env.Type {
	case claude.TypeSystem:
		if env.Subtype == "compact_boundary" {
			s.noteCompactBoundary(env)
		}
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
			_ = out.SendControlError(env.RequestID, "malformed control request")
			return
		}
		if req.Subtype != "can_use_tool" {
			_ = out.SendControlError(env.RequestID, "unsupported control request subtype: "+req.Subtype)
			return
		}
		if !s.canUseTool(ctx, p, env, &req) {
			return // decided by a rule: nothing for the user to see
		}
	case claude.TypeControlCancel:
		s.dropPending(ctx, env.RequestID)
	}
	s.trMu.Lock()
	evs := s.tr.Translate(env)
	s.trMu.Unlock()
	if env.Type == claude.TypeResult {
		n := consumedMessages(env)
		s.mu.Lock()
		s.crashes = 0 // a turn finished: the CLI works
		if n > 1 {
			for _, ev := range evs {
				if ev.GetTurnComplete() != nil {
					if s.tcWeight == nil {
						s.tcWeight = map[*pb.AgentEvent]int{}
					}
					s.tcWeight[ev] = n
				}
			}
		}
		cancelled := s.cancelRequested
		s.cancelRequested = false
		stopping := s.stopping
		s.mu.Unlock()
		evs = endedTurn(evs, cancelled, stopping)
		s.recordResult(evs)
	}
	s.emit(ctx, evs...)
	if env.Type == claude.TypeResult {
		s.saveMeta(ctx)
		s.maybeAutoCompact()
	}
}

// recordResult adds a turn's usage to the session totals.
func (s *Session) recordResult(evs []*pb.AgentEvent) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ev := range evs {
		if u := ev.GetUsage(); u != nil {
			if ctxTokens := uint64(u.InputTokens) + uint64(u.CacheReadTokens) + uint64(u.CacheCreationTokens); ctxTokens > 0 {
				s.contextTokens = ctxTokens
			}
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
	if err := s.persist(ctx); err != nil {
		s.m.cfg.Logger.Error("session: save", "session_id", s.id, "err", err)
	}
}

// persist writes the session's metadata row but its status, which the
// events that start and end turns carry in their own commits (see
// emitEvents): a row written here from a state a moment old cannot undo
// them. A deleted session's row is not written (nor brought back).
func (s *Session) persist(ctx context.Context) error {
	s.saveMu.Lock()
	defer s.saveMu.Unlock()
	if s.deleted.Load() {
		return nil
	}
	s.mu.Lock()
	meta := s.meta
	// The map is written under s.mu (SetMetadata, a provider's resume id):
	// the write below reads a copy.
	meta.Metadata = maps.Clone(s.meta.Metadata)
	s.mu.Unlock()
	return s.m.log.UpdateSession(context.WithoutCancel(ctx), meta)
}

// Cancel interrupts the running turn; it reports whether one was running.
// The turn ends with TurnComplete{stop_reason: "cancelled"}.
func (s *Session) Cancel(ctx context.Context) (bool, error) {
	s.mu.Lock()
	busy := s.sentTurns != s.doneTurns
	p := s.proc
	target := s.sentTurns
	if busy {
		s.cancelRequested = true
	}
	s.mu.Unlock()
	if !busy || p == nil {
		return false, nil
	}
	if err := p.InterruptTurn(); err != nil {
		return true, fmt.Errorf("interrupt claude: %w", err)
	}
	// If the CLI does not end the turn, SIGINT ends the process (it exits
	// within ~0.3 s); the turn then completes as cancelled.
	time.AfterFunc(s.m.cfg.CancelGrace, func() {
		s.mu.Lock()
		stuck := s.proc == p && s.doneTurns < target && s.cancelRequested
		s.mu.Unlock()
		if stuck {
			s.m.cfg.Logger.Warn("session: interrupt unanswered; sending SIGINT", "session_id", s.id)
			_ = p.ForceInterrupt()
		}
	})
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

// SendUserOnce is SendUser made idempotent on key (see SendOnce).
func (s *Session) SendUserOnce(ctx context.Context, key, text string, attachments []*pb.Attachment) (dup bool, err error) {
	return s.SendOnce(ctx, key, Message{Text: text, Attachments: attachments})
}

// SendOnce is Send made idempotent on key: a message whose key was
// taken before is not sent again and dup is true. The key is committed in
// the same transaction as the message's UserInputEvent, before SendOnce
// returns: a crash leaves both or neither, so a retry after it neither
// loses the message nor repeats it. (A crash after the CLI took the message
// and before the commit leaves neither: the retry sends it again, and the
// log holds it once.)
func (s *Session) SendOnce(ctx context.Context, key string, msg Message) (dup bool, err error) {
	if key == "" {
		return false, s.Send(ctx, msg)
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
	entry := eventlog.KV{Key: idemPrefix + key, Value: []byte(s.m.cfg.Now().UTC().Format(time.RFC3339Nano))}
	withEvent, err := s.send(ctx, msg, &entry)
	if err != nil {
		return false, err
	}
	// Committed before idemMu is released: the next call with this key
	// reads it.
	if withEvent {
		err = s.m.log.Flush(context.WithoutCancel(ctx))
	} else {
		err = s.m.log.PutKV(context.WithoutCancel(ctx), s.id, entry.Key, entry.Value)
	}
	if err != nil {
		return false, fmt.Errorf("record idempotency key: %w", err)
	}
	return false, nil
}

const idemPrefix = "idem/"

// consumedMessages is how many user messages a result line settles: the
// CLI runs messages queued during a turn together as one turn and lists
// them in user_message_uuids.
func consumedMessages(env *claude.Envelope) int {
	var r struct {
		UUIDs []string `json:"user_message_uuids"`
	}
	if json.Unmarshal(env.Raw, &r) != nil || len(r.UUIDs) == 0 {
		return 1
	}
	return len(r.UUIDs)
}
