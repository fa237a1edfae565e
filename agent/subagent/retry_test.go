package subagent

import (
	"context"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

const (
	stPending = pb.SubagentStatus_SUBAGENT_STATUS_PENDING
	stRunning = pb.SubagentStatus_SUBAGENT_STATUS_RUNNING
)

// withAttempts sets the max_attempts of the plan's steps.
func withAttempts(req *pb.CreateOrchestrationRequest, attempts map[string]uint32) *pb.CreateOrchestrationRequest {
	for _, st := range req.GetSteps() {
		st.MaxAttempts = attempts[st.GetId()]
	}
	return req
}

func stepState(o *pb.Orchestration, id string) *pb.OrchestrationStepState {
	for _, s := range o.GetSteps() {
		if s.GetStepId() == id {
			return s
		}
	}
	return nil
}

// collectUpdates watches o to its end and returns its step updates.
// It returns once the watch sent its first snapshot: later updates are
// all collected.
func collectUpdates(o *orchestration) <-chan []*pb.OrchestrationStepState {
	out := make(chan []*pb.OrchestrationStepState, 1)
	first := make(chan struct{})
	var once sync.Once
	go func() {
		var got []*pb.OrchestrationStepState
		_ = o.watch(context.Background(), func(r *pb.WatchOrchestrationResponse) error {
			if u := r.GetStepUpdate(); u != nil {
				got = append(got, u)
			}
			once.Do(func() { close(first) })
			return nil
		})
		out <- got
	}()
	<-first
	return out
}

func TestRunRetries(t *testing.T) {
	tests := []struct {
		name     string
		policy   pb.FailurePolicy
		attempts map[string]uint32
		maxCost  float64
		// script ends a's attempts in order (b, c and d complete
		// whenever they start, unless the orchestration stopped).
		script       []stepResult
		wantStatus   pb.OrchestrationStatus
		wantSteps    map[string]pb.SubagentStatus
		wantAttempts uint32 // of a
		wantErr      string // of a, at the end
	}{
		{"second attempt succeeds", 0, map[string]uint32{"a": 3}, 0,
			[]stepResult{{status: stFailed, err: "AGENT_ERROR: boom"}, {status: stCompleted, result: "ok"}},
			pb.OrchestrationStatus_ORCHESTRATION_STATUS_COMPLETED,
			map[string]pb.SubagentStatus{"a": stCompleted, "b": stCompleted}, 2, ""},
		{"every attempt fails, fail fast after the last", 0, map[string]uint32{"a": 2}, 0,
			[]stepResult{{status: stFailed, err: "first"}, {status: stFailed, err: "second"}},
			pb.OrchestrationStatus_ORCHESTRATION_STATUS_FAILED,
			map[string]pb.SubagentStatus{"a": stFailed, "b": stSkipped}, 2, "second"},
		{"0 and 1 mean no retry", 0, map[string]uint32{"a": 1}, 0,
			[]stepResult{{status: stFailed, err: "once"}},
			pb.OrchestrationStatus_ORCHESTRATION_STATUS_FAILED,
			map[string]pb.SubagentStatus{"a": stFailed, "b": stSkipped}, 1, "once"},
		{"a cancel is not retried", pb.FailurePolicy_FAILURE_POLICY_CONTINUE, map[string]uint32{"a": 3}, 0,
			[]stepResult{{status: stCancelled}},
			pb.OrchestrationStatus_ORCHESTRATION_STATUS_FAILED,
			map[string]pb.SubagentStatus{"a": stCancelled, "b": stSkipped}, 1, ""},
		{"the cost limit stops retries and counts every attempt", pb.FailurePolicy_FAILURE_POLICY_CONTINUE, map[string]uint32{"a": 3}, 1.0,
			[]stepResult{{status: stFailed, err: "costly", costUSD: 0.6}, {status: stFailed, err: "costlier", costUSD: 0.6}},
			pb.OrchestrationStatus_ORCHESTRATION_STATUS_FAILED,
			map[string]pb.SubagentStatus{"a": stFailed, "b": stSkipped}, 2, "costlier"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeSteps("a", "b")
			o, err := newOrchestration("orch", withAttempts(plan(tt.policy, 0, n("a"), n("b", "a")), tt.attempts), 4, tt.maxCost, time.Now)
			if err != nil {
				t.Fatal(err)
			}
			watched := collectUpdates(o) // from before the first update
			ctx, cancel := context.WithCancel(context.Background())
			defer func() {
				cancel()
				<-o.done
			}()
			go o.run(ctx, f.run)
			for i, res := range tt.script {
				f.waitStart(t, "a")
				if i > 0 {
					// The retry waited for the failure and ran the same step.
					snap := o.snapshot()
					if st := stepState(snap, "a"); st.GetAttempt() != uint32(i+1) || st.GetStatus() != stRunning {
						t.Fatalf("attempt %d: step a %v", i+1, st)
					}
					if st := stepState(snap, "b"); st.GetStatus() != stPending {
						t.Fatalf("b did not wait for a's last attempt: %v", st)
					}
				}
				f.release["a"] <- res
			}
			if tt.wantSteps["b"] == stCompleted {
				f.waitStart(t, "b")
				f.end("b", stCompleted, 0)
			}
			snap := wait(t, o)
			if got := statuses(snap); snap.GetStatus() != tt.wantStatus || !maps.Equal(got, tt.wantSteps) {
				t.Fatalf("%v %v, want %v %v", snap.GetStatus(), got, tt.wantStatus, tt.wantSteps)
			}
			a := stepState(snap, "a")
			if a.GetAttempt() != tt.wantAttempts || a.GetError() != tt.wantErr {
				t.Fatalf("step a: attempt %d error %q, want %d %q", a.GetAttempt(), a.GetError(), tt.wantAttempts, tt.wantErr)
			}
			var cost float64
			for _, res := range tt.script {
				cost += res.costUSD
			}
			if got := o.totalCost(); got != cost {
				t.Fatalf("cost %v, want %v: every attempt counts", got, cost)
			}
			// Every attempt has its RUNNING update (with its number) and a
			// retried failure a PENDING one carrying the error.
			var aUpdates []string
			for _, u := range <-watched {
				if u.GetStepId() == "a" {
					aUpdates = append(aUpdates, u.GetStatus().String()+" "+string(rune('0'+u.GetAttempt()))+" "+u.GetError())
				}
			}
			for i := range tt.script {
				want := stRunning.String() + " " + string(rune('1'+i)) + " "
				if !slices.Contains(aUpdates, want) {
					t.Fatalf("updates of a %q lack %q", aUpdates, want)
				}
				if i < len(tt.script)-1 {
					want := stPending.String() + " " + string(rune('1'+i)) + " " + tt.script[i].err
					if !slices.Contains(aUpdates, want) {
						t.Fatalf("updates of a %q lack %q", aUpdates, want)
					}
				}
			}
		})
	}
}

