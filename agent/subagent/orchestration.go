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

// stepResult is how a step ended.
type stepResult struct {
	status  pb.SubagentStatus // terminal
	result  string            // final assistant text (completed)
	err     string            // why it failed
	costUSD float64
}

// stepRun runs one step to a terminal status: it spawns the step's
// subagent (reporting its id with started) and waits for it. Cancelling
// ctx cancels the step; stepRun still returns only once it ended.
type stepRun func(ctx context.Context, step *pb.OrchestrationStep, prompt string, started func(subagentID string)) stepResult

// orchestration is one DAG run. The run loop (run) is the only writer of
// the step states; watchers read them under mu.
type orchestration struct {
	id, parent, name string
	created          time.Time
	steps            []*pb.OrchestrationStep // request order
	byID             map[string]*pb.OrchestrationStep
	policy           pb.FailurePolicy
	limit            int     // steps running at once
	maxCost          float64 // 0: no limit
	now              func() time.Time

	mu        sync.Mutex
	dag       *dag
	status    pb.OrchestrationStatus
	finished  time.Time
	subagents map[string]string // step id -> subagent id
	results   map[string]string // step id -> result of a completed step
	cost      float64
	reason    string                           // why it stopped early
	updates   []*pb.WatchOrchestrationResponse // step updates, in order
	changed   chan struct{}                    // closed and replaced on every change

	cancelOnce sync.Once
	cancelReq  chan struct{} // closed by cancel
	done       chan struct{} // closed when run returns
}

func newOrchestration(id string, req *pb.CreateOrchestrationRequest, limit int, maxCost float64, now func() time.Time) (*orchestration, error) {
	nodes := make([]node, 0, len(req.GetSteps()))
	byID := map[string]*pb.OrchestrationStep{}
	for _, st := range req.GetSteps() {
		nodes = append(nodes, node{ID: st.GetId(), DependsOn: st.GetDependsOn()})
		byID[st.GetId()] = st
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
	return &orchestration{
		id: id, parent: req.GetParentSessionId(), name: req.GetName(), created: now(),
		steps: req.GetSteps(), byID: byID, policy: policy, limit: max(limit, 1), maxCost: maxCost, now: now,
		dag: d, status: pb.OrchestrationStatus_ORCHESTRATION_STATUS_RUNNING,
		subagents: map[string]string{}, results: map[string]string{},
		changed: make(chan struct{}), cancelReq: make(chan struct{}), done: make(chan struct{}),
	}, nil
}

// cancel asks the run loop to cancel every unfinished step.
func (o *orchestration) cancel() { o.cancelOnce.Do(func() { close(o.cancelReq) }) }

// run starts the steps as their dependencies complete and returns once
// the orchestration reached a terminal status. Cancelling ctx cancels it.
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
				o.setStep(id, pb.SubagentStatus_SUBAGENT_STATUS_RUNNING, "")
				go func() {
					res := runStep(sctx, step, prompt, func(sa string) { o.setStep(id, pb.SubagentStatus_SUBAGENT_STATUS_RUNNING, sa) })
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
			over := o.endStep(e.id, e.res, !stopping)
			switch {
			case stopping:
			case over:
				stop(pb.OrchestrationStatus_ORCHESTRATION_STATUS_FAILED, fmt.Sprintf("total cost $%.4f exceeded the limit of $%.4f", o.totalCost(), o.maxCost))
			case e.res.status != pb.SubagentStatus_SUBAGENT_STATUS_COMPLETED && o.policy == pb.FailurePolicy_FAILURE_POLICY_FAIL_FAST:
				stop(pb.OrchestrationStatus_ORCHESTRATION_STATUS_FAILED, fmt.Sprintf("step %s %s", e.id, statusWord(e.res.status)))
			}
		case <-cancelReq:
			cancelReq = nil
			stop(pb.OrchestrationStatus_ORCHESTRATION_STATUS_CANCELLED, "cancelled")
		case <-ctx.Done():
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

// endStep records a step's end; when keepGoing, a step that did not
// complete skips its dependents. It reports whether the cost limit is now
// exceeded.
func (o *orchestration) endStep(id string, res stepResult, keepGoing bool) (overBudget bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.cost += res.costUSD
	if res.status == pb.SubagentStatus_SUBAGENT_STATUS_COMPLETED {
		o.results[id] = res.result
	}
	o.setStepLocked(id, res.status, o.subagents[id])
	if res.status != pb.SubagentStatus_SUBAGENT_STATUS_COMPLETED && keepGoing {
		for _, s := range o.dag.skipDependents(id) {
			o.announceLocked(s)
		}
	}
	return o.maxCost > 0 && o.cost > o.maxCost
}

func (o *orchestration) totalCost() float64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.cost
}

// setStep records a step's status and subagent and announces it.
func (o *orchestration) setStep(id string, st pb.SubagentStatus, subagentID string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.setStepLocked(id, st, subagentID)
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
	defer o.mu.Unlock()
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
}

func (o *orchestration) stepStateLocked(step *pb.OrchestrationStep) *pb.OrchestrationStepState {
	id := step.GetId()
	return &pb.OrchestrationStepState{StepId: id, DependsOn: step.GetDependsOn(), Status: o.dag.status[id], SubagentId: o.subagents[id]}
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
