package e2e

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/betcode-dev/betcode/agent/internal/testenv"
	"github.com/betcode-dev/betcode/agent/server"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/fakeapi"
)

// These tests drive SubagentService through the real daemon, with the
// subagent_orchestration flag on, and the real Claude Code CLI against the
// fake API: subagents are sessions whose prompts script the fake model.

func step(id, prompt string, deps ...string) *pb.OrchestrationStep {
	return &pb.OrchestrationStep{Id: id, DependsOn: deps, Spec: &pb.SubagentSpec{Name: id, Prompt: prompt}}
}

// watchOrch collects WatchOrchestration's messages until it ends; each
// step update is recorded as "id STATUS".
func watchOrch(t *testing.T, ctx context.Context, svc pb.SubagentServiceClient, id string, onUpdate func(*pb.OrchestrationStepState)) (updates []string, final *pb.Orchestration) {
	t.Helper()
	w, err := svc.WatchOrchestration(ctx, &pb.WatchOrchestrationRequest{OrchestrationId: id})
	if err != nil {
		t.Fatal(err)
	}
	for {
		r, err := w.Recv()
		if errors.Is(err, io.EOF) {
			return updates, final
		}
		if err != nil {
			t.Fatalf("WatchOrchestration after %v: %v", updates, err)
		}
		if u := r.GetStepUpdate(); u != nil {
			updates = append(updates, u.GetStepId()+" "+strings.TrimPrefix(u.GetStatus().String(), "SUBAGENT_STATUS_"))
			if onUpdate != nil {
				onUpdate(u)
			}
		}
		if s := r.GetSnapshot(); s != nil {
			final = s
		}
	}
}

// waitSubagent watches a subagent to its end and returns it as listed.
func waitSubagent(t *testing.T, ctx context.Context, svc pb.SubagentServiceClient, id string) *pb.Subagent {
	t.Helper()
	w, err := svc.WatchSubagent(ctx, &pb.WatchSubagentRequest{SubagentId: id})
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := w.Recv(); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("WatchSubagent: %v", err)
		}
	}
	list, err := svc.ListSubagents(ctx, &pb.ListSubagentsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, sa := range list.GetSubagents() {
		if sa.GetId() == id {
			return sa
		}
	}
	t.Fatalf("subagent %s not listed", id)
	return nil
}

func stepStatuses(o *pb.Orchestration) map[string]pb.SubagentStatus {
	out := map[string]pb.SubagentStatus{}
	for _, s := range o.GetSteps() {
		out[s.GetStepId()] = s.GetStatus()
	}
	return out
}

func subagentsOf(t *testing.T, ctx context.Context, svc pb.SubagentServiceClient, orch string) map[string]*pb.Subagent {
	t.Helper()
	list, err := svc.ListSubagents(ctx, &pb.ListSubagentsRequest{OrchestrationId: orch})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*pb.Subagent{}
	for _, sa := range list.GetSubagents() {
		out[sa.GetStepId()] = sa
	}
	return out
}

// replayTurn replays a subagent's session with ResumeSession and checks
// its sequences; it returns the events.
func replayTurn(t *testing.T, ctx context.Context, api pb.AgentServiceClient, sa *pb.Subagent) []*pb.AgentEvent {
	t.Helper()
	evs := drain(t, resume(t, ctx, api, sa.GetSessionId(), false))
	checkSequences(t, evs, 0)
	if sessionID(t, evs) != sa.GetSessionId() || !slices.ContainsFunc(evs, isTurnComplete) {
		t.Fatalf("replay of subagent %s (%d events) lacks its session info or turn end", sa.GetName(), len(evs))
	}
	return evs
}

