package subagent

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/betcode-dev/betcode/agent/server"
	"github.com/betcode-dev/betcode/agent/session"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// Metadata keys a subagent's session carries.
const (
	metaPrefix        = "betcode.subagent."
	MetaParent        = metaPrefix + "parent_session_id"
	MetaID            = metaPrefix + "id"
	MetaOrchestration = metaPrefix + "orchestration_id"
	MetaStep          = metaPrefix + "step_id"
	MetaName          = metaPrefix + "name"
	MetaStatus        = metaPrefix + "status" // final status, e.g. "completed"
	MetaError         = metaPrefix + "error"
	metaClientPrefix  = metaPrefix + "meta." // SubagentSpec.metadata
)

// subagent is one subagent: a session running one prompt.
type subagent struct {
	id, parent, name, model, worktree, orch, step string
	created                                       time.Time
	// autoApprove: permission requests (for tools other than the allowed
	// ones, which run without one) are denied rather than asked.
	autoApprove bool
	sess        *session.Session
	now         func() time.Time

	mu         sync.Mutex
	status     pb.SubagentStatus
	started    time.Time
	finished   time.Time
	text       strings.Builder // the turn's assistant text
	result     string
	errMsg     string
	stopReason string
	usage      pb.UsageReport
	cancelled  bool
	changes    []*pb.SubagentStatusChange
	changed    chan struct{} // closed and replaced on every change
	done       chan struct{} // closed at the terminal status
}

// checkSpec refuses a spec the service cannot run; what names the step.
func checkSpec(spec *pb.SubagentSpec, what string) error {
	prefix := ""
	if what != "" {
		prefix = what + ": "
	}
	switch {
	case strings.TrimSpace(spec.GetPrompt()) == "":
		return fail(codes.InvalidArgument, server.CodeInvalidArgument, "%sspec.prompt is required", prefix)
	case spec.GetAutoApprove() && len(spec.GetAllowedTools()) == 0:
		return fail(codes.InvalidArgument, CodeInvalidPermissionConfig, "%sauto_approve requires allowed_tools", prefix)
	case spec.GetCreateWorktree():
		return fail(codes.InvalidArgument, server.CodeInvalidArgument, "%screate_worktree is not supported yet: create one with WorktreeService.CreateWorktree and pass its worktree_id", prefix)
	case spec.GetWorktreeId() != "" && spec.GetWorkingDirectory() != "":
		return fail(codes.InvalidArgument, server.CodeInvalidArgument, "%sgive worktree_id or working_directory, not both", prefix)
	}
	return nil
}

func stepName(i int, id string) string {
	if id == "" {
		return fmt.Sprintf("step %d", i+1)
	}
	return "step " + id
}

