package subagent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/betcode-dev/betcode/agent/provider"
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
	MetaAttempt       = metaPrefix + "attempt" // of its orchestration step, "1", "2", ...
	MetaName          = metaPrefix + "name"
	MetaTeammateSpec  = metaPrefix + "teammate_spec_id"
	MetaStatus        = metaPrefix + "status" // final status, e.g. "completed"
	MetaError         = metaPrefix + "error"
	metaClientPrefix  = metaPrefix + "meta." // SubagentSpec.metadata
)

// subagent is one subagent: a session running one prompt.
type subagent struct {
	id, parent, name, model, worktree, orch, step string
	sessionID                                     string
	attempt                                       uint32 // within its step; 0 outside an orchestration
	provider                                      pb.SessionProvider
	maxTurns                                      uint32 // 0: none
	created                                       time.Time
	// autoApprove: permission requests (for tools other than the allowed
	// ones, which run without one) are denied rather than asked.
	autoApprove bool
	// sess is the subagent's session; nil for one restored from the store
	// (it is loaded when watched).
	sess *session.Session
	now  func() time.Time
	// saveMu orders the saves of its record.
	saveMu sync.Mutex

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
	// interrupted: ended by the agent's shutdown; its record is not
	// saved any more, so that the next agent reports it interrupted.
	interrupted bool
	changes     []*pb.SubagentStatusChange
	changed     chan struct{} // closed and replaced on every change
	done        chan struct{} // closed at the terminal status
}

// checkSpec refuses a spec the service cannot run, whatever its parent;
// what names the step.
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
	case spec.GetCreateWorktree() && spec.GetWorktreeId() != "":
		return fail(codes.InvalidArgument, server.CodeInvalidArgument, "%sgive worktree_id or create_worktree, not both", prefix)
	case spec.GetWorktreeId() != "" && spec.GetWorkingDirectory() != "":
		return fail(codes.InvalidArgument, server.CodeInvalidArgument, "%sgive worktree_id or working_directory, not both", prefix)
	case len(spec.GetProviderConfig()) > 0 && spec.GetProvider() == pb.SessionProvider_SESSION_PROVIDER_UNSPECIFIED:
		return fail(codes.InvalidArgument, server.CodeInvalidArgument, "%sprovider_config requires provider (without one the subagent takes the parent's provider and its configuration)", prefix)
	}
	return nil
}

// sessionPlan is how a subagent's session runs: its provider, the
// provider's configuration and environment, and the model.
type sessionPlan struct {
	provider    pb.SessionProvider
	config, env map[string]string
	model       string
}

// planSession works out a subagent's provider from its spec and parent:
// the spec's provider with its provider_config, or the parent's provider
// with the parent's configuration. The parent's environment and model go
// along only with the parent's provider. A max_turns the provider cannot
// honour is refused.
func planSession(parent *session.Session, spec *pb.SubagentSpec, what string) (sessionPlan, error) {
	parentKind := provider.Default(parent.Provider())
	config, env := parent.ProviderConfig()
	p := sessionPlan{provider: parentKind, config: config, env: env, model: spec.GetModel()}
	if k := spec.GetProvider(); k != pb.SessionProvider_SESSION_PROVIDER_UNSPECIFIED {
		p.provider, p.config = provider.Default(k), spec.GetProviderConfig()
		if p.provider != parentKind {
			p.env = nil
		}
	}
	if p.model == "" && p.provider == parentKind {
		p.model = parent.Meta().Model
	}
	if n := spec.GetMaxTurns(); n > 0 && !honoursMaxTurns(p.provider) {
		prefix := ""
		if what != "" {
			prefix = what + ": "
		}
		return p, fail(codes.InvalidArgument, server.CodeInvalidArgument,
			"%smax_turns %d: provider %s cannot bound a subagent's turns (claude-code and openai-api can)", prefix, n, provider.Name(p.provider))
	}
	return p, nil
}