func TestSubagentOrchestration(t *testing.T) {
	api := testenv.FakeAPI(t)
	agent := testenv.StartAgent(t, testenv.AgentOptions{APIURL: api.URL(), Args: []string{"--feature-flag", server.SubagentOrchestration}})
	svc := pb.NewSubagentServiceClient(agent.Conn)
	ctx := testenv.Ctx(t, 4*time.Minute)
	parent := startSession(t, ctx, agent.API, &pb.StartSessionRequest{WorkingDirectory: agent.ProjectDir(t), Name: "coordinator"}).GetSession().GetId()

	neg, err := pb.NewVersionServiceClient(agent.Conn).NegotiateCapabilities(ctx, &pb.NegotiateRequest{ClientVersion: "0.2.0", RequestedFeatures: []string{server.SubagentOrchestration}})
	if err != nil || !slices.Contains(neg.GetGrantedFeatures(), server.SubagentOrchestration) {
		t.Fatalf("NegotiateCapabilities with the flag on: %v, %v", neg, err)
	}

	t.Run("spawn and watch", func(t *testing.T) {
		resp, err := svc.SpawnSubagent(ctx, &pb.SpawnSubagentRequest{ParentSessionId: parent, Spec: &pb.SubagentSpec{Name: "counter", Prompt: "STREAM 5"}})
		if err != nil {
			t.Fatalf("SpawnSubagent: %v", err)
		}
		sa := resp.GetSubagent()
		w, err := svc.WatchSubagent(ctx, &pb.WatchSubagentRequest{SubagentId: sa.GetId()})
		if err != nil {
			t.Fatal(err)
		}
		var evs []*pb.AgentEvent
		var changes []pb.SubagentStatus
		for {
			r, err := w.Recv()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("WatchSubagent: %v", err)
			}
			if ev := r.GetAgentEvent(); ev != nil {
				evs = append(evs, ev)
			}
			if c := r.GetStatusChange(); c != nil {
				changes = append(changes, c.GetStatus())
			}
		}
		checkSequences(t, evs, 0)
		if text(evs) != strings.Join(fakeapi.NumberedDeltas(5), "") {
			t.Fatalf("watched text %q", text(evs))
		}
		if !slices.Equal(changes, []pb.SubagentStatus{pb.SubagentStatus_SUBAGENT_STATUS_PENDING, pb.SubagentStatus_SUBAGENT_STATUS_RUNNING, pb.SubagentStatus_SUBAGENT_STATUS_COMPLETED}) {
			t.Fatalf("status changes %v", changes)
		}
		// From a sequence: only the later events.
		w, err = svc.WatchSubagent(ctx, &pb.WatchSubagentRequest{SubagentId: sa.GetId(), FromSequence: 3})
		if err != nil {
			t.Fatal(err)
		}
		var later []*pb.AgentEvent
		for {
			r, err := w.Recv()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("WatchSubagent from 3: %v", err)
			}
			if ev := r.GetAgentEvent(); ev != nil {
				later = append(later, ev)
			}
		}
		checkSequences(t, later, 3)
		if len(later) != len(evs)-3 {
			t.Fatalf("from sequence 3: %d events, want %d", len(later), len(evs)-3)
		}
		list, err := svc.ListSubagents(ctx, &pb.ListSubagentsRequest{ParentSessionId: parent})
		if err != nil || len(list.GetSubagents()) != 1 {
			t.Fatalf("ListSubagents: %v, %v", list, err)
		}
		got := list.GetSubagents()[0]
		if got.GetStatus() != pb.SubagentStatus_SUBAGENT_STATUS_COMPLETED || got.GetResult() != text(evs) || got.GetUsage().GetOutputTokens() == 0 || got.GetFinishedAt() == nil {
			t.Fatalf("listed %v", got)
		}
		replayTurn(t, ctx, agent.API, got)
	})

	t.Run("auto_approve denies other tools", func(t *testing.T) {
		dir := agent.ProjectDir(t)
		resp, err := svc.SpawnSubagent(ctx, &pb.SpawnSubagentRequest{ParentSessionId: parent, Spec: &pb.SubagentSpec{
			Name: "reader", Prompt: "please RUNTOOL", WorkingDirectory: dir, AllowedTools: []string{"Read"}, AutoApprove: true}})
		if err != nil {
			t.Fatalf("SpawnSubagent: %v", err)
		}
		sa := waitSubagent(t, ctx, svc, resp.GetSubagent().GetId())
		evs := replayTurn(t, ctx, agent.API, sa)
		var asked, denied bool
		for _, ev := range evs {
			asked = asked || ev.GetPermissionRequest().GetToolName() == "Bash"
			denied = denied || (ev.GetToolCallResult() != nil && ev.GetToolCallResult().GetIsError())
		}
		if sa.GetStatus() != pb.SubagentStatus_SUBAGENT_STATUS_COMPLETED || !asked || !denied {
			t.Fatalf("subagent %v: Bash asked %v, denied %v", sa, asked, denied)
		}
		if _, err := os.Stat(filepath.Join(dir, fakeapi.ToolFile)); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("the denied command ran: %v", err)
		}
	})

	t.Run("third step after the first two", func(t *testing.T) {
		third := step("c", "summarise", "a", "b")
		third.IncludeDependencyResults = true
		created, err := svc.CreateOrchestration(ctx, &pb.CreateOrchestrationRequest{ParentSessionId: parent, Name: "fan-in",
			Steps: []*pb.OrchestrationStep{step("a", "STREAM 3"), step("b", "first THINK"), third}})
		if err != nil {
			t.Fatalf("CreateOrchestration: %v", err)
		}
		updates, final := watchOrch(t, ctx, svc, created.GetOrchestration().GetId(), nil)
		if final.GetStatus() != pb.OrchestrationStatus_ORCHESTRATION_STATUS_COMPLETED {
			t.Fatalf("final %v after %v", final, updates)
		}
		startC := slices.Index(updates, "c RUNNING")
		if startC < 0 || startC < slices.Index(updates, "a COMPLETED") || startC < slices.Index(updates, "b COMPLETED") {
			t.Fatalf("c started before a and b completed: %v", updates)
		}
		subs := subagentsOf(t, ctx, svc, final.GetId())
		if len(subs) != 3 {
			t.Fatalf("subagents %v", subs)
		}
		for _, id := range []string{"a", "b", "c"} {
			sa := subs[id]
			if sa.GetParentSessionId() != parent || sa.GetStatus() != pb.SubagentStatus_SUBAGENT_STATUS_COMPLETED {
				t.Fatalf("subagent of %s: %v", id, sa)
			}
			replayTurn(t, ctx, agent.API, sa)
		}
		// The third step's prompt carried the first two's results.
		var prompt string
		for _, r := range api.Requests() {
			if p := r.Prompt(); strings.HasPrefix(p, "summarise") {
				prompt = p
			}
		}
		if !strings.Contains(prompt, subs["a"].GetResult()) || !strings.Contains(prompt, fakeapi.ThoughtText) {
			t.Fatalf("prompt of c %q lacks the results of a (%q) and b", prompt, subs["a"].GetResult())
		}
	})

	t.Run("failing step skips its dependent", func(t *testing.T) {
		created, err := svc.CreateOrchestration(ctx, &pb.CreateOrchestrationRequest{ParentSessionId: parent,
			FailurePolicy: pb.FailurePolicy_FAILURE_POLICY_CONTINUE,
			Steps:         []*pb.OrchestrationStep{step("a", "ERR400 please"), step("b", "hello"), step("c", "summarise", "a", "b")}})
		if err != nil {
			t.Fatalf("CreateOrchestration: %v", err)
		}
		updates, final := watchOrch(t, ctx, svc, created.GetOrchestration().GetId(), nil)
		want := map[string]pb.SubagentStatus{"a": pb.SubagentStatus_SUBAGENT_STATUS_FAILED, "b": pb.SubagentStatus_SUBAGENT_STATUS_COMPLETED, "c": pb.SubagentStatus_SUBAGENT_STATUS_SKIPPED}
		if got := stepStatuses(final); final.GetStatus() != pb.OrchestrationStatus_ORCHESTRATION_STATUS_FAILED || !maps.Equal(got, want) {
			t.Fatalf("final %v %v after %v, want FAILED %v", final.GetStatus(), got, updates, want)
		}
		subs := subagentsOf(t, ctx, svc, final.GetId())
		if len(subs) != 2 || subs["a"].GetError() == "" {
			t.Fatalf("subagents %v: want a (failed, with its error) and b only", subs)
		}
		evs := replayTurn(t, ctx, agent.API, subs["a"])
		if !slices.ContainsFunc(evs, func(ev *pb.AgentEvent) bool { return ev.GetError() != nil }) {
			t.Fatalf("the failed step's replay has no ErrorEvent")
		}
	})

	t.Run("cancel midway", func(t *testing.T) {
		created, err := svc.CreateOrchestration(ctx, &pb.CreateOrchestrationRequest{ParentSessionId: parent,
			Steps: []*pb.OrchestrationStep{step("a", "STALL one"), step("b", "STALL two"), step("c", "summarise", "a")}})
		if err != nil {
			t.Fatalf("CreateOrchestration: %v", err)
		}
		id := created.GetOrchestration().GetId()
		// Both stalled turns have reached the model: cancel then.
		if _, err := api.Wait(ctx, func(reqs []fakeapi.Request) bool {
			return slices.ContainsFunc(reqs, func(r fakeapi.Request) bool { return r.Prompt() == "STALL one" }) &&
				slices.ContainsFunc(reqs, func(r fakeapi.Request) bool { return r.Prompt() == "STALL two" })
		}); err != nil {
			t.Fatal(err)
		}
		resp, err := svc.CancelOrchestration(ctx, &pb.CancelOrchestrationRequest{OrchestrationId: id, Reason: "test"})
		if err != nil {
			t.Fatalf("CancelOrchestration: %v", err)
		}
		o := resp.GetOrchestration()
		want := map[string]pb.SubagentStatus{"a": pb.SubagentStatus_SUBAGENT_STATUS_CANCELLED, "b": pb.SubagentStatus_SUBAGENT_STATUS_CANCELLED, "c": pb.SubagentStatus_SUBAGENT_STATUS_CANCELLED}
		if got := stepStatuses(o); o.GetStatus() != pb.OrchestrationStatus_ORCHESTRATION_STATUS_CANCELLED || !maps.Equal(got, want) {
			t.Fatalf("after cancel %v %v, want CANCELLED %v", o.GetStatus(), got, want)
		}
		subs := subagentsOf(t, ctx, svc, id)
		for _, s := range []string{"a", "b"} {
			evs := replayTurn(t, ctx, agent.API, subs[s])
			if tc := last(filter(evs, isTurnComplete)).GetTurnComplete(); tc.GetStopReason() != "cancelled" {
				t.Fatalf("step %s's turn ended %q, want cancelled", s, tc.GetStopReason())
			}
		}
		if _, ok := subs["c"]; ok {
			t.Fatalf("the dependent step started: %v", subs["c"])
		}
	})

	t.Run("invalid plans", func(t *testing.T) {
		for _, tc := range []struct {
			name  string
			steps []*pb.OrchestrationStep
			want  string
		}{
			{"cycle", []*pb.OrchestrationStep{step("a", "x", "b"), step("b", "y", "a")}, "dependency cycle: a -> b -> a"},
			{"unknown dependency", []*pb.OrchestrationStep{step("a", "x", "nope")}, `step "a" depends on unknown step "nope"`},
		} {
			_, err := svc.CreateOrchestration(ctx, &pb.CreateOrchestrationRequest{ParentSessionId: parent, Steps: tc.steps})
			wantStatus(t, tc.name, err, codes.InvalidArgument, "DAG_CYCLE")
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%s: %v lacks %q", tc.name, err, tc.want)
			}
		}
		_, err := svc.SpawnSubagent(ctx, &pb.SpawnSubagentRequest{ParentSessionId: parent, Spec: &pb.SubagentSpec{Prompt: "x", AutoApprove: true}})
		wantStatus(t, "auto_approve without tools", err, codes.InvalidArgument, "INVALID_PERMISSION_CONFIG")
		_, err = svc.SpawnSubagent(ctx, &pb.SpawnSubagentRequest{ParentSessionId: "no-such-session", Spec: &pb.SubagentSpec{Prompt: "x"}})
		wantStatus(t, "unknown parent", err, codes.NotFound, "SESSION_NOT_FOUND")
	})
}

