package subagent

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// memKV is an in-memory KV.
type memKV struct {
	mu sync.Mutex
	m  map[string][]byte
}

func (k *memKV) PutKV(_ context.Context, scope, key string, v []byte) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.m == nil {
		k.m = map[string][]byte{}
	}
	k.m[scope+"\x00"+key] = v
	return nil
}

func (k *memKV) GetKV(_ context.Context, scope, prefix string) (map[string][]byte, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := map[string][]byte{}
	for sk, v := range k.m {
		if s, key, _ := strings.Cut(sk, "\x00"); s == scope && strings.HasPrefix(key, prefix) {
			out[key] = v
		}
	}
	return out, nil
}

func ts(sec int64) *timestamppb.Timestamp { return timestamppb.New(time.Unix(sec, 0)) }

func TestInterruptSubagent(t *testing.T) {
	now := ts(100)
	tests := []struct {
		name    string
		in      *pb.Subagent
		changed bool
		want    *pb.Subagent
	}{
		{"running", &pb.Subagent{Id: "r", Status: stRunning},
			true, &pb.Subagent{Id: "r", Status: stFailed, Error: errInterrupted, FinishedAt: now}},
		{"waiting for user", &pb.Subagent{Id: "w", Status: pb.SubagentStatus_SUBAGENT_STATUS_WAITING_FOR_USER},
			true, &pb.Subagent{Id: "w", Status: stFailed, Error: errInterrupted, FinishedAt: now}},
		{"pending", &pb.Subagent{Id: "p", Status: stPending},
			true, &pb.Subagent{Id: "p", Status: stFailed, Error: errInterrupted, FinishedAt: now}},
		{"completed stays", &pb.Subagent{Id: "c", Status: stCompleted, Result: "r", FinishedAt: ts(50)},
			false, &pb.Subagent{Id: "c", Status: stCompleted, Result: "r", FinishedAt: ts(50)}},
		{"failed stays", &pb.Subagent{Id: "f", Status: stFailed, Error: "boom", FinishedAt: ts(50)},
			false, &pb.Subagent{Id: "f", Status: stFailed, Error: "boom", FinishedAt: ts(50)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := interruptSubagent(tt.in, now); got != tt.changed || !proto.Equal(tt.in, tt.want) {
				t.Fatalf("changed %v %v, want %v %v", got, tt.in, tt.changed, tt.want)
			}
		})
	}
}

func TestInterruptOrchestration(t *testing.T) {
	now := ts(100)
	running := pb.OrchestrationStatus_ORCHESTRATION_STATUS_RUNNING
	failed := pb.OrchestrationStatus_ORCHESTRATION_STATUS_FAILED
	steps := func(sts ...*pb.OrchestrationStepState) []*pb.OrchestrationStepState { return sts }
	tests := []struct {
		name    string
		in      *pb.Orchestration
		ended   map[string]*pb.Subagent
		changed bool
		want    *pb.Orchestration
	}{
		{"running steps fail, pending ones are cancelled",
			&pb.Orchestration{Id: "o", Status: running, Steps: steps(
				&pb.OrchestrationStepState{StepId: "a", Status: stCompleted, SubagentId: "sa-a", Attempt: 1},
				&pb.OrchestrationStepState{StepId: "b", Status: stRunning, SubagentId: "sa-b", Attempt: 2},
				&pb.OrchestrationStepState{StepId: "c", Status: stPending, DependsOn: []string{"b"}})},
			nil, true,
			&pb.Orchestration{Id: "o", Status: failed, FinishedAt: now, Steps: steps(
				&pb.OrchestrationStepState{StepId: "a", Status: stCompleted, SubagentId: "sa-a", Attempt: 1},
				&pb.OrchestrationStepState{StepId: "b", Status: stFailed, SubagentId: "sa-b", Attempt: 2, Error: errInterrupted},
				&pb.OrchestrationStepState{StepId: "c", Status: stCancelled, DependsOn: []string{"b"}})}},
		{"a step whose subagent's end was saved takes it",
			&pb.Orchestration{Id: "o", Status: running, Steps: steps(
				&pb.OrchestrationStepState{StepId: "a", Status: stRunning, SubagentId: "sa-a", Attempt: 1})},
			map[string]*pb.Subagent{"sa-a": {Id: "sa-a", Status: stCompleted}}, true,
			&pb.Orchestration{Id: "o", Status: failed, FinishedAt: now, Steps: steps(
				&pb.OrchestrationStepState{StepId: "a", Status: stCompleted, SubagentId: "sa-a", Attempt: 1})}},
		{"ended stays",
			&pb.Orchestration{Id: "o", Status: pb.OrchestrationStatus_ORCHESTRATION_STATUS_CANCELLED, FinishedAt: ts(5), Steps: steps(
				&pb.OrchestrationStepState{StepId: "a", Status: stCancelled})},
			nil, false,
			&pb.Orchestration{Id: "o", Status: pb.OrchestrationStatus_ORCHESTRATION_STATUS_CANCELLED, FinishedAt: ts(5), Steps: steps(
				&pb.OrchestrationStepState{StepId: "a", Status: stCancelled})}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := interruptOrchestration(tt.in, tt.ended, now); got != tt.changed || !proto.Equal(tt.in, tt.want) {
				t.Fatalf("changed %v %v\nwant %v %v", got, tt.in, tt.changed, tt.want)
			}
		})
	}
}

