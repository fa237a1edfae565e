package subagent

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// MaxAttemptsLimit is the most attempts a step may ask for
// (OrchestrationStep.max_attempts).
const MaxAttemptsLimit = 5

// stepResult is how one attempt of a step ended.
type stepResult struct {
	status  pb.SubagentStatus // terminal
	result  string            // final assistant text (completed)
	err     string            // why it failed
	costUSD float64
	// interrupted: the attempt ended because the agent is shutting down;
	// the orchestration is then not recorded as ended, so that the next
	// agent reports it interrupted.
	interrupted bool
}

// stepRun runs one attempt of a step (attempt 1, 2, ...) to a terminal
// status: it spawns the step's subagent (reporting its id with started)
// and waits for it. Cancelling ctx cancels the attempt; stepRun still
// returns only once it ended.
type stepRun func(ctx context.Context, step *pb.OrchestrationStep, prompt string, attempt uint32, started func(subagentID string)) stepResult

// orchestration is one DAG run. The run loop (run) is the only writer of
// the step states, except for the subagent id the steps report; watchers
// read them under mu.
type orchestration struct {
	id, parent, name string
	created          time.Time
	steps            []*pb.OrchestrationStep // request order
	byID             map[string]*pb.OrchestrationStep
	policy           pb.FailurePolicy
	limit            int     // steps running at once
	maxCost          float64 // 0: no limit
	now              func() time.Time
	// save, if set, stores a snapshot; persist calls it after each change,
	// in order.
	save   func(*pb.Orchestration)
	saveMu sync.Mutex

	mu          sync.Mutex
	dag         *dag
	status      pb.OrchestrationStatus
	finished    time.Time
	subagents   map[string]string // step id -> subagent id of its latest attempt
	attempts    map[string]uint32 // step id -> attempts started
	errs        map[string]string // step id -> why its latest attempt failed
	results     map[string]string // step id -> result of a completed step
	cost        float64
	reason      string                           // why it stopped early
	interrupted bool                             // stopped by the agent's shutdown: not saved any more
	updates     []*pb.WatchOrchestrationResponse // step updates, in order
	changed     chan struct{}                    // closed and replaced on every change

	cancelOnce sync.Once
	cancelReq  chan struct{} // closed by cancel
	done       chan struct{} // closed when run returns
}

func newOrchestration(id string, req *pb.CreateOrchestrationRequest, limit int, maxCost float64, now func() time.Time) (*orchestration, error) {
	nodes := make([]node, 0, len(req.GetSteps()))
	for _, st := range req.GetSteps() {
		nodes = append(nodes, node{ID: st.GetId(), DependsOn: st.GetDependsOn()})
	}
	d, err := newDAG(nodes)
	if err != nil {
		return nil, err
	}
	if n := int(req.GetMaxParallel()); n > 0 && n < limit {
		limit = n
	}
	policy := req.GetFailurePolicy()
	if policy == pb.FailurePolicy_FAILURE_POLICY_UNSPECIFIED {
		policy = pb.FailurePolicy_FAILURE_POLICY_FAIL_FAST
	}
	o := blankOrchestration(id, req.GetParentSessionId(), req.GetName(), now(), req.GetSteps(), d, now)
	o.policy, o.limit, o.maxCost = policy, max(limit, 1), maxCost
	o.status = pb.OrchestrationStatus_ORCHESTRATION_STATUS_RUNNING
	return o, nil
}

func blankOrchestration(id, parent, name string, created time.Time, steps []*pb.OrchestrationStep, d *dag, now func() time.Time) *orchestration {
	byID := map[string]*pb.OrchestrationStep{}
	for _, st := range steps {
		byID[st.GetId()] = st
	}
	return &orchestration{
		id: id, parent: parent, name: name, created: created, steps: steps, byID: byID, now: now, dag: d,
		subagents: map[string]string{}, attempts: map[string]uint32{}, errs: map[string]string{}, results: map[string]string{},
		changed: make(chan struct{}), cancelReq: make(chan struct{}), done: make(chan struct{}),
	}
}

