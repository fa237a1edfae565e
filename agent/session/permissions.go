package session

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/betcode-dev/betcode/agent/bridge"
	"github.com/betcode-dev/betcode/agent/claude"
	"github.com/betcode-dev/betcode/agent/permission"
	"github.com/betcode-dev/betcode/agent/provider"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// CodePermissionTimeout is the ErrorEvent code of a request nobody answered.
const CodePermissionTimeout = "PERMISSION_TIMEOUT"

// pending is an open can_use_tool request.
type pending struct {
	tool      string
	input     json.RawMessage
	toolUseID string
	question  bool // AskUserQuestion: answered with UserQuestionResponse
	timer     *time.Timer
	timeout   time.Duration // the timeout timer's, for its message
	// events are the published events that asked (one PermissionRequest,
	// or the UserQuestions of one AskUserQuestion); none until published.
	events []*pb.AgentEvent
}

// LogEntry is one permission decision, as stored in the session's log.
type LogEntry struct {
	RequestID string          `json:"request_id"`
	Tool      string          `json:"tool"`
	Input     json.RawMessage `json:"input,omitempty"`
	Decision  string          `json:"decision"` // allow | deny
	Source    string          `json:"source"`   // rule | session_grant | mode | user | timeout | cancelled
	Rule      string          `json:"rule,omitempty"`
	Reason    string          `json:"reason,omitempty"`
	// UpdatedInput is the input the user edited the request to run with.
	UpdatedInput json.RawMessage `json:"updated_input,omitempty"`
	At           time.Time       `json:"at"`
}

const (
	permLogPrefix = "permlog/"
	grantPrefix   = "grant/"
)

// engine returns the session's permission engine: the agent's rules plus
// the session's grants, rebuilt when the agent's rules have changed.
func (s *Session) engine() *permission.Engine {
	base := s.m.Permissions()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.engBase != base {
		eng, err := base.With(s.grants...)
		if err != nil { // grants were valid rules when added
			s.m.cfg.Logger.Warn("session: rebuilding permission rules", "session_id", s.id, "err", err)
			return s.eng
		}
		s.eng, s.engBase = eng, base
	}
	return s.eng
}

// loadGrants reads persisted ALLOW_SESSION grants and builds the engine.
func (s *Session) loadGrants(ctx context.Context) error {
	kv, err := s.m.log.GetKV(ctx, s.id, grantPrefix)
	if err != nil {
		return fmt.Errorf("load grants: %w", err)
	}
	keys := slices.Sorted(maps.Keys(kv))
	var grants []permission.Rule
	for _, k := range keys {
		r, err := permission.ParseRule(string(kv[k]), permission.Allow)
		if err != nil {
			s.m.cfg.Logger.Warn("session: skipping unreadable grant", "session_id", s.id, "grant", string(kv[k]), "err", err)
			continue
		}
		r.Source = "session-grant"
		grants = append(grants, r)
	}
	base := s.m.Permissions()
	eng, err := base.With(grants...)
	if err != nil {
		return fmt.Errorf("build permission engine: %w", err)
	}
	s.mu.Lock()
	s.eng, s.engBase, s.grants = eng, base, grants
	s.mu.Unlock()
	return nil
}

// canUseTool decides a can_use_tool request by rule, or records it as open.
// It reports whether the user must be asked (false when a rule decided).
func (s *Session) canUseTool(ctx context.Context, p provider.Conversation, env *claude.Envelope, req *claude.ControlRequest) (ask bool) {
	return s.decideTool(ctx, p, env.RequestID, req.ToolName, req.Input, req.ToolUseID)
}