// What one service saved, another (the restarted agent) lists: ended
// records as they were, running ones FAILED as interrupted, oldest first;
// an interrupted record is saved back.
func TestRestore(t *testing.T) {
	kv := &memKV{}
	st := store{kv: kv}
	ctx := context.Background()
	puts := []proto.Message{
		&pb.Subagent{Id: "sa-2", ParentSessionId: "p", SessionId: "s2", Status: stRunning, OrchestrationId: "o-1", StepId: "b", Attempt: 2, CreatedAt: ts(2),
			Usage: &pb.UsageReport{OutputTokens: 7}, Provider: pb.SessionProvider_SESSION_PROVIDER_CLAUDE_CODE},
		&pb.Subagent{Id: "sa-1", ParentSessionId: "p", SessionId: "s1", Status: stCompleted, OrchestrationId: "o-1", StepId: "a", Attempt: 1, CreatedAt: ts(1),
			Result: "done", FinishedAt: ts(3)},
		&pb.Orchestration{Id: "o-2", ParentSessionId: "q", Status: pb.OrchestrationStatus_ORCHESTRATION_STATUS_COMPLETED, CreatedAt: ts(5), FinishedAt: ts(6),
			Steps: []*pb.OrchestrationStepState{{StepId: "x", Status: stCompleted, SubagentId: "sa-x", Attempt: 1}}},
		&pb.Orchestration{Id: "o-1", ParentSessionId: "p", Status: pb.OrchestrationStatus_ORCHESTRATION_STATUS_RUNNING, CreatedAt: ts(1), Steps: []*pb.OrchestrationStepState{
			{StepId: "a", Status: stCompleted, SubagentId: "sa-1", Attempt: 1},
			{StepId: "b", Status: stRunning, SubagentId: "sa-2", Attempt: 2, Error: ""},
			{StepId: "c", Status: stPending, DependsOn: []string{"a", "b"}}}},
	}
	for _, m := range puts {
		var err error
		switch v := m.(type) {
		case *pb.Subagent:
			err = st.putSubagent(ctx, v)
		case *pb.Orchestration:
			err = st.putOrchestration(ctx, v)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	s := &Service{opt: Options{Now: func() time.Time { return time.Unix(100, 0) }}, store: st,
		subagents: map[string]*subagent{}, orchs: map[string]*orchestration{}, worktrees: map[string]string{}}
	s.opt.setDefaults(nil)
	s.restore(ctx)

	subs, err := s.ListSubagents(ctx, &pb.ListSubagentsRequest{ParentSessionId: "p"})
	if err != nil {
		t.Fatal(err)
	}
	if got := subs.GetSubagents(); len(got) != 2 || got[0].GetId() != "sa-1" || got[1].GetId() != "sa-2" {
		t.Fatalf("subagents %v, want sa-1 then sa-2", got)
	}
	sa2 := subs.GetSubagents()[1]
	if sa2.GetStatus() != stFailed || sa2.GetError() != errInterrupted || sa2.GetAttempt() != 2 || sa2.GetUsage().GetOutputTokens() != 7 ||
		sa2.GetFinishedAt().AsTime().Unix() != 100 || sa2.GetProvider() != pb.SessionProvider_SESSION_PROVIDER_CLAUDE_CODE {
		t.Fatalf("interrupted subagent %v", sa2)
	}
	if sa1 := subs.GetSubagents()[0]; sa1.GetStatus() != stCompleted || sa1.GetResult() != "done" {
		t.Fatalf("completed subagent %v", sa1)
	}
	orchs, err := s.ListOrchestrations(ctx, &pb.ListOrchestrationsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if got := orchs.GetOrchestrations(); len(got) != 2 || got[0].GetId() != "o-1" || got[1].GetId() != "o-2" {
		t.Fatalf("orchestrations %v, want o-1 then o-2", got)
	}
	o1 := orchs.GetOrchestrations()[0]
	want := map[string]pb.SubagentStatus{"a": stCompleted, "b": stFailed, "c": stCancelled}
	if got := statuses(o1); o1.GetStatus() != pb.OrchestrationStatus_ORCHESTRATION_STATUS_FAILED || len(got) != 3 || got["a"] != want["a"] || got["b"] != want["b"] || got["c"] != want["c"] {
		t.Fatalf("interrupted orchestration %v", o1)
	}
	if b := stepState(o1, "b"); b.GetError() != errInterrupted || b.GetAttempt() != 2 || b.GetSubagentId() != "sa-2" {
		t.Fatalf("step b %v", b)
	}
	if only, _ := s.ListOrchestrations(ctx, &pb.ListOrchestrationsRequest{ParentSessionId: "q"}); len(only.GetOrchestrations()) != 1 || only.GetOrchestrations()[0].GetId() != "o-2" {
		t.Fatalf("orchestrations of q: %v", only)
	}
	// Watching a restored orchestration: its snapshot, at once.
	o, err := s.orchestration("o-1")
	if err != nil {
		t.Fatal(err)
	}
	var got []*pb.WatchOrchestrationResponse
	if err := o.watch(ctx, func(r *pb.WatchOrchestrationResponse) error { got = append(got, r); return nil }); err != nil || len(got) != 1 {
		t.Fatalf("watch: %v, %v", got, err)
	}
	// Saved back: a second restart sees the same.
	again := &Service{opt: s.opt, store: st, subagents: map[string]*subagent{}, orchs: map[string]*orchestration{}, worktrees: map[string]string{}}
	subs2, orchs2, err := again.store.load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if subs2[1].GetError() != errInterrupted || orchs2[0].GetStatus() != pb.OrchestrationStatus_ORCHESTRATION_STATUS_FAILED {
		t.Fatalf("stored after the restore: %v %v", subs2, orchs2)
	}
}