// restoreOrchestration is a stored orchestration, ended (see
// interruptOrchestration): it is listed and watched, and runs nothing.
func restoreOrchestration(v *pb.Orchestration, now func() time.Time) (*orchestration, error) {
	steps := make([]*pb.OrchestrationStep, 0, len(v.GetSteps()))
	nodes := make([]node, 0, len(v.GetSteps()))
	for _, st := range v.GetSteps() {
		steps = append(steps, &pb.OrchestrationStep{Id: st.GetStepId(), DependsOn: st.GetDependsOn()})
		nodes = append(nodes, node{ID: st.GetStepId(), DependsOn: st.GetDependsOn()})
	}
	d, err := newDAG(nodes)
	if err != nil {
		return nil, fmt.Errorf("orchestration %s: %w", v.GetId(), err)
	}
	o := blankOrchestration(v.GetId(), v.GetParentSessionId(), v.GetName(), v.GetCreatedAt().AsTime(), steps, d, now)
	for _, st := range v.GetSteps() {
		id := st.GetStepId()
		d.set(id, st.GetStatus())
		if st.GetSubagentId() != "" {
			o.subagents[id] = st.GetSubagentId()
		}
		if st.GetAttempt() > 0 {
			o.attempts[id] = st.GetAttempt()
		}
		if st.GetError() != "" {
			o.errs[id] = st.GetError()
		}
	}
	o.status = v.GetStatus()
	if v.GetFinishedAt() != nil {
		o.finished = v.GetFinishedAt().AsTime()
	}
	o.limit = 1
	close(o.done)
	return o, nil
}

// cancel asks the run loop to cancel every unfinished step.
func (o *orchestration) cancel() { o.cancelOnce.Do(func() { close(o.cancelReq) }) }

// run starts the steps as their dependencies complete, retries failed
// attempts, and returns once the orchestration reached a terminal status.
// Cancelling ctx cancels it.
func (o *orchestration) run(ctx context.Context, runStep stepRun) {
	defer close(o.done)
	type ended struct {
		id  string
		res stepResult
	}
	results := make(chan ended)
	running := map[string]context.CancelFunc{}
	stopping := false
	final := pb.OrchestrationStatus_ORCHESTRATION_STATUS_UNSPECIFIED
	stop := func(st pb.OrchestrationStatus, reason string) {
		if stopping {
			return
		}
		stopping, final = true, st
		o.mu.Lock()
		o.reason = reason
		o.mu.Unlock()
		for _, cancel := range running {
			cancel()
		}
	}
	cancelReq := o.cancelReq
	for {
		if !stopping {
			for _, id := range o.ready() {
				if len(running) >= o.limit {
					break
				}
				sctx, cancel := context.WithCancel(ctx)
				running[id] = cancel
				step, prompt := o.byID[id], o.prompt(id)
				attempt := o.startAttempt(id)
				go func() {
					res := runStep(sctx, step, prompt, attempt, func(sa string) { o.setStep(id, pb.SubagentStatus_SUBAGENT_STATUS_RUNNING, sa) })
					results <- ended{id, res}
				}()
			}
		}
		if len(running) == 0 {
			break
		}
		select {
		case e := <-results:
			running[e.id]()
			delete(running, e.id)
			if !terminal(e.res.status) {
				e.res.status = pb.SubagentStatus_SUBAGENT_STATUS_FAILED
			}
			if e.res.interrupted && !stopping {
				o.interrupt()
				stop(pb.OrchestrationStatus_ORCHESTRATION_STATUS_CANCELLED, "the agent is shutting down")
			}
			over := o.addCost(e.res.costUSD)
			// A failed attempt (not a cancel, not the cost limit) is
			// retried while attempts are left; the failure policy applies
			// to the last one only.
			retry := !stopping && !over && e.res.status == pb.SubagentStatus_SUBAGENT_STATUS_FAILED && o.attemptsLeft(e.id)
			o.endStep(e.id, e.res, !stopping, retry)
			switch {
			case stopping, retry:
			case over:
				stop(pb.OrchestrationStatus_ORCHESTRATION_STATUS_FAILED, fmt.Sprintf("total cost $%.4f exceeded the limit of $%.4f", o.totalCost(), o.maxCost))
			case e.res.status != pb.SubagentStatus_SUBAGENT_STATUS_COMPLETED && o.policy == pb.FailurePolicy_FAILURE_POLICY_FAIL_FAST:
				stop(pb.OrchestrationStatus_ORCHESTRATION_STATUS_FAILED, fmt.Sprintf("step %s %s", e.id, statusWord(e.res.status)))
			}
		case <-cancelReq:
			cancelReq = nil
			stop(pb.OrchestrationStatus_ORCHESTRATION_STATUS_CANCELLED, "cancelled")
		case <-ctx.Done():
			o.interrupt()
			stop(pb.OrchestrationStatus_ORCHESTRATION_STATUS_CANCELLED, "the agent is shutting down")
		}
	}
	o.finish(final)
}

