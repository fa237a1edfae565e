package subagent

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/betcode-dev/betcode/agent/internal/testenv"
	"github.com/betcode-dev/betcode/agent/openaiapi"
	"github.com/betcode-dev/betcode/agent/server"
	"github.com/betcode-dev/betcode/agent/worktree"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/fakeapi"
	"github.com/betcode-dev/betcode/shared/fakeopenai"
)

// mapSpecs is a SpecResolver over a map.
type mapSpecs map[string]TeammateTemplate

func (m mapSpecs) Teammate(_ context.Context, id string) (TeammateTemplate, error) {
	if t, ok := m[id]; ok {
		return t, nil
	}
	return TeammateTemplate{}, ErrSpecNotFound
}

func spawnAndWait(t *testing.T, svc *Service, parent string, spec *pb.SubagentSpec) *pb.Subagent {
	t.Helper()
	resp, err := svc.SpawnSubagent(testenv.Ctx(t, 30*time.Second), &pb.SpawnSubagentRequest{ParentSessionId: parent, Spec: spec})
	if err != nil {
		t.Fatalf("SpawnSubagent: %v", err)
	}
	return waitDone(t, svc, resp.GetSubagent().GetId())
}

// promptOf returns the latest prompt the fake model got that contains s.
func promptOf(f *fakeapi.Server, s string) string {
	var out string
	for _, r := range f.Requests() {
		if p := r.Prompt(); strings.Contains(p, s) {
			out = p
		}
	}
	return out
}

func TestMaxTurns(t *testing.T) {
	svc, parent := newService(t, Options{})
	ctx := testenv.Ctx(t, 30*time.Second)
	t.Run("the limit fails the subagent", func(t *testing.T) {
		sa := spawnAndWait(t, svc, parent, &pb.SubagentSpec{Name: "bounded", Prompt: "please RUNTOOL", AllowedTools: []string{"Bash"}, MaxTurns: 1})
		if sa.GetStatus() != stFailed || sa.GetError() != "stopped by its turn limit (max_turns 1) before finishing" {
			t.Fatalf("subagent %v, want FAILED by its turn limit", sa)
		}
	})
	t.Run("a limit that is not reached", func(t *testing.T) {
		if sa := spawnAndWait(t, svc, parent, &pb.SubagentSpec{Prompt: "hello", MaxTurns: 2}); sa.GetStatus() != stCompleted {
			t.Fatalf("subagent %v, want COMPLETED", sa)
		}
	})
	t.Run("a provider that cannot is refused", func(t *testing.T) {
		_, err := svc.SpawnSubagent(ctx, &pb.SpawnSubagentRequest{ParentSessionId: parent,
			Spec: &pb.SubagentSpec{Prompt: "hello", MaxTurns: 2, Provider: pb.SessionProvider_SESSION_PROVIDER_CODEX}})
		wantCode(t, "max_turns with codex", err, codes.InvalidArgument, server.CodeInvalidArgument)
		if !strings.Contains(err.Error(), "provider codex cannot bound") {
			t.Fatalf("%v does not name the provider", err)
		}
	})
}

