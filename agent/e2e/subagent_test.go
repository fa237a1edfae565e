package e2e

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
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

// flakyAPI is the fake model, except that the first session asking with
// the word FLAKY gets HTTP 400 on every request (an error the CLI gives
// up on): the first attempt of a FLAKY step fails, its retry (a new
// session) does not.
func flakyAPI(t *testing.T) *fakeapi.Server {
	t.Helper()
	var mu sync.Mutex
	failing := ""
	api, err := fakeapi.Start(fakeapi.Config{Responder: func(r *fakeapi.Request) fakeapi.Reply {
		if r.MainLoop() && strings.Contains(r.Prompt(), "FLAKY") {
			id := r.Header.Get("X-Claude-Code-Session-Id")
			mu.Lock()
			if failing == "" {
				failing = id
			}
			fail := failing == id
			mu.Unlock()
			if fail {
				return fakeapi.Reply{Status: http.StatusBadRequest}
			}
		}
		return fakeapi.KeywordReply(r)
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { api.Close() })
	return api
}

// replayFrom checks that a subagent's session replays by sequence: all of
// it, then from the middle exactly the later events.
func replayFrom(t *testing.T, ctx context.Context, api pb.AgentServiceClient, sa *pb.Subagent) []*pb.AgentEvent {
	t.Helper()
	all := replayTurn(t, ctx, api, sa)
	mid := uint64(len(all) / 2)
	r, err := api.ResumeSession(ctx, &pb.ResumeSessionRequest{SessionId: sa.GetSessionId(), FromSequence: mid})
	if err != nil {
		t.Fatal(err)
	}
	later := drain(t, r)
	checkSequences(t, later, mid)
	if len(later) != len(all)-int(mid) {
		t.Fatalf("subagent %s from sequence %d: %d events, want %d", sa.GetName(), mid, len(later), len(all)-int(mid))
	}
	return all
}

// TestSubagentRetryCancelAndRestart: a fan-in orchestration whose second
// step fails its first attempt and completes on retry, a cancel midway of
// another one, every subagent's events replayable by sequence, and a
// restart of the agent (SIGKILL, as a crash) that keeps it all and reports
// the orchestration it interrupted.
func TestSubagentRetryCancelAndRestart(t *testing.T) {
	api := flakyAPI(t)
	agent := testenv.StartAgent(t, testenv.AgentOptions{APIURL: api.URL(), Args: []string{"--feature-flag", server.SubagentOrchestration}})
	svc := pb.NewSubagentServiceClient(agent.Conn)
	ctx := testenv.Ctx(t, 5*time.Minute)
	parent := startSession(t, ctx, agent.API, &pb.StartSessionRequest{WorkingDirectory: agent.ProjectDir(t), Name: "coordinator"}).GetSession().GetId()

	// 1. Three steps, the third after the first two, with their results;
	// b fails once and is retried.
	flaky := step("b", "FLAKY please")
	flaky.MaxAttempts = 2
	third := step("c", "summarise", "a", "b")
	third.IncludeDependencyResults = true
	created, err := svc.CreateOrchestration(ctx, &pb.CreateOrchestrationRequest{ParentSessionId: parent, Name: "fan-in with a retry",
		Steps: []*pb.OrchestrationStep{step("a", "STREAM 3"), flaky, third}})
	if err != nil {
		t.Fatalf("CreateOrchestration: %v", err)
	}
	fanIn := created.GetOrchestration().GetId()
	var bUpdates []*pb.OrchestrationStepState
	updates, final := watchOrch(t, ctx, svc, fanIn, func(u *pb.OrchestrationStepState) {
		if u.GetStepId() == "b" {
			bUpdates = append(bUpdates, u)
		}
	})
	if final.GetStatus() != pb.OrchestrationStatus_ORCHESTRATION_STATUS_COMPLETED {
		t.Fatalf("final %v after %v", final, updates)
	}
	if b := final.GetSteps()[1]; b.GetAttempt() != 2 || b.GetError() != "" || b.GetStatus() != pb.SubagentStatus_SUBAGENT_STATUS_COMPLETED {
		t.Fatalf("step b %v, want completed at attempt 2", b)
	}
	retried := slices.IndexFunc(bUpdates, func(u *pb.OrchestrationStepState) bool {
		return u.GetStatus() == pb.SubagentStatus_SUBAGENT_STATUS_PENDING && u.GetAttempt() == 1 && strings.Contains(u.GetError(), "400")
	})
	second := slices.IndexFunc(bUpdates, func(u *pb.OrchestrationStepState) bool {
		return u.GetStatus() == pb.SubagentStatus_SUBAGENT_STATUS_RUNNING && u.GetAttempt() == 2
	})
	if retried < 0 || second < retried {
		t.Fatalf("updates of b %v: want attempt 1's failure (PENDING, with its error) and then attempt 2 running", bUpdates)
	}
	if startC := slices.Index(updates, "c RUNNING"); startC < slices.Index(updates, "a COMPLETED") || startC < slices.Index(updates, "b COMPLETED") {
		t.Fatalf("c started before a and b's last attempt completed: %v", updates)
	}
	list, err := svc.ListSubagents(ctx, &pb.ListSubagentsRequest{OrchestrationId: fanIn})
	if err != nil || len(list.GetSubagents()) != 4 {
		t.Fatalf("subagents of the orchestration: %v, %v; want a, b twice, c", list, err)
	}
	before := list.GetSubagents()
	byStep := map[string][]*pb.Subagent{}
	for _, sa := range before {
		byStep[sa.GetStepId()] = append(byStep[sa.GetStepId()], sa)
		replayFrom(t, ctx, agent.API, sa)
	}
	if b := byStep["b"]; len(b) != 2 || b[0].GetAttempt() != 1 || b[0].GetStatus() != pb.SubagentStatus_SUBAGENT_STATUS_FAILED || b[0].GetError() == "" ||
		b[1].GetAttempt() != 2 || b[1].GetStatus() != pb.SubagentStatus_SUBAGENT_STATUS_COMPLETED {
		t.Fatalf("subagents of b %v, want attempt 1 failed and attempt 2 completed", b)
	}
	prompt := promptStarting(api, "summarise")
	if !strings.Contains(prompt, byStep["a"][0].GetResult()) || !strings.Contains(prompt, byStep["b"][1].GetResult()) {
		t.Fatalf("prompt of c %q lacks the results of a and b", prompt)
	}

	// 2. Cancel another orchestration midway.
	created, err = svc.CreateOrchestration(ctx, &pb.CreateOrchestrationRequest{ParentSessionId: parent, Name: "cancelled",
		Steps: []*pb.OrchestrationStep{step("x", "STALL one"), step("y", "STALL two"), step("z", "summarise", "x")}})
	if err != nil {
		t.Fatalf("CreateOrchestration: %v", err)
	}
	cancelled := created.GetOrchestration().GetId()
	waitPrompts(t, ctx, api, "STALL one", "STALL two")
	resp, err := svc.CancelOrchestration(ctx, &pb.CancelOrchestrationRequest{OrchestrationId: cancelled, Reason: "test"})
	if err != nil || resp.GetOrchestration().GetStatus() != pb.OrchestrationStatus_ORCHESTRATION_STATUS_CANCELLED {
		t.Fatalf("CancelOrchestration: %v, %v", resp, err)
	}
	for _, sa := range subagentsOf(t, ctx, svc, cancelled) {
		evs := replayFrom(t, ctx, agent.API, sa)
		if tc := last(filter(evs, isTurnComplete)).GetTurnComplete(); tc.GetStopReason() != "cancelled" {
			t.Fatalf("step %s's turn ended %q, want cancelled", sa.GetStepId(), tc.GetStopReason())
		}
	}

	// 3. A third runs when the agent dies; the restarted agent keeps the
	// first two and reports the third interrupted.
	created, err = svc.CreateOrchestration(ctx, &pb.CreateOrchestrationRequest{ParentSessionId: parent, Name: "interrupted",
		Steps: []*pb.OrchestrationStep{step("s", "STALL until the restart"), step("t", "hello", "s")}})
	if err != nil {
		t.Fatalf("CreateOrchestration: %v", err)
	}
	interrupted := created.GetOrchestration().GetId()
	waitPrompts(t, ctx, api, "STALL until the restart")
	agent = agent.Restart(t)
	svc = pb.NewSubagentServiceClient(agent.Conn)

	orchs, err := svc.ListOrchestrations(ctx, &pb.ListOrchestrationsRequest{ParentSessionId: parent})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, o := range orchs.GetOrchestrations() {
		ids = append(ids, o.GetId())
	}
	if !slices.Equal(ids, []string{fanIn, cancelled, interrupted}) {
		t.Fatalf("orchestrations after the restart %v, want %v (oldest first)", ids, []string{fanIn, cancelled, interrupted})
	}
	got := orchs.GetOrchestrations()
	if got[0].GetStatus() != pb.OrchestrationStatus_ORCHESTRATION_STATUS_COMPLETED || got[0].GetSteps()[1].GetAttempt() != 2 ||
		got[1].GetStatus() != pb.OrchestrationStatus_ORCHESTRATION_STATUS_CANCELLED {
		t.Fatalf("ended orchestrations after the restart: %v", got[:2])
	}
	want := map[string]pb.SubagentStatus{"s": pb.SubagentStatus_SUBAGENT_STATUS_FAILED, "t": pb.SubagentStatus_SUBAGENT_STATUS_CANCELLED}
	if o := got[2]; o.GetStatus() != pb.OrchestrationStatus_ORCHESTRATION_STATUS_FAILED || !maps.Equal(stepStatuses(o), want) ||
		o.GetSteps()[0].GetError() != "interrupted by an agent restart" {
		t.Fatalf("interrupted orchestration %v, want FAILED %v", o, want)
	}
	after, err := svc.ListSubagents(ctx, &pb.ListSubagentsRequest{OrchestrationId: fanIn})
	if err != nil || len(after.GetSubagents()) != len(before) {
		t.Fatalf("subagents after the restart: %v, %v", after, err)
	}
	for i, sa := range after.GetSubagents() {
		b := before[i]
		if sa.GetId() != b.GetId() || sa.GetStatus() != b.GetStatus() || sa.GetResult() != b.GetResult() || sa.GetAttempt() != b.GetAttempt() ||
			sa.GetError() != b.GetError() || sa.GetUsage().GetOutputTokens() != b.GetUsage().GetOutputTokens() {
			t.Fatalf("subagent after the restart %v, before %v", sa, b)
		}
		replayFrom(t, ctx, agent.API, sa)
	}
	s := subagentsOf(t, ctx, svc, interrupted)["s"]
	if s.GetStatus() != pb.SubagentStatus_SUBAGENT_STATUS_FAILED || s.GetError() != "interrupted by an agent restart" {
		t.Fatalf("interrupted subagent %v", s)
	}
	// Its watch replays what it did and ends with its status.
	w, err := svc.WatchSubagent(ctx, &pb.WatchSubagentRequest{SubagentId: s.GetId()})
	if err != nil {
		t.Fatal(err)
	}
	var evs []*pb.AgentEvent
	var lastChange *pb.SubagentStatusChange
	for {
		r, err := w.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("WatchSubagent after the restart: %v", err)
		}
		if ev := r.GetAgentEvent(); ev != nil {
			evs = append(evs, ev)
		}
		if c := r.GetStatusChange(); c != nil {
			lastChange = c
		}
	}
	checkSequences(t, evs, 0)
	if len(evs) == 0 || lastChange.GetStatus() != pb.SubagentStatus_SUBAGENT_STATUS_FAILED {
		t.Fatalf("watch of the interrupted subagent: %d events, last change %v", len(evs), lastChange)
	}
}

// promptStarting is the latest prompt the fake model got that starts with p.
func promptStarting(api *fakeapi.Server, p string) string {
	var out string
	for _, r := range api.Requests() {
		if q := r.Prompt(); strings.HasPrefix(q, p) {
			out = q
		}
	}
	return out
}

// waitPrompts waits until each prompt reached the fake model.
func waitPrompts(t *testing.T, ctx context.Context, api *fakeapi.Server, prompts ...string) {
	t.Helper()
	if err := api.WaitPrompts(ctx, prompts...); err != nil {
		t.Fatal(err)
	}
}