// TestSubagentCostLimit: once the steps cost more than
// --subagent-max-cost-usd, no further step starts.
func TestSubagentCostLimit(t *testing.T) {
	api := testenv.FakeAPI(t)
	agent := testenv.StartAgent(t, testenv.AgentOptions{APIURL: api.URL(),
		Args: []string{"--feature-flag", server.SubagentOrchestration, "--subagent-max-cost-usd", "0.000001"}})
	svc := pb.NewSubagentServiceClient(agent.Conn)
	ctx := ctxT(t)
	parent := startSession(t, ctx, agent.API, &pb.StartSessionRequest{WorkingDirectory: agent.ProjectDir(t)}).GetSession().GetId()
	created, err := svc.CreateOrchestration(ctx, &pb.CreateOrchestrationRequest{ParentSessionId: parent,
		Steps: []*pb.OrchestrationStep{step("a", "hello"), step("b", "hello again", "a")}})
	if err != nil {
		t.Fatalf("CreateOrchestration: %v", err)
	}
	updates, final := watchOrch(t, ctx, svc, created.GetOrchestration().GetId(), nil)
	want := map[string]pb.SubagentStatus{"a": pb.SubagentStatus_SUBAGENT_STATUS_COMPLETED, "b": pb.SubagentStatus_SUBAGENT_STATUS_CANCELLED}
	if got := stepStatuses(final); final.GetStatus() != pb.OrchestrationStatus_ORCHESTRATION_STATUS_FAILED || !maps.Equal(got, want) {
		t.Fatalf("final %v %v after %v, want FAILED %v", final.GetStatus(), got, updates, want)
	}
	subs := subagentsOf(t, ctx, svc, final.GetId())
	if len(subs) != 1 || subs["a"].GetUsage().GetCostUsd() <= 0 {
		t.Fatalf("subagents %v: want only a, with a cost", subs)
	}
}