// decideTool decides a provider's request to run tool with input by rule,
// or records it as open under requestID. It reports whether the user must
// be asked (false when a rule decided).
func (s *Session) decideTool(ctx context.Context, p provider.Conversation, requestID, tool string, toolInput json.RawMessage, toolUseID string) (ask bool) {
	pend := &pending{tool: tool, input: toolInput, toolUseID: toolUseID, question: tool == "AskUserQuestion"}
	if !pend.question {
		var input map[string]any
		_ = json.Unmarshal(toolInput, &input)
		d := s.engine().Decide(permission.Request{Tool: tool, Input: input, Cwd: s.meta.WorkingDirectory})
		if d.Behavior != permission.Ask && d.Rule != nil {
			source := "rule"
			if d.Rule.Source == "session-grant" {
				source = "session_grant"
			}
			entry := LogEntry{RequestID: requestID, Tool: tool, Input: toolInput, Source: source, Rule: d.Rule.String() + " (" + d.Rule.Source + ")", Reason: d.Reason}
			if d.Behavior == permission.Allow {
				entry.Decision = "allow"
				_ = p.Answer(requestID, allowAnswer(toolInput))
			} else {
				entry.Decision = "deny"
				entry.Reason = "denied by rule " + d.Rule.String()
				_ = p.Answer(requestID, provider.Answer{Decision: provider.Deny, Message: "Denied by the BetCode permission rule " + d.Rule.String() + "."})
			}
			s.m.cfg.Logger.Info("session: permission decided by rule", "session_id", s.id, "tool", tool, "decision", entry.Decision, "rule", entry.Rule)
			s.logDecision(ctx, entry)
			return false
		}
	}
	if !pend.question && s.permissionMode() == PermissionModeBypass {
		// The session's mode allows what no rule decided (rules that deny
		// still deny): nobody is asked.
		_ = p.Answer(requestID, allowAnswer(toolInput))
		s.logDecision(ctx, LogEntry{RequestID: requestID, Tool: tool, Input: toolInput, Decision: "allow",
			Source: "mode", Rule: "permission mode " + PermissionModeBypass, Reason: "allowed by the session's permission mode"})
		return false
	}
	if !pend.question {
		s.m.cfg.Metrics.decided("ask", "rule")
	}
	s.mu.Lock()
	s.perms[requestID] = pend
	if t := s.m.PermissionTimeout(); t > 0 {
		id := requestID
		pend.timer, pend.timeout = time.AfterFunc(t, func() { s.expire(id, p) }), t
	}
	s.mu.Unlock()
	return true
}

func allowAnswer(input json.RawMessage) provider.Answer {
	return provider.Answer{Decision: provider.Allow, Input: input}
}

// expire denies a request nobody answered in time.
func (s *Session) expire(requestID string, p provider.Conversation) {
	pend := s.takePending(requestID)
	if pend == nil {
		return
	}
	t := pend.timeout
	msg := fmt.Sprintf("No answer within %s; the request was denied.", t)
	_ = p.Answer(requestID, provider.Answer{Decision: provider.Deny, Message: msg})
	ctx := context.Background()
	ev := bridge.ErrorEvent(CodePermissionTimeout, fmt.Sprintf("Permission request for %s timed out after %s and was denied", pend.tool, t), false)
	ev.GetError().Details = map[string]string{"request_id": requestID, "session_id": s.id}
	s.emitStatus(ctx, ev, pb.AgentStatus_THINKING, "")
	s.logDecision(ctx, LogEntry{RequestID: requestID, Tool: pend.tool, Input: pend.input, Decision: "deny", Source: "timeout", Reason: msg})
}

func (s *Session) takePending(id string) *pending {
	s.mu.Lock()
	defer s.mu.Unlock()
	pend := s.perms[id]
	if pend == nil {
		return nil
	}
	delete(s.perms, id)
	if pend.timer != nil {
		pend.timer.Stop()
	}
	if len(pend.events) > 0 {
		s.publishLocked(nil) // the prompt left the pending list
	}
	return pend
}

// dropPending forgets requests the CLI withdrew (control_cancel_request).
func (s *Session) dropPending(ctx context.Context, id string) {
	s.withdrawPending(ctx, id, "withdrawn by Claude (turn interrupted)")
}

// withdrawPending forgets a request the provider withdrew, logging reason.
func (s *Session) withdrawPending(ctx context.Context, id, reason string) {
	if pend := s.takePending(id); pend != nil {
		s.logDecision(ctx, LogEntry{RequestID: id, Tool: pend.tool, Input: pend.input, Decision: "deny", Source: "cancelled", Reason: reason})
	}
}

// clearPending forgets every open request (the CLI exited).
func (s *Session) clearPending() {
	s.mu.Lock()
	defer s.mu.Unlock()
	announced := false
	for id, p := range s.perms {
		if p.timer != nil {
			p.timer.Stop()
		}
		announced = announced || len(p.events) > 0
		delete(s.perms, id)
	}
	if announced {
		s.publishLocked(nil)
	}
}