// ready returns the steps that may start now.
func (o *orchestration) ready() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.dag.ready()
}

// maxAttempts is the attempts step id may make (at least 1).
func (o *orchestration) maxAttempts(id string) uint32 {
	return max(o.byID[id].GetMaxAttempts(), 1)
}

// attemptsLeft reports whether step id may make another attempt.
func (o *orchestration) attemptsLeft(id string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.attempts[id] < o.maxAttempts(id)
}

// startAttempt records and announces the start of the step's next
// attempt and returns its number.
func (o *orchestration) startAttempt(id string) uint32 {
	o.mu.Lock()
	o.attempts[id]++
	n := o.attempts[id]
	delete(o.subagents, id)
	delete(o.errs, id)
	o.setStepLocked(id, pb.SubagentStatus_SUBAGENT_STATUS_RUNNING, "")
	o.mu.Unlock()
	o.persist()
	return n
}

// interrupt marks the orchestration stopped by the agent's shutdown: from
// now on it is no longer saved, so that the stored record still says
// running and the next agent reports it interrupted.
func (o *orchestration) interrupt() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.interrupted = true
}

// prompt is the step's prompt, with its dependencies' results appended
// when the step asks for them.
func (o *orchestration) prompt(id string) string {
	step := o.byID[id]
	p := step.GetSpec().GetPrompt()
	if !step.GetIncludeDependencyResults() || len(step.GetDependsOn()) == 0 {
		return p
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	var b strings.Builder
	b.WriteString(p)
	b.WriteString("\n\nResults of the steps this one depends on:\n")
	for _, dep := range step.GetDependsOn() {
		fmt.Fprintf(&b, "\n--- %s ---\n%s\n", dep, o.results[dep])
	}
	return b.String()
}

// addCost adds an attempt's cost and reports whether the limit is now
// exceeded. Every attempt counts.
func (o *orchestration) addCost(usd float64) (overBudget bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.cost += usd
	return o.maxCost > 0 && o.cost > o.maxCost
}

// endStep records the end of a step's attempt. With retry, the step goes
// back to PENDING (keeping the failure in its error) for its next attempt;
// else it ends, and when keepGoing a step that did not complete skips its
// dependents.
func (o *orchestration) endStep(id string, res stepResult, keepGoing, retry bool) {
	o.mu.Lock()
	if res.status == pb.SubagentStatus_SUBAGENT_STATUS_FAILED {
		o.errs[id] = res.err
	}
	switch {
	case retry:
		o.setStepLocked(id, pb.SubagentStatus_SUBAGENT_STATUS_PENDING, "")
	default:
		if res.status == pb.SubagentStatus_SUBAGENT_STATUS_COMPLETED {
			o.results[id] = res.result
		}
		o.setStepLocked(id, res.status, "")
		if res.status != pb.SubagentStatus_SUBAGENT_STATUS_COMPLETED && keepGoing {
			for _, s := range o.dag.skipDependents(id) {
				o.announceLocked(s)
			}
		}
	}
	o.mu.Unlock()
	o.persist()
}

func (o *orchestration) totalCost() float64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.cost
}

// setStep records a step's status and subagent and announces it.
func (o *orchestration) setStep(id string, st pb.SubagentStatus, subagentID string) {
	o.mu.Lock()
	o.setStepLocked(id, st, subagentID)
	o.mu.Unlock()
	o.persist()
}

func (o *orchestration) setStepLocked(id string, st pb.SubagentStatus, subagentID string) {
	o.dag.set(id, st)
	if subagentID != "" {
		o.subagents[id] = subagentID
	}
	o.announceLocked(id)
}