// TestSubagentServiceOffByDefault: without the flag every call is refused
// with UNIMPLEMENTED and the flag is not granted.
func TestSubagentServiceOffByDefault(t *testing.T) {
	api := testenv.FakeAPI(t)
	agent := testenv.StartAgent(t, testenv.AgentOptions{APIURL: api.URL()})
	svc := pb.NewSubagentServiceClient(agent.Conn)
	ctx := ctxT(t)
	_, err := svc.SpawnSubagent(ctx, &pb.SpawnSubagentRequest{ParentSessionId: "x", Spec: &pb.SubagentSpec{Prompt: "hi"}})
	wantStatus(t, "SpawnSubagent", err, codes.Unimplemented, server.CodeNotImplemented)
	if !strings.Contains(err.Error(), "--feature-flag subagent_orchestration") {
		t.Fatalf("the refusal %q does not say how to turn the flag on", err)
	}
	_, err = svc.CreateOrchestration(ctx, &pb.CreateOrchestrationRequest{ParentSessionId: "x"})
	wantStatus(t, "CreateOrchestration", err, codes.Unimplemented, server.CodeNotImplemented)
	w, err := svc.WatchSubagent(ctx, &pb.WatchSubagentRequest{SubagentId: "x"})
	if err == nil {
		_, err = w.Recv()
	}
	wantStatus(t, "WatchSubagent", err, codes.Unimplemented, server.CodeNotImplemented)
	neg, err := pb.NewVersionServiceClient(agent.Conn).NegotiateCapabilities(ctx, &pb.NegotiateRequest{ClientVersion: "0.2.0", RequestedFeatures: []string{server.SubagentOrchestration}})
	if err != nil || slices.Contains(neg.GetGrantedFeatures(), server.SubagentOrchestration) || neg.GetCapabilities().GetSubagentsEnabled() {
		t.Fatalf("NegotiateCapabilities with the flag off: %v, %v", neg, err)
	}
}

// TestUnknownFeatureFlag: the agent refuses to start with a flag it does
// not have, naming the ones it has.
func TestUnknownFeatureFlag(t *testing.T) {
	bins := testenv.Binaries(t)
	cmd := exec.CommandContext(ctxT(t), bins.Agent, "serve", "--listen", "unix://"+filepath.Join(t.TempDir(), "a.sock"),
		"--data-dir", t.TempDir(), "--claude-bin", testenv.RealClaude(t), "--http-listen", "", "--feature-flag", "no_such_flag")
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || !strings.Contains(string(out), `feature flag "no_such_flag" does not exist`) || !strings.Contains(string(out), server.SubagentOrchestration) {
		t.Fatalf("serve --feature-flag no_such_flag: %v\n%s", err, out)
	}
}

func filter(evs []*pb.AgentEvent, keep func(*pb.AgentEvent) bool) []*pb.AgentEvent {
	var out []*pb.AgentEvent
	for _, ev := range evs {
		if keep(ev) {
			out = append(out, ev)
		}
	}
	return out
}
