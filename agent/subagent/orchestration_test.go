package subagent

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

const (
	stCompleted = pb.SubagentStatus_SUBAGENT_STATUS_COMPLETED
	stFailed    = pb.SubagentStatus_SUBAGENT_STATUS_FAILED
	stCancelled = pb.SubagentStatus_SUBAGENT_STATUS_CANCELLED
	stSkipped   = pb.SubagentStatus_SUBAGENT_STATUS_SKIPPED
)

func plan(policy pb.FailurePolicy, maxParallel uint32, nodes ...node) *pb.CreateOrchestrationRequest {
	req := &pb.CreateOrchestrationRequest{ParentSessionId: "parent", MaxParallel: maxParallel, FailurePolicy: policy}
	for _, n := range nodes {
		req.Steps = append(req.Steps, &pb.OrchestrationStep{Id: n.ID, DependsOn: n.DependsOn, Spec: &pb.SubagentSpec{Prompt: "do " + n.ID}})
	}
	return req
}

// fakeSteps is a stepRun whose steps end when the test says so (or, for
// a step in blockUntilCancel, when cancelled), recording starts and ends.
type fakeSteps struct {
	mu               sync.Mutex
	log              []string // "start a", "end a"
	running, maxRun  int
	started          chan string
	release          map[string]chan stepResult
	blockUntilCancel map[string]bool
}

func newFakeSteps(ids ...string) *fakeSteps {
	f := &fakeSteps{started: make(chan string, 16), release: map[string]chan stepResult{}, blockUntilCancel: map[string]bool{}}
	for _, id := range ids {
		f.release[id] = make(chan stepResult, 1)
	}
	return f
}

func (f *fakeSteps) run(ctx context.Context, step *pb.OrchestrationStep, _ string, attempt uint32, started func(string)) stepResult {
	id := step.GetId()
	f.mu.Lock()
	f.running++
	f.maxRun = max(f.maxRun, f.running)
	if attempt > 1 {
		f.log = append(f.log, fmt.Sprintf("start %s#%d", id, attempt))
	} else {
		f.log = append(f.log, "start "+id)
	}
	f.mu.Unlock()
	started(fmt.Sprintf("sa-%s-%d", id, attempt))
	f.started <- id
	var res stepResult
	select {
	case res = <-f.release[id]:
	case <-ctx.Done():
		res = stepResult{status: stCancelled}
	}
	f.mu.Lock()
	f.running--
	f.log = append(f.log, "end "+id)
	f.mu.Unlock()
	return res
}

func (f *fakeSteps) end(id string, st pb.SubagentStatus, cost float64) {
	res := stepResult{status: st, result: "result of " + id, costUSD: cost}
	if st == stFailed {
		res.err = "AGENT_ERROR: " + id + " failed"
	}
	f.release[id] <- res
}