// spawn creates a subagent's session under parentID and sends it prompt.
// With limit, the parent's MaxPerParent is enforced. Errors are statuses;
// a session that was created but could not take the prompt gives a FAILED
// subagent, not an error.
func (s *Service) spawn(ctx context.Context, parentID string, spec *pb.SubagentSpec, prompt, orch, step string, limit bool) (*subagent, error) {
	parent, err := s.m.Get(ctx, parentID)
	if err != nil {
		return nil, sessionStatus(err, "parent session")
	}
	pm := parent.Meta()
	dir, model, wt := spec.GetWorkingDirectory(), spec.GetModel(), spec.GetWorktreeId()
	if dir == "" && wt == "" {
		dir = pm.WorkingDirectory
	}
	if model == "" {
		model = pm.Model
	}
	name := spec.GetName()
	if name == "" {
		name = step
	}
	if name == "" {
		name = "subagent"
	}
	sa := &subagent{id: uuid.NewString(), parent: parentID, name: name, model: model, worktree: wt, orch: orch, step: step,
		autoApprove: spec.GetAutoApprove(), created: s.opt.Now(), now: s.opt.Now, changed: make(chan struct{}), done: make(chan struct{})}
	if err := s.reserve(sa, limit); err != nil {
		return nil, err
	}
	md := map[string]string{MetaParent: parentID, MetaID: sa.id, MetaName: name, MetaOrchestration: orch, MetaStep: step}
	for k, v := range spec.GetMetadata() {
		md[metaClientPrefix+k] = v
	}
	for k, v := range md {
		if v == "" {
			delete(md, k)
		}
	}
	config, env := parent.ProviderConfig()
	sess, err := s.m.Create(ctx, session.CreateRequest{
		WorkingDirectory: dir, Model: model, WorktreeID: wt, AllowedTools: spec.GetAllowedTools(),
		Metadata: md, Name: truncate("subagent "+name, session.MaxNameRunes), CreatedBy: callUser(ctx),
		Provider: parent.Provider(), Env: env, ProviderConfig: config,
	})
	if err != nil {
		s.release(sa)
		return nil, sessionStatus(err, "create subagent session")
	}
	sa.sess = sess
	sa.setStatus(pb.SubagentStatus_SUBAGENT_STATUS_PENDING, "session "+sess.ID()+" created")
	s.register(sa)
	log := s.opt.Logger.With("subagent_id", sa.id, "session_id", sess.ID(), "parent_session_id", parentID)
	from := sess.LastSeq()
	if err := sess.Send(ctx, session.Message{Text: prompt, SentBy: callUser(ctx)}); err != nil {
		log.Warn("subagent: could not start", "err", err)
		s.end(sa, pb.SubagentStatus_SUBAGENT_STATUS_FAILED, "could not start: "+err.Error())
		return sa, nil
	}
	sa.mu.Lock()
	sa.started = s.opt.Now()
	sa.mu.Unlock()
	sa.setStatus(pb.SubagentStatus_SUBAGENT_STATUS_RUNNING, "prompt sent")
	log.Info("subagent: started", "orchestration_id", orch, "step_id", step)
	if !s.start(func() { s.follow(sa, from) }) {
		s.end(sa, pb.SubagentStatus_SUBAGENT_STATUS_CANCELLED, "the agent is shutting down")
	}
	return sa, nil
}

// reserve checks the parent's limit and takes the subagent's worktree.
func (s *Service) reserve(sa *subagent, limit bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ctx.Err() != nil {
		return sessionStatus(session.ErrClosed, "spawn subagent")
	}
	if limit {
		n := 0
		for _, o := range s.order {
			if o.parent == sa.parent && !o.isTerminal() {
				n++
			}
		}
		if n >= s.opt.MaxPerParent {
			return fail(codes.ResourceExhausted, CodeSubagentLimit, "session %s already has %d unfinished subagents (the limit)", sa.parent, n)
		}
	}
	if sa.worktree != "" {
		if holder := s.worktrees[sa.worktree]; holder != "" {
			return fail(codes.ResourceExhausted, CodeWorktreeInUse, "worktree %s is in use by subagent %s", sa.worktree, holder)
		}
		s.worktrees[sa.worktree] = sa.id
	}
	// Counted from now: the goroutine that follows it is started later.
	return nil
}

// release frees the subagent's worktree.
func (s *Service) release(sa *subagent) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sa.worktree != "" && s.worktrees[sa.worktree] == sa.id {
		delete(s.worktrees, sa.worktree)
	}
}

func (s *Service) register(sa *subagent) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.subagents[sa.id] = sa
	s.order = append(s.order, sa)
}

// follow reads the subagent's turn until it ended and records the outcome.
func (s *Service) follow(sa *subagent, from uint64) {
	err := sa.sess.Stream(s.ctx, session.StreamOptions{From: from, UntilIdle: true}, func(ev *pb.AgentEvent) error {
		sa.observe(ev)
		if pr := ev.GetPermissionRequest(); pr != nil && sa.autoApprove {
			s.deny(sa, pr)
		}
		return nil
	})
	st, msg := sa.outcome(err, s.ctx.Err() != nil)
	s.end(sa, st, msg)
}