// announceLocked adds a step update and wakes the watchers. o.mu is held.
func (o *orchestration) announceLocked(id string) {
	o.updates = append(o.updates, &pb.WatchOrchestrationResponse{
		OrchestrationId: o.id, Timestamp: timestamppb.New(o.now()),
		Event: &pb.WatchOrchestrationResponse_StepUpdate{StepUpdate: o.stepStateLocked(o.byID[id])},
	})
	close(o.changed)
	o.changed = make(chan struct{})
}

// finish cancels the steps that never started and sets the final status.
func (o *orchestration) finish(final pb.OrchestrationStatus) {
	o.mu.Lock()
	for _, id := range o.dag.pending() {
		o.setStepLocked(id, pb.SubagentStatus_SUBAGENT_STATUS_CANCELLED, "")
	}
	switch {
	case final != pb.OrchestrationStatus_ORCHESTRATION_STATUS_UNSPECIFIED:
	case o.dag.allCompleted():
		final = pb.OrchestrationStatus_ORCHESTRATION_STATUS_COMPLETED
	default:
		final = pb.OrchestrationStatus_ORCHESTRATION_STATUS_FAILED
	}
	o.status, o.finished = final, o.now()
	close(o.changed)
	o.changed = make(chan struct{})
	o.mu.Unlock()
	o.persist()
}

// persist saves the current state, unless the orchestration was stopped by
// the agent's shutdown. Saves happen in the order of the changes.
func (o *orchestration) persist() {
	if o.save == nil {
		return
	}
	o.saveMu.Lock()
	defer o.saveMu.Unlock()
	o.mu.Lock()
	if o.interrupted {
		o.mu.Unlock()
		return
	}
	snap := o.snapshotLocked()
	o.mu.Unlock()
	o.save(snap)
}

func (o *orchestration) stepStateLocked(step *pb.OrchestrationStep) *pb.OrchestrationStepState {
	id := step.GetId()
	return &pb.OrchestrationStepState{StepId: id, DependsOn: step.GetDependsOn(), Status: o.dag.status[id],
		SubagentId: o.subagents[id], Attempt: o.attempts[id], Error: o.errs[id]}
}

// snapshot is the orchestration's current state.
func (o *orchestration) snapshot() *pb.Orchestration {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.snapshotLocked()
}

func (o *orchestration) snapshotLocked() *pb.Orchestration {
	out := &pb.Orchestration{Id: o.id, ParentSessionId: o.parent, Name: o.name, Status: o.status, CreatedAt: timestamppb.New(o.created)}
	if !o.finished.IsZero() {
		out.FinishedAt = timestamppb.New(o.finished)
	}
	for _, st := range o.steps {
		out.Steps = append(out.Steps, o.stepStateLocked(st))
	}
	return out
}

// watch sends a snapshot, then every step update, then (once the
// orchestration ended) a final snapshot.
func (o *orchestration) watch(ctx context.Context, send func(*pb.WatchOrchestrationResponse) error) error {
	snap := func(s *pb.Orchestration) *pb.WatchOrchestrationResponse {
		return &pb.WatchOrchestrationResponse{OrchestrationId: o.id, Timestamp: timestamppb.New(o.now()),
			Event: &pb.WatchOrchestrationResponse_Snapshot{Snapshot: s}}
	}
	o.mu.Lock()
	first, next, changed := o.snapshotLocked(), len(o.updates), o.changed
	o.mu.Unlock()
	if err := send(snap(first)); err != nil {
		return err
	}
	if first.GetStatus() != pb.OrchestrationStatus_ORCHESTRATION_STATUS_RUNNING {
		return nil
	}
	for {
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
		o.mu.Lock()
		ups, last := o.updates[next:], o.snapshotLocked()
		next, changed = len(o.updates), o.changed
		o.mu.Unlock()
		for _, u := range ups {
			if err := send(u); err != nil {
				return err
			}
		}
		if last.GetStatus() != pb.OrchestrationStatus_ORCHESTRATION_STATUS_RUNNING {
			return send(snap(last))
		}
	}
}

func statusWord(st pb.SubagentStatus) string {
	return strings.ToLower(strings.TrimPrefix(st.String(), "SUBAGENT_STATUS_"))
}