// emitStatus emits ev (if any) and a status change, keeping the
// translator's idea of the status in step.
func (s *Session) emitStatus(ctx context.Context, ev *pb.AgentEvent, st pb.AgentStatus, msg string) {
	s.setTranslatorStatus(st)
	status := bridge.StatusEvent(st, msg)
	if ev == nil {
		s.emit(ctx, status)
		return
	}
	s.emit(ctx, ev, status)
}

func (s *Session) logDecision(ctx context.Context, e LogEntry) {
	s.m.cfg.Metrics.decided(e.Decision, e.Source)
	if e.At.IsZero() {
		e.At = s.m.cfg.Now()
	}
	b, _ := json.Marshal(e)
	key := fmt.Sprintf("%s%020d", permLogPrefix, e.At.UnixNano())
	if err := s.m.log.PutKV(context.WithoutCancel(ctx), s.id, key, b); err != nil {
		s.m.cfg.Logger.Error("session: write permission log", "session_id", s.id, "err", err)
	}
}

// PermissionLog returns the session's decisions, oldest first.
func (s *Session) PermissionLog(ctx context.Context, limit int) ([]*pb.PermissionLogEntry, error) {
	kv, err := s.m.log.GetKV(ctx, s.id, permLogPrefix)
	if err != nil {
		return nil, fmt.Errorf("read permission log: %w", err)
	}
	keys := slices.Sorted(maps.Keys(kv))
	if limit > 0 && len(keys) > limit {
		keys = keys[len(keys)-limit:]
	}
	out := make([]*pb.PermissionLogEntry, 0, len(keys))
	for _, k := range keys {
		var e LogEntry
		if json.Unmarshal(kv[k], &e) != nil {
			continue
		}
		out = append(out, &pb.PermissionLogEntry{
			RequestId: e.RequestID, ToolName: e.Tool, Input: bridge.ToStruct(e.Input), Decision: e.Decision,
			Source: e.Source, Rule: e.Rule, Reason: e.Reason, DecidedAt: timestamppb.New(e.At),
		})
	}
	return out, nil
}

// AnswerPermission answers an open can_use_tool request. ALLOW_SESSION also
// grants the same tool and pattern for the rest of the session (persisted).
func (s *Session) AnswerPermission(ctx context.Context, requestID string, decision pb.PermissionDecision, reason string) error {
	return s.Respond(ctx, &pb.PermissionResponse{RequestId: requestID, Decision: decision, Reason: reason})
}

// Respond answers an open can_use_tool request as AnswerPermission does.
// An allow with updated_input runs the tool with that input (Claude Code's
// updatedInput) instead of the one Claude proposed; a deny ignores it. A
// request that is no longer open (answered, timed out, withdrawn, or its
// CLI gone) fails with ErrStale.
func (s *Session) Respond(ctx context.Context, r *pb.PermissionResponse) error {
	requestID, decision, reason := r.GetRequestId(), r.GetDecision(), r.GetReason()
	if requestID == "" {
		return invalidf("permission response needs a request_id")
	}
	switch decision {
	case pb.PermissionDecision_ALLOW_ONCE, pb.PermissionDecision_ALLOW_SESSION, pb.PermissionDecision_DENY:
	default:
		return invalidf("permission decision must be ALLOW_ONCE, ALLOW_SESSION or DENY")
	}
	var updated json.RawMessage
	if u := r.GetUpdatedInput(); u != nil && decision != pb.PermissionDecision_DENY {
		b, err := json.Marshal(u.AsMap())
		if err != nil {
			return invalidf("updated_input cannot be encoded as JSON: %v", err)
		}
		updated = b
	}
	s.mu.Lock()
	pend := s.perms[requestID]
	p := s.proc
	s.mu.Unlock()
	if pend == nil || p == nil || pend.question {
		if pend != nil && pend.question {
			return invalidf("request %s is a question: answer it with a UserQuestionResponse", requestID)
		}
		return ErrStale
	}
	if s.takePending(requestID) == nil {
		return ErrStale
	}
	entry := LogEntry{RequestID: requestID, Tool: pend.tool, Input: pend.input, Source: "user"}
	if decision == pb.PermissionDecision_DENY {
		msg := strings.TrimSpace(reason)
		if msg == "" {
			msg = "The user denied this tool call."
		} else {
			msg = "The user denied this tool call: " + msg
		}
		entry.Decision, entry.Reason = "deny", msg
		if err := p.Answer(requestID, provider.Answer{Decision: provider.Deny, Message: msg}); err != nil {
			return fmt.Errorf("answer claude: %w", err)
		}
		s.logDecision(ctx, entry)
		s.emitStatus(ctx, nil, pb.AgentStatus_THINKING, "")
		return nil
	}
	entry.Decision = "allow"
	run := pend.input
	if updated != nil {
		// What the user approved is what runs, and what a session grant
		// is made of.
		run, entry.UpdatedInput, entry.Reason = updated, updated, "ran with the input edited by the user"
		s.m.cfg.Logger.Info("session: permission allowed with edited input", "session_id", s.id,
			"request_id", requestID, "tool", pend.tool, "input", string(pend.input), "updated_input", string(updated))
	}
	answer := allowAnswer(run)
	if decision == pb.PermissionDecision_ALLOW_SESSION {
		answer.Decision = provider.AllowForSession
		var input map[string]any
		_ = json.Unmarshal(run, &input)
		g := permission.GrantFor(pend.tool, input)
		entry.Rule = g.String()
		entry.Reason = strings.TrimPrefix(entry.Reason+"; allowed for the rest of the session", "; ")
		if err := s.addGrant(ctx, g); err != nil {
			return err
		}
	}
	if err := p.Answer(requestID, answer); err != nil {
		return fmt.Errorf("answer claude: %w", err)
	}
	s.logDecision(ctx, entry)
	s.emitStatus(ctx, nil, pb.AgentStatus_EXECUTING_TOOL, pend.tool)
	return nil
}