// deny answers a permission request of an auto_approve subagent: only
// its allowed tools may run. The answer is logged as any user's.
func (s *Service) deny(sa *subagent, pr *pb.PermissionRequest) {
	err := sa.sess.AnswerPermission(s.ctx, pr.GetRequestId(), pb.PermissionDecision_DENY,
		"auto_approve subagent: only its allowed_tools may run")
	if err != nil && !errors.Is(err, session.ErrStale) {
		s.opt.Logger.Warn("subagent: denying a permission request", "subagent_id", sa.id, "request_id", pr.GetRequestId(), "err", err)
	}
}

// end records a terminal status, in memory and in the session's metadata.
func (s *Service) end(sa *subagent, st pb.SubagentStatus, msg string) {
	sa.mu.Lock()
	sa.finished = s.opt.Now()
	if st == pb.SubagentStatus_SUBAGENT_STATUS_COMPLETED {
		sa.result = sa.text.String()
	} else if sa.errMsg == "" {
		sa.errMsg = msg
	}
	errMsg := sa.errMsg
	sa.mu.Unlock()
	s.release(sa)
	md := map[string]string{MetaStatus: statusWord(st)}
	if st != pb.SubagentStatus_SUBAGENT_STATUS_COMPLETED {
		md[MetaError] = errMsg
	}
	if err := sa.sess.SetMetadata(context.Background(), md); err != nil && !errors.Is(err, session.ErrNotFound) {
		s.opt.Logger.Warn("subagent: saving status", "subagent_id", sa.id, "err", err)
	}
	sa.setStatus(st, msg)
	s.opt.Logger.Info("subagent: ended", "subagent_id", sa.id, "status", statusWord(st), "message", msg)
}

// cancelSubagent cancels the subagent's turn; it reports whether the
// subagent was still unfinished.
func (s *Service) cancelSubagent(ctx context.Context, sa *subagent, reason string) bool {
	sa.mu.Lock()
	if terminal(sa.status) {
		sa.mu.Unlock()
		return false
	}
	sa.cancelled = true
	sa.mu.Unlock()
	s.opt.Logger.Info("subagent: cancelling", "subagent_id", sa.id, "reason", reason)
	if _, err := sa.sess.Cancel(ctx); err != nil {
		s.opt.Logger.Warn("subagent: cancelling the turn", "subagent_id", sa.id, "err", err)
	}
	return true
}

// observe follows one event of the subagent's turn.
func (sa *subagent) observe(ev *pb.AgentEvent) {
	var status pb.SubagentStatus
	sa.mu.Lock()
	switch e := ev.Event.(type) {
	case *pb.AgentEvent_TextDelta:
		if ev.GetParentToolUseId() == "" {
			sa.text.WriteString(e.TextDelta.GetText())
		}
	case *pb.AgentEvent_Usage:
		u := e.Usage
		sa.usage.InputTokens += u.GetInputTokens()
		sa.usage.OutputTokens += u.GetOutputTokens()
		sa.usage.CacheReadTokens += u.GetCacheReadTokens()
		sa.usage.CacheCreationTokens += u.GetCacheCreationTokens()
		sa.usage.CostUsd += u.GetCostUsd()
		sa.usage.DurationMs += u.GetDurationMs()
		if u.GetModel() != "" {
			sa.usage.Model = u.GetModel()
		}
	case *pb.AgentEvent_Error:
		sa.errMsg = e.Error.GetCode() + ": " + e.Error.GetMessage()
	case *pb.AgentEvent_TurnComplete:
		sa.stopReason = e.TurnComplete.GetStopReason()
	case *pb.AgentEvent_StatusChange:
		switch e.StatusChange.GetStatus() {
		case pb.AgentStatus_WAITING_FOR_USER:
			status = pb.SubagentStatus_SUBAGENT_STATUS_WAITING_FOR_USER
		case pb.AgentStatus_THINKING, pb.AgentStatus_EXECUTING_TOOL:
			if sa.status == pb.SubagentStatus_SUBAGENT_STATUS_WAITING_FOR_USER {
				status = pb.SubagentStatus_SUBAGENT_STATUS_RUNNING
			}
		}
	}
	sa.mu.Unlock()
	if status != pb.SubagentStatus_SUBAGENT_STATUS_UNSPECIFIED {
		sa.setStatus(status, ev.GetStatusChange().GetMessage())
	}
}