// waitStart waits for the next step to start and checks which.
func (f *fakeSteps) waitStart(t *testing.T, want ...string) {
	t.Helper()
	var got []string
	for range want {
		select {
		case id := <-f.started:
			got = append(got, id)
		case <-time.After(10 * time.Second):
			t.Fatalf("started %v, still waiting for %v", got, want)
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("started %v, want %v", got, want)
	}
}

func startRun(t *testing.T, req *pb.CreateOrchestrationRequest, limit int, maxCost float64, f *fakeSteps) *orchestration {
	t.Helper()
	o, err := newOrchestration("orch", req, limit, maxCost, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go o.run(ctx, f.run)
	t.Cleanup(func() {
		cancel()
		<-o.done
	})
	return o
}

func wait(t *testing.T, o *orchestration) *pb.Orchestration {
	t.Helper()
	select {
	case <-o.done:
	case <-time.After(10 * time.Second):
		t.Fatalf("orchestration did not end: %v", o.snapshot())
	}
	return o.snapshot()
}

func statuses(o *pb.Orchestration) map[string]pb.SubagentStatus {
	out := map[string]pb.SubagentStatus{}
	for _, s := range o.GetSteps() {
		out[s.GetStepId()] = s.GetStatus()
	}
	return out
}

func TestRunThirdStepWaitsForBoth(t *testing.T) {
	f := newFakeSteps("a", "b", "c")
	o := startRun(t, plan(0, 0, n("a"), n("b"), n("c", "a", "b")), 4, 0, f)
	f.waitStart(t, "a", "b")
	f.end("a", stCompleted, 0)
	f.end("b", stCompleted, 0)
	f.waitStart(t, "c")
	f.end("c", stCompleted, 0)
	snap := wait(t, o)
	if snap.GetStatus() != pb.OrchestrationStatus_ORCHESTRATION_STATUS_COMPLETED {
		t.Fatalf("status %v", snap.GetStatus())
	}
	start := slices.Index(f.log, "start c")
	if start < slices.Index(f.log, "end a") || start < slices.Index(f.log, "end b") {
		t.Fatalf("c started before a and b ended: %v", f.log)
	}
	if p := o.prompt("c"); p != "do c" {
		t.Fatalf("prompt of c without include_dependency_results: %q", p)
	}
}

func TestRunConcurrencyLimit(t *testing.T) {
	f := newFakeSteps("a", "b", "c", "d", "e")
	o := startRun(t, plan(0, 2, n("a"), n("b"), n("c"), n("d"), n("e")), 4, 0, f)
	f.waitStart(t, "a", "b")
	f.end("a", stCompleted, 0)
	f.waitStart(t, "c")
	f.end("b", stCompleted, 0)
	f.waitStart(t, "d")
	f.end("c", stCompleted, 0)
	f.waitStart(t, "e")
	f.end("d", stCompleted, 0)
	f.end("e", stCompleted, 0)
	wait(t, o)
	if f.maxRun != 2 {
		t.Fatalf("at most %d steps ran at once, want 2", f.maxRun)
	}
}

func TestRunDaemonLimitCapsRequest(t *testing.T) {
	o, err := newOrchestration("orch", plan(0, 10, n("a")), 3, 0, time.Now)
	if err != nil || o.limit != 3 {
		t.Fatalf("limit %d, %v; want the daemon's 3", o.limit, err)
	}
}

func TestRunFailure(t *testing.T) {
	tests := []struct {
		name   string
		policy pb.FailurePolicy
		want   map[string]pb.SubagentStatus
	}{
		{"continue runs the rest", pb.FailurePolicy_FAILURE_POLICY_CONTINUE,
			map[string]pb.SubagentStatus{"a": stFailed, "b": stSkipped, "c": stCompleted, "d": stCompleted}},
		{"fail fast cancels the rest", pb.FailurePolicy_FAILURE_POLICY_UNSPECIFIED,
			map[string]pb.SubagentStatus{"a": stFailed, "b": stSkipped, "c": stCancelled, "d": stCancelled}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeSteps("a", "b", "c", "d")
			o := startRun(t, plan(tt.policy, 0, n("a"), n("b", "a"), n("c"), n("d", "c")), 4, 0, f)
			f.waitStart(t, "a", "c")
			f.end("a", stFailed, 0)
			if tt.policy == pb.FailurePolicy_FAILURE_POLICY_CONTINUE {
				f.end("c", stCompleted, 0)
				f.waitStart(t, "d")
				f.end("d", stCompleted, 0)
			}
			snap := wait(t, o)
			if got := statuses(snap); !maps.Equal(got, tt.want) {
				t.Fatalf("steps %v, want %v", got, tt.want)
			}
			if snap.GetStatus() != pb.OrchestrationStatus_ORCHESTRATION_STATUS_FAILED {
				t.Fatalf("status %v, want FAILED", snap.GetStatus())
			}
		})
	}
}

func TestRunCostLimit(t *testing.T) {
	f := newFakeSteps("a", "b", "c", "d")
	o := startRun(t, plan(0, 0, n("a"), n("b"), n("c", "a"), n("d")), 2, 1.0, f)
	f.waitStart(t, "a", "b")
	f.end("a", stCompleted, 0.6)
	f.waitStart(t, "c")
	f.end("c", stCompleted, 0.6) // 1.2 > 1.0: b is cancelled, d never starts
	snap := wait(t, o)
	want := map[string]pb.SubagentStatus{"a": stCompleted, "b": stCancelled, "c": stCompleted, "d": stCancelled}
	if got := statuses(snap); !maps.Equal(got, want) || snap.GetStatus() != pb.OrchestrationStatus_ORCHESTRATION_STATUS_FAILED {
		t.Fatalf("%v %v, want FAILED %v", snap.GetStatus(), got, want)
	}
	if slices.Contains(f.log, "start d") {
		t.Fatalf("d started after the budget ran out: %v", f.log)
	}
}

func TestRunCancel(t *testing.T) {
	f := newFakeSteps("a", "b", "c")
	o := startRun(t, plan(0, 0, n("a"), n("b"), n("c", "a")), 4, 0, f)
	watched := make(chan []*pb.WatchOrchestrationResponse, 1)
	go func() {
		var got []*pb.WatchOrchestrationResponse
		_ = o.watch(context.Background(), func(r *pb.WatchOrchestrationResponse) error {
			got = append(got, r)
			return nil
		})
		watched <- got
	}()
	f.waitStart(t, "a", "b")
	f.end("b", stCompleted, 0)
	o.cancel()
	snap := wait(t, o)
	want := map[string]pb.SubagentStatus{"a": stCancelled, "b": stCompleted, "c": stCancelled}
	if got := statuses(snap); !maps.Equal(got, want) || snap.GetStatus() != pb.OrchestrationStatus_ORCHESTRATION_STATUS_CANCELLED {
		t.Fatalf("%v %v, want CANCELLED %v", snap.GetStatus(), got, want)
	}
	got := <-watched
	if len(got) < 3 || got[0].GetSnapshot() == nil || got[len(got)-1].GetSnapshot().GetStatus() != pb.OrchestrationStatus_ORCHESTRATION_STATUS_CANCELLED {
		t.Fatalf("watch: %v; want a snapshot, step updates, a final CANCELLED snapshot", got)
	}
	for _, r := range got[1 : len(got)-1] {
		if r.GetStepUpdate() == nil {
			t.Fatalf("watch: %v between the snapshots", r)
		}
	}
}

func TestRunIncludesDependencyResults(t *testing.T) {
	req := plan(0, 0, n("a"), n("b", "a"))
	req.Steps[1].IncludeDependencyResults = true
	f := newFakeSteps("a", "b")
	o := startRun(t, req, 4, 0, f)
	f.waitStart(t, "a")
	f.end("a", stCompleted, 0)
	f.waitStart(t, "b")
	if p := o.prompt("b"); p != "do b\n\nResults of the steps this one depends on:\n\n--- a ---\nresult of a\n" {
		t.Fatalf("prompt %q", p)
	}
	f.end("b", stCompleted, 0)
	wait(t, o)
}