func (s *Session) addGrant(ctx context.Context, g permission.Rule) error {
	key := fmt.Sprintf("%s%020d", grantPrefix, s.m.cfg.Now().UnixNano())
	if err := s.m.log.PutKV(context.WithoutCancel(ctx), s.id, key, []byte(g.String())); err != nil {
		return fmt.Errorf("save grant: %w", err)
	}
	g.Source = "session-grant"
	s.mu.Lock()
	defer s.mu.Unlock()
	eng, err := s.eng.With(g)
	if err != nil {
		return fmt.Errorf("add grant %s: %w", g.String(), err)
	}
	s.eng = eng
	s.grants = append(s.grants, g)
	return nil
}

// AnswerQuestion answers an AskUserQuestion request: answers maps each
// question's text to the chosen label(s) (several joined with ", ") or free
// text.
func (s *Session) AnswerQuestion(ctx context.Context, questionID string, answers map[string]string) error {
	s.mu.Lock()
	pend := s.perms[questionID]
	p := s.proc
	s.mu.Unlock()
	if pend == nil || p == nil || !pend.question {
		return ErrStale
	}
	if len(answers) == 0 {
		return invalidf("answers is empty: map each question's text to an answer")
	}
	var input map[string]any
	if err := json.Unmarshal(pend.input, &input); err != nil {
		return fmt.Errorf("question input: %w", err)
	}
	known := map[string]bool{}
	if qs, ok := input["questions"].([]any); ok {
		for _, q := range qs {
			if m, ok := q.(map[string]any); ok {
				if t, ok := m["question"].(string); ok {
					known[t] = true
				}
			}
		}
	}
	for q := range answers {
		if !known[q] {
			return invalidf("answers names %q, which is not one of the questions asked", q)
		}
	}
	if s.takePending(questionID) == nil {
		return ErrStale
	}
	input["answers"] = answers
	answered, err := json.Marshal(input)
	if err != nil {
		return fmt.Errorf("encode answers: %w", err)
	}
	if err := p.Answer(questionID, provider.Answer{Decision: provider.Allow, Input: answered}); err != nil {
		return fmt.Errorf("answer claude: %w", err)
	}
	s.logDecision(ctx, LogEntry{RequestID: questionID, Tool: pend.tool, Input: pend.input, Decision: "allow", Source: "user", Reason: "answered"})
	s.emitStatus(ctx, nil, pb.AgentStatus_THINKING, "")
	return nil
}

// Claude Code permission modes a session can start in (StartSession).
const (
	PermissionModeDefault     = "default"
	PermissionModeAcceptEdits = "acceptEdits"
	PermissionModePlan        = "plan"
	PermissionModeBypass      = "bypassPermissions"
)

// permissionMode returns the session's permission mode ("" for default).
func (s *Session) permissionMode() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.meta.Metadata[metaPermissionMode]
}