// honoursMaxTurns reports whether sessions of kind take a turn limit.
func honoursMaxTurns(kind pb.SessionProvider) bool {
	switch kind {
	case pb.SessionProvider_SESSION_PROVIDER_CLAUDE_CODE, pb.SessionProvider_SESSION_PROVIDER_OPENAI_API:
		return true
	}
	return false
}

func stepName(i int, id string) string {
	if id == "" {
		return fmt.Sprintf("step %d", i+1)
	}
	return "step " + id
}

// spawnRequest is one subagent to start.
type spawnRequest struct {
	parent string
	spec   *pb.SubagentSpec // teammate spec applied (resolveSpec)
	prompt string
	// orch, step and attempt place an orchestration step's subagent.
	orch, step string
	attempt    uint32
	// limit enforces the parent's MaxPerParent.
	limit bool
}

// spawn creates a subagent's session and sends it its prompt. Errors are
// statuses; a session that was created but could not take the prompt
// gives a FAILED subagent, not an error.
func (s *Service) spawn(ctx context.Context, r spawnRequest) (*subagent, error) {
	spec := r.spec
	parent, err := s.m.Get(ctx, r.parent)
	if err != nil {
		return nil, sessionStatus(err, "parent session")
	}
	plan, err := planSession(parent, spec, "")
	if err != nil {
		return nil, err
	}
	dir, wt := spec.GetWorkingDirectory(), spec.GetWorktreeId()
	if dir == "" && wt == "" {
		dir = parent.Meta().WorkingDirectory
	}
	name := spec.GetName()
	if name == "" {
		name = r.step
	}
	if name == "" {
		name = "subagent"
	}
	sa := &subagent{id: uuid.NewString(), parent: r.parent, name: name, model: plan.model, worktree: wt, orch: r.orch, step: r.step,
		attempt: r.attempt, provider: plan.provider, maxTurns: spec.GetMaxTurns(),
		autoApprove: spec.GetAutoApprove(), created: s.opt.Now(), now: s.opt.Now, changed: make(chan struct{}), done: make(chan struct{})}
	if err := s.reserve(sa, r.limit); err != nil {
		return nil, err
	}
	if spec.GetCreateWorktree() {
		id, err := s.createWorktree(ctx, dir, name, sa.id)
		if err != nil {
			s.release(sa)
			return nil, err
		}
		s.holdWorktree(sa, id)
		dir = ""
	}
	md := map[string]string{MetaParent: r.parent, MetaID: sa.id, MetaName: name, MetaOrchestration: r.orch, MetaStep: r.step,
		MetaTeammateSpec: spec.GetTeammateSpecId()}
	if r.attempt > 0 {
		md[MetaAttempt] = fmt.Sprint(r.attempt)
	}
	for k, v := range spec.GetMetadata() {
		md[metaClientPrefix+k] = v
	}
	for k, v := range md {
		if v == "" {
			delete(md, k)
		}
	}
	sess, err := s.m.Create(ctx, session.CreateRequest{
		WorkingDirectory: dir, Model: plan.model, WorktreeID: sa.worktree, AllowedTools: spec.GetAllowedTools(),
		Metadata: md, Name: truncate("subagent "+name, session.MaxNameRunes), CreatedBy: callUser(ctx),
		Provider: plan.provider, Env: plan.env, ProviderConfig: plan.config, MaxTurns: int(spec.GetMaxTurns()),
	})
	if err != nil {
		s.release(sa)
		return nil, sessionStatus(err, "create subagent session")
	}
	sa.sess, sa.sessionID = sess, sess.ID()
	if sa.model == "" {
		sa.model = sess.Meta().Model
	}
	sa.setStatus(pb.SubagentStatus_SUBAGENT_STATUS_PENDING, "session "+sess.ID()+" created")
	s.register(sa)
	s.save(sa)
	log := s.opt.Logger.With("subagent_id", sa.id, "session_id", sess.ID(), "parent_session_id", r.parent)
	from := sess.LastSeq()
	if err := sess.Send(ctx, session.Message{Text: r.prompt, SentBy: callUser(ctx)}); err != nil {
		log.Warn("subagent: could not start", "err", err)
		if errors.Is(err, session.ErrClosed) || errors.Is(err, session.ErrDraining) {
			sa.markInterrupted()
		}
		s.end(sa, pb.SubagentStatus_SUBAGENT_STATUS_FAILED, "could not start: "+err.Error())
		return sa, nil
	}
	sa.mu.Lock()
	sa.started = s.opt.Now()
	sa.mu.Unlock()
	sa.setStatus(pb.SubagentStatus_SUBAGENT_STATUS_RUNNING, "prompt sent")
	s.save(sa)
	log.Info("subagent: started", "orchestration_id", r.orch, "step_id", r.step, "attempt", r.attempt,
		"provider", provider.Name(sa.provider), "worktree_id", sa.worktree)
	if !s.start(func() { s.follow(sa, from) }) {
		sa.markInterrupted()
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

// holdWorktree gives sa the worktree made for it.
func (s *Service) holdWorktree(sa *subagent, id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sa.worktree = id
	s.worktrees[id] = sa.id
}

// release frees the subagent's worktree.
func (s *Service) release(sa *subagent) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sa.worktree != "" && s.worktrees[sa.worktree] == sa.id {
		delete(s.worktrees, sa.worktree)
	}
}

// register lists sa, in the order of creation (as a restarted agent
// lists them: subagents spawned at once register in any order).
func (s *Service) register(sa *subagent) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.subagents[sa.id] = sa
	s.order = insertOrdered(s.order, sa, func(o *subagent) (time.Time, string) { return o.created, o.id })
}