// outcome is the terminal status of a turn that was followed to its end
// (err nil) or not (err, stopped: the service stopped).
func (sa *subagent) outcome(err error, stopped bool) (pb.SubagentStatus, string) {
	sa.mu.Lock()
	defer sa.mu.Unlock()
	switch {
	case err != nil && (stopped || errors.Is(err, session.ErrClosed)):
		return pb.SubagentStatus_SUBAGENT_STATUS_CANCELLED, "the agent is shutting down"
	case err != nil:
		return pb.SubagentStatus_SUBAGENT_STATUS_FAILED, "following the session: " + err.Error()
	case sa.cancelled || sa.stopReason == "cancelled":
		return pb.SubagentStatus_SUBAGENT_STATUS_CANCELLED, "cancelled"
	case sa.errMsg != "":
		return pb.SubagentStatus_SUBAGENT_STATUS_FAILED, "the turn failed"
	case failedStop(sa.stopReason):
		return pb.SubagentStatus_SUBAGENT_STATUS_FAILED, "the turn ended with " + sa.stopReason
	}
	return pb.SubagentStatus_SUBAGENT_STATUS_COMPLETED, "completed"
}

// failedStop reports whether a TurnComplete stop reason is a failure.
func failedStop(reason string) bool {
	switch reason {
	case "error", "crashed", "interrupted":
		return true
	}
	return strings.HasPrefix(reason, "error_")
}

// setStatus records a status change and wakes the watchers.
func (sa *subagent) setStatus(st pb.SubagentStatus, msg string) {
	sa.mu.Lock()
	defer sa.mu.Unlock()
	if terminal(sa.status) || (st == sa.status && len(sa.changes) > 0) {
		return
	}
	sa.changes = append(sa.changes, &pb.SubagentStatusChange{PreviousStatus: sa.status, Status: st, Message: msg, Timestamp: timestamppb.New(sa.now())})
	sa.status = st
	close(sa.changed)
	sa.changed = make(chan struct{})
	if terminal(st) {
		close(sa.done)
	}
}

func (sa *subagent) isTerminal() bool {
	sa.mu.Lock()
	defer sa.mu.Unlock()
	return terminal(sa.status)
}

// changesFrom returns the status changes from index i on and a channel
// closed at the next one.
func (sa *subagent) changesFrom(i int) ([]*pb.SubagentStatusChange, <-chan struct{}) {
	sa.mu.Lock()
	defer sa.mu.Unlock()
	return sa.changes[min(i, len(sa.changes)):], sa.changed
}

func (sa *subagent) stepResult() stepResult {
	sa.mu.Lock()
	defer sa.mu.Unlock()
	return stepResult{status: sa.status, result: sa.result, err: sa.errMsg, costUSD: sa.usage.CostUsd}
}

// proto is the Subagent message of sa.
func (sa *subagent) proto() *pb.Subagent {
	sa.mu.Lock()
	defer sa.mu.Unlock()
	out := &pb.Subagent{
		Id: sa.id, ParentSessionId: sa.parent, SessionId: sa.sess.ID(), Name: sa.name, Status: sa.status,
		Model: sa.model, WorktreeId: sa.worktree, OrchestrationId: sa.orch, StepId: sa.step,
		CreatedAt: timestamppb.New(sa.created), Result: sa.result, Usage: proto.Clone(&sa.usage).(*pb.UsageReport),
	}
	if sa.usage.GetModel() != "" {
		out.Model = sa.usage.GetModel()
	}
	if !sa.started.IsZero() {
		out.StartedAt = timestamppb.New(sa.started)
	}
	if !sa.finished.IsZero() {
		out.FinishedAt = timestamppb.New(sa.finished)
	}
	if sa.status != pb.SubagentStatus_SUBAGENT_STATUS_COMPLETED {
		out.Error = sa.errMsg
	}
	return out
}

func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n])
}