// A retried step keeps its slot's turn in the queue: the policy waits for
// its last attempt while the other steps go on.
func TestRunRetryFailFastWaitsForTheLastAttempt(t *testing.T) {
	f := newFakeSteps("a", "c")
	o := startRun(t, withAttempts(plan(0, 0, n("a"), n("c")), map[string]uint32{"a": 2}), 4, 0, f)
	f.waitStart(t, "a", "c")
	f.end("a", stFailed, 0)
	f.waitStart(t, "a")
	if st := stepState(o.snapshot(), "c"); st.GetStatus() != stRunning {
		t.Fatalf("c after a's first failure: %v, want still running", st)
	}
	f.end("a", stFailed, 0)
	snap := wait(t, o)
	want := map[string]pb.SubagentStatus{"a": stFailed, "c": stCancelled}
	if got := statuses(snap); !maps.Equal(got, want) {
		t.Fatalf("steps %v, want %v", got, want)
	}
}

// savedSnapshots records what an orchestration saves, in order.
type savedSnapshots chan *pb.Orchestration

func (s savedSnapshots) save(v *pb.Orchestration) { s <- proto.CloneOf(v) }

// until returns the first saved snapshot that satisfies ok.
func (s savedSnapshots) until(t *testing.T, ok func(*pb.Orchestration) bool) *pb.Orchestration {
	t.Helper()
	for {
		select {
		case v := <-s:
			if ok(v) {
				return v
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no such snapshot saved")
		}
	}
}

// Every change is saved; a step ended by the agent's shutdown stops the
// saves, so that the stored record still shows it running.
func TestRunSavesUntilInterrupted(t *testing.T) {
	f := newFakeSteps("a", "b")
	o, err := newOrchestration("orch", plan(0, 0, n("a"), n("b")), 4, 0, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	saved := make(savedSnapshots, 64)
	o.save = saved.save
	ctx, cancel := context.WithCancel(context.Background())
	defer func() {
		cancel()
		<-o.done
	}()
	go o.run(ctx, f.run)
	f.waitStart(t, "a", "b")
	f.end("a", stCompleted, 0)
	saved.until(t, func(v *pb.Orchestration) bool { return stepState(v, "a").GetStatus() == stCompleted })
	f.release["b"] <- stepResult{status: stCancelled, err: "the agent is shutting down", interrupted: true}
	snap := wait(t, o)
	if snap.GetStatus() != pb.OrchestrationStatus_ORCHESTRATION_STATUS_CANCELLED {
		t.Fatalf("in memory: %v, want CANCELLED", snap.GetStatus())
	}
	select {
	case v := <-saved:
		t.Fatalf("saved after the shutdown: %v", v)
	default:
	}
}