func TestTeammateSpecs(t *testing.T) {
	e := newEnv(t)
	svc := e.service(Options{Specs: mapSpecs{
		"rev": {Name: "reviewer", Model: "claude-sonnet-4-5", Preamble: "Role: Code reviewer\n\nReview carefully."},
	}})
	ctx := testenv.Ctx(t, 30*time.Second)
	tests := []struct {
		name      string
		spec      *pb.SubagentSpec
		wantName  string
		wantModel string
	}{
		{"the spec's name and model", &pb.SubagentSpec{TeammateSpecId: "rev", Prompt: "hello one"}, "reviewer", "claude-sonnet-4-5"},
		{"the subagent's own win", &pb.SubagentSpec{TeammateSpecId: "rev", Prompt: "hello two", Name: "mine", Model: "claude-haiku-4-5"}, "mine", "claude-haiku-4-5"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sa := spawnAndWait(t, svc, e.parent, tt.spec)
			sess, err := e.m.Get(ctx, sa.GetSessionId())
			if err != nil {
				t.Fatal(err)
			}
			if sa.GetStatus() != stCompleted || sa.GetName() != tt.wantName || sess.Meta().Model != tt.wantModel || sess.Metadata()[MetaTeammateSpec] != "rev" {
				t.Fatalf("subagent %v, session model %q, metadata %v", sa, sess.Meta().Model, sess.Metadata())
			}
			want := "Role: Code reviewer\n\nReview carefully.\n\n" + tt.spec.GetPrompt()
			if p := promptOf(e.fake, tt.spec.GetPrompt()); p != want {
				t.Fatalf("prompt %q, want %q", p, want)
			}
		})
	}
	_, err := svc.SpawnSubagent(ctx, &pb.SpawnSubagentRequest{ParentSessionId: e.parent, Spec: &pb.SubagentSpec{TeammateSpecId: "nope", Prompt: "x"}})
	wantCode(t, "unknown spec", err, codes.NotFound, CodeSpecNotFound)
	_, err = svc.CreateOrchestration(ctx, &pb.CreateOrchestrationRequest{ParentSessionId: e.parent,
		Steps: []*pb.OrchestrationStep{{Id: "a", Spec: &pb.SubagentSpec{TeammateSpecId: "nope", Prompt: "x"}}}})
	wantCode(t, "unknown spec in a plan", err, codes.NotFound, CodeSpecNotFound)
	if !strings.Contains(err.Error(), "step a") {
		t.Fatalf("%v does not name the step", err)
	}

	bare := e.service(Options{})
	_, err = bare.SpawnSubagent(ctx, &pb.SpawnSubagentRequest{ParentSessionId: e.parent, Spec: &pb.SubagentSpec{TeammateSpecId: "rev", Prompt: "x"}})
	wantCode(t, "no resolver", err, codes.FailedPrecondition, CodeSpecsUnavailable)
}

// gitRepo makes a repository with one commit in a new directory.
func gitRepo(t *testing.T, parent string) string {
	t.Helper()
	dir := filepath.Join(parent, "repo")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "--allow-empty", "-m", "first"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	return dir
}

func TestCreateWorktree(t *testing.T) {
	e := newEnv(t)
	wts := worktree.New(worktree.Options{Store: e.m.Log()})
	e.m.SetWorktrees(wts)
	svc := e.service(Options{Worktrees: wts})
	ctx := testenv.Ctx(t, 30*time.Second)

	_, err := svc.SpawnSubagent(ctx, &pb.SpawnSubagentRequest{ParentSessionId: e.parent, Spec: &pb.SubagentSpec{Name: "x", Prompt: "hello", CreateWorktree: true}})
	wantCode(t, "create_worktree outside a repository", err, codes.FailedPrecondition, CodeNotARepository)
	if !strings.Contains(err.Error(), e.home+" is not in a git repository") {
		t.Fatalf("%v does not say which directory", err)
	}
	_, err = svc.SpawnSubagent(ctx, &pb.SpawnSubagentRequest{ParentSessionId: e.parent, Spec: &pb.SubagentSpec{Prompt: "hello", CreateWorktree: true, WorktreeId: "wt-0123456789abcdef"}})
	wantCode(t, "create_worktree and worktree_id", err, codes.InvalidArgument, server.CodeInvalidArgument)

	_, err = e.service(Options{}).SpawnSubagent(ctx, &pb.SpawnSubagentRequest{ParentSessionId: e.parent, Spec: &pb.SubagentSpec{Prompt: "hello", CreateWorktree: true}})
	wantCode(t, "create_worktree without worktrees", err, codes.Unimplemented, server.CodeNotImplemented)

	repo := gitRepo(t, t.TempDir())
	sa := spawnAndWait(t, svc, e.parent, &pb.SubagentSpec{Name: "Fix parser", Prompt: "hello", WorkingDirectory: repo, CreateWorktree: true})
	if sa.GetStatus() != stCompleted || sa.GetWorktreeId() == "" {
		t.Fatalf("subagent %v, want COMPLETED in a worktree", sa)
	}
	short, _, _ := strings.Cut(sa.GetId(), "-")
	branch := "subagent/fix-parser-" + short
	list, err := wts.ListWorktrees(ctx, &pb.ListWorktreesRequest{RepoPath: repo})
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(list.GetWorktrees(), func(w *pb.WorktreeInfo) bool { return w.GetId() == sa.GetWorktreeId() })
	if i < 0 {
		t.Fatalf("worktree %s not listed (kept after the subagent ended): %v", sa.GetWorktreeId(), list)
	}
	wt := list.GetWorktrees()[i]
	if wt.GetBranch() != branch || filepath.Dir(wt.GetPath()) != filepath.Join(filepath.Dir(repo), "repo.worktrees") {
		t.Fatalf("worktree %v, want branch %s beside the repository", wt, branch)
	}
	sess, err := e.m.Get(ctx, sa.GetSessionId())
	if err != nil {
		t.Fatal(err)
	}
	if sess.Meta().WorkingDirectory != wt.GetPath() || sess.Meta().WorktreeID != wt.GetId() {
		t.Fatalf("session ran in %q (%q), want the worktree %v", sess.Meta().WorkingDirectory, sess.Meta().WorktreeID, wt)
	}
}