// insertOrdered inserts v into list, ordered by creation time and id.
func insertOrdered[T any](list []T, v T, key func(T) (time.Time, string)) []T {
	at, id := key(v)
	i := len(list)
	for i > 0 {
		t, pid := key(list[i-1])
		if t.Before(at) || (t.Equal(at) && pid < id) {
			break
		}
		i--
	}
	return slices.Insert(list, i, v)
}

// follow reads the subagent's turn until it ended and records the outcome.
func (s *Service) follow(sa *subagent, from uint64) {
	err := sa.sess.Stream(s.ctx, session.StreamOptions{From: from, UntilIdle: true}, func(ev *pb.AgentEvent) error {
		if sa.observe(ev) {
			s.save(sa)
		}
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

// end records a terminal status: in memory, in the store and in the
// session's metadata (unless the agent's shutdown ended it).
func (s *Service) end(sa *subagent, st pb.SubagentStatus, msg string) {
	sa.mu.Lock()
	sa.finished = s.opt.Now()
	if st == pb.SubagentStatus_SUBAGENT_STATUS_COMPLETED {
		sa.result = sa.text.String()
	} else if sa.errMsg == "" {
		sa.errMsg = msg
	}
	errMsg, interrupted := sa.errMsg, sa.interrupted
	sa.mu.Unlock()
	s.release(sa)
	if !interrupted {
		md := map[string]string{MetaStatus: statusWord(st)}
		if st != pb.SubagentStatus_SUBAGENT_STATUS_COMPLETED {
			md[MetaError] = errMsg
		}
		if err := sa.sess.SetMetadata(context.Background(), md); err != nil && !errors.Is(err, session.ErrNotFound) {
			s.opt.Logger.Warn("subagent: saving status", "subagent_id", sa.id, "err", err)
		}
	}
	sa.setStatus(st, msg)
	s.save(sa)
	s.opt.Logger.Info("subagent: ended", "subagent_id", sa.id, "status", statusWord(st), "message", msg, "interrupted", interrupted)
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

// observe follows one event of the subagent's turn; it reports whether
// the subagent's status changed.
func (sa *subagent) observe(ev *pb.AgentEvent) bool {
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
		// The session manager ends running turns so when it closes.
		sa.interrupted = sa.interrupted || e.Error.GetCode() == session.CodeAgentShuttingDown
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
		return true
	}
	return false
}

// outcome is the terminal status of a turn that was followed to its end
// (err nil) or not (err, stopped: the service stopped).
func (sa *subagent) outcome(err error, stopped bool) (pb.SubagentStatus, string) {
	sa.mu.Lock()
	defer sa.mu.Unlock()
	switch {
	case sa.interrupted || (err != nil && (stopped || errors.Is(err, session.ErrClosed))):
		sa.interrupted = true
		return pb.SubagentStatus_SUBAGENT_STATUS_CANCELLED, "the agent is shutting down"
	case err != nil:
		return pb.SubagentStatus_SUBAGENT_STATUS_FAILED, "following the session: " + err.Error()
	case sa.cancelled || sa.stopReason == "cancelled":
		return pb.SubagentStatus_SUBAGENT_STATUS_CANCELLED, "cancelled"
	case strings.Contains(sa.stopReason, "max_turns"):
		// The CLI's error ("Reached maximum number of turns (N)") is in
		// the session's events; say it in the subagent's terms.
		if sa.maxTurns > 0 {
			sa.errMsg = fmt.Sprintf("stopped by its turn limit (max_turns %d) before finishing", sa.maxTurns)
		} else {
			sa.errMsg = "stopped by the provider's turn limit before finishing"
		}
		return pb.SubagentStatus_SUBAGENT_STATUS_FAILED, sa.errMsg
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

func (sa *subagent) markInterrupted() {
	sa.mu.Lock()
	defer sa.mu.Unlock()
	sa.interrupted = true
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
	return stepResult{status: sa.status, result: sa.result, err: sa.errMsg, costUSD: sa.usage.CostUsd, interrupted: sa.interrupted}
}

// proto is the Subagent message of sa.
func (sa *subagent) proto() *pb.Subagent {
	sa.mu.Lock()
	defer sa.mu.Unlock()
	out := &pb.Subagent{
		Id: sa.id, ParentSessionId: sa.parent, SessionId: sa.sessionID, Name: sa.name, Status: sa.status,
		Model: sa.model, WorktreeId: sa.worktree, OrchestrationId: sa.orch, StepId: sa.step,
		CreatedAt: timestamppb.New(sa.created), Result: sa.result, Usage: proto.Clone(&sa.usage).(*pb.UsageReport),
		Attempt: sa.attempt, Provider: sa.provider,
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

// restoreSubagent is a stored subagent, ended (see interruptSubagent):
// listed, watched (its session's events), never run again.
func restoreSubagent(v *pb.Subagent, now func() time.Time) *subagent {
	sa := &subagent{id: v.GetId(), parent: v.GetParentSessionId(), name: v.GetName(), model: v.GetModel(), worktree: v.GetWorktreeId(),
		orch: v.GetOrchestrationId(), step: v.GetStepId(), sessionID: v.GetSessionId(), attempt: v.GetAttempt(), provider: v.GetProvider(),
		created: v.GetCreatedAt().AsTime(), now: now, status: v.GetStatus(), result: v.GetResult(), errMsg: v.GetError(),
		changed: make(chan struct{}), done: make(chan struct{})}
	if v.GetUsage() != nil {
		proto.Merge(&sa.usage, v.GetUsage())
	}
	if v.GetStartedAt() != nil {
		sa.started = v.GetStartedAt().AsTime()
	}
	if v.GetFinishedAt() != nil {
		sa.finished = v.GetFinishedAt().AsTime()
	}
	msg := statusWord(v.GetStatus())
	if v.GetError() != "" {
		msg = v.GetError()
	}
	sa.changes = []*pb.SubagentStatusChange{{Status: v.GetStatus(), Message: msg, Timestamp: v.GetFinishedAt()}}
	close(sa.done)
	return sa
}

func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n])
}