func TestPerSubagentProvider(t *testing.T) {
	oai, err := fakeopenai.Start(fakeopenai.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = oai.Close() })
	e := newEnv(t, &openaiapi.Provider{BaseURL: oai.BaseURL(), Home: t.TempDir()})
	svc := e.service(Options{})
	ctx := testenv.Ctx(t, 30*time.Second)
	tests := []struct {
		name string
		spec *pb.SubagentSpec
		want pb.SessionProvider
	}{
		{"the parent's", &pb.SubagentSpec{Prompt: "hello"}, pb.SessionProvider_SESSION_PROVIDER_CLAUDE_CODE},
		{"its own, with max_turns", &pb.SubagentSpec{Prompt: "hello", Provider: pb.SessionProvider_SESSION_PROVIDER_OPENAI_API,
			ProviderConfig: map[string]string{}, MaxTurns: 3}, pb.SessionProvider_SESSION_PROVIDER_OPENAI_API},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sa := spawnAndWait(t, svc, e.parent, tt.spec)
			if sa.GetStatus() != stCompleted || sa.GetProvider() != tt.want || sa.GetResult() == "" {
				t.Fatalf("subagent %v, want COMPLETED with provider %v", sa, tt.want)
			}
		})
	}
	_, err = svc.SpawnSubagent(ctx, &pb.SpawnSubagentRequest{ParentSessionId: e.parent, Spec: &pb.SubagentSpec{Prompt: "x", ProviderConfig: map[string]string{"agent": "a"}}})
	wantCode(t, "provider_config without provider", err, codes.InvalidArgument, server.CodeInvalidArgument)
	_, err = svc.SpawnSubagent(ctx, &pb.SpawnSubagentRequest{ParentSessionId: e.parent, Spec: &pb.SubagentSpec{Prompt: "x", Provider: pb.SessionProvider_SESSION_PROVIDER_CODEX}})
	if err == nil {
		t.Fatal("a subagent with an unregistered provider was spawned")
	}
}

func TestCreateOrchestrationRefuses(t *testing.T) {
	svc, parent := newService(t, Options{})
	ctx := testenv.Ctx(t, 30*time.Second)
	tests := []struct {
		name string
		step *pb.OrchestrationStep
		c    codes.Code
		code string
		msg  string
	}{
		{"too many attempts", &pb.OrchestrationStep{Id: "a", MaxAttempts: 6, Spec: &pb.SubagentSpec{Prompt: "x"}},
			codes.InvalidArgument, server.CodeInvalidArgument, "step a: max_attempts 6 is more than 5"},
		{"max_turns with codex", &pb.OrchestrationStep{Id: "a", Spec: &pb.SubagentSpec{Prompt: "x", MaxTurns: 1, Provider: pb.SessionProvider_SESSION_PROVIDER_CODEX}},
			codes.InvalidArgument, server.CodeInvalidArgument, "step a: max_turns 1: provider codex cannot bound"},
		{"teammate spec without resolver", &pb.OrchestrationStep{Id: "a", Spec: &pb.SubagentSpec{Prompt: "x", TeammateSpecId: "t"}},
			codes.FailedPrecondition, CodeSpecsUnavailable, "step a: teammate_spec_id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := svc.CreateOrchestration(ctx, &pb.CreateOrchestrationRequest{ParentSessionId: parent, Steps: []*pb.OrchestrationStep{tt.step}})
			wantCode(t, tt.name, err, tt.c, tt.code)
			if !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("%v lacks %q", err, tt.msg)
			}
		})
	}
	if list, err := svc.ListOrchestrations(ctx, &pb.ListOrchestrationsRequest{}); err != nil || len(list.GetOrchestrations()) != 0 {
		t.Fatalf("refused plans are listed: %v, %v", list, err)
	}
}

// A restarted agent lists what the previous one did: ended subagents as
// they ended, running ones FAILED as interrupted, their orchestration
// FAILED, and their sessions' events replayable.
func TestRestartKeepsState(t *testing.T) {
	e := newEnv(t)
	svc := e.service(Options{})
	ctx := testenv.Ctx(t, 60*time.Second)
	done := spawnAndWait(t, svc, e.parent, &pb.SubagentSpec{Name: "done", Prompt: "STREAM 3"})
	stalled, err := svc.SpawnSubagent(ctx, &pb.SpawnSubagentRequest{ParentSessionId: e.parent, Spec: &pb.SubagentSpec{Name: "stalled", Prompt: "STALL alone"}})
	if err != nil {
		t.Fatal(err)
	}
	created, err := svc.CreateOrchestration(ctx, &pb.CreateOrchestrationRequest{ParentSessionId: e.parent, Name: "interrupted",
		Steps: []*pb.OrchestrationStep{{Id: "a", Spec: &pb.SubagentSpec{Prompt: "STALL step"}}, {Id: "b", DependsOn: []string{"a"}, Spec: &pb.SubagentSpec{Prompt: "hello"}}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.fake.Wait(ctx, func(reqs []fakeapi.Request) bool {
		return slices.ContainsFunc(reqs, func(r fakeapi.Request) bool { return r.Prompt() == "STALL alone" }) &&
			slices.ContainsFunc(reqs, func(r fakeapi.Request) bool { return r.Prompt() == "STALL step" })
	}); err != nil {
		t.Fatal(err)
	}
	// The agent stops as the daemon does: the manager, then the service.
	if err := e.m.Close(ctx); err != nil {
		t.Fatal(err)
	}
	svc.Close()

	e.open()
	again := e.service(Options{})
	list, err := again.ListSubagents(ctx, &pb.ListSubagentsRequest{ParentSessionId: e.parent})
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*pb.Subagent{}
	for _, sa := range list.GetSubagents() {
		byName[sa.GetName()] = sa
	}
	if got := byName["done"]; got.GetStatus() != stCompleted || got.GetResult() != done.GetResult() || got.GetUsage().GetOutputTokens() == 0 {
		t.Fatalf("completed subagent after the restart %v, before %v", got, done)
	}
	for _, name := range []string{"stalled", "a"} {
		if got := byName[name]; got.GetStatus() != stFailed || got.GetError() != errInterrupted {
			t.Fatalf("subagent %s after the restart: %v, want FAILED %q", name, got, errInterrupted)
		}
	}
	if byName["stalled"].GetId() != stalled.GetSubagent().GetId() || byName["a"].GetAttempt() != 1 {
		t.Fatalf("subagents %v", byName)
	}
	orchs, err := again.ListOrchestrations(ctx, &pb.ListOrchestrationsRequest{ParentSessionId: e.parent})
	if err != nil || len(orchs.GetOrchestrations()) != 1 {
		t.Fatalf("orchestrations %v, %v", orchs, err)
	}
	o := orchs.GetOrchestrations()[0]
	if o.GetId() != created.GetOrchestration().GetId() || o.GetStatus() != pb.OrchestrationStatus_ORCHESTRATION_STATUS_FAILED ||
		stepState(o, "a").GetStatus() != stFailed || stepState(o, "a").GetError() != errInterrupted || stepState(o, "b").GetStatus() != stCancelled {
		t.Fatalf("orchestration after the restart %v", o)
	}
	sess, err := e.m.Get(ctx, byName["stalled"].GetSessionId())
	if err != nil {
		t.Fatal(err)
	}
	if md := sess.Metadata(); md[MetaStatus] != "failed" || md[MetaError] != errInterrupted {
		t.Fatalf("session metadata %v", md)
	}
	// Its events replay, from a sequence too, and the watch ends with its
	// terminal status.
	for _, from := range []uint64{0, 1} {
		w := &watchRecorder{ctx: ctx}
		if err := again.WatchSubagent(&pb.WatchSubagentRequest{SubagentId: byName["done"].GetId(), FromSequence: from}, w); err != nil {
			t.Fatalf("WatchSubagent from %d: %v", from, err)
		}
		evs, last := w.events(), w.last()
		if len(evs) == 0 || evs[0].GetSequence() != from+1 || last.GetStatusChange().GetStatus() != stCompleted {
			t.Fatalf("watch from %d: %d events from %d, last %v", from, len(evs), evs[0].GetSequence(), last)
		}
	}
	if _, err := again.CancelOrchestration(ctx, &pb.CancelOrchestrationRequest{OrchestrationId: o.GetId()}); err != nil {
		t.Fatalf("CancelOrchestration of an ended orchestration: %v", err)
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatal("out of time")
	}
}
