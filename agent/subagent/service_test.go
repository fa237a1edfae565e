package subagent

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/betcode-dev/betcode/agent/claude"
	"github.com/betcode-dev/betcode/agent/internal/testenv"
	"github.com/betcode-dev/betcode/agent/provider"
	"github.com/betcode-dev/betcode/agent/server"
	"github.com/betcode-dev/betcode/agent/session"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/claudecli"
	"github.com/betcode-dev/betcode/shared/fakeapi"
)

// env is a Manager driving the real Claude Code CLI against the fake API,
// with a parent session.
type env struct {
	t      *testing.T
	home   string
	db     string
	fake   *fakeapi.Server
	m      *session.Manager
	parent string
}

// newEnv opens a manager (extra providers besides Claude Code, if any)
// over a new event log.
func newEnv(t *testing.T, extra ...provider.Provider) *env {
	t.Helper()
	e := &env{t: t, home: t.TempDir(), db: filepath.Join(t.TempDir(), "agent.db"), fake: testenv.FakeAPI(t)}
	e.open(extra...)
	parent, err := e.m.Create(context.Background(), session.CreateRequest{WorkingDirectory: e.home, Name: "parent"})
	if err != nil {
		t.Fatal(err)
	}
	e.parent = parent.ID()
	return e
}

// open opens the manager over e's event log (again, after closeManager:
// a restarted agent).
func (e *env) open(extra ...provider.Provider) {
	e.t.Helper()
	claudeBin := testenv.RealClaude(e.t)
	m, err := session.Open(context.Background(), session.Config{
		ClaudeBin: claudeBin, ClaudeEnv: claudecli.Env(e.home, e.fake.URL()),
		Providers:  provider.NewRegistry(append([]provider.Provider{&claude.Provider{Bin: claudeBin}}, extra...)...),
		DefaultDir: e.home, CancelGrace: time.Second, StopGrace: 2 * time.Second,
	}, e.db)
	if err != nil {
		e.t.Fatal(err)
	}
	e.m = m
	e.t.Cleanup(func() { _ = m.Close(context.Background()) })
}

// service starts a Service over e's manager.
func (e *env) service(opt Options) *Service {
	svc := New(e.m, opt)
	e.t.Cleanup(svc.Close)
	return svc
}

// newService returns a Service over a new env, and the parent session.
func newService(t *testing.T, opt Options) (*Service, string) {
	t.Helper()
	e := newEnv(t)
	return e.service(opt), e.parent
}

func wantCode(t *testing.T, what string, err error, c codes.Code, code string) {
	t.Helper()
	if status.Code(err) != c || server.BetCodeCode(err) != code {
		t.Fatalf("%s: %v (betcode %q), want %v / %s", what, err, server.BetCodeCode(err), c, code)
	}
}

func waitDone(t *testing.T, svc *Service, id string) *pb.Subagent {
	t.Helper()
	sa, err := svc.subagent(id)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-sa.done:
	case <-time.After(60 * time.Second):
		t.Fatalf("subagent %s did not end: %v", id, sa.proto())
	}
	return sa.proto()
}

func TestSpawnLimitListAndCancel(t *testing.T) {
	svc, parent := newService(t, Options{MaxPerParent: 1})
	ctx := testenv.Ctx(t, 90*time.Second)
	running := []pb.SubagentStatus{pb.SubagentStatus_SUBAGENT_STATUS_RUNNING}

	first, err := svc.SpawnSubagent(ctx, &pb.SpawnSubagentRequest{ParentSessionId: parent, Spec: &pb.SubagentSpec{Name: "staller", Prompt: "STALL here", Metadata: map[string]string{"ticket": "T-1"}}})
	if err != nil {
		t.Fatalf("SpawnSubagent: %v", err)
	}
	sa := first.GetSubagent()
	if sa.GetStatus() != pb.SubagentStatus_SUBAGENT_STATUS_RUNNING || sa.GetParentSessionId() != parent || sa.GetSessionId() == "" {
		t.Fatalf("spawned %v", sa)
	}
	sess, err := svc.m.Get(ctx, sa.GetSessionId())
	if err != nil {
		t.Fatal(err)
	}
	if md := sess.Metadata(); md[MetaParent] != parent || md[MetaID] != sa.GetId() || md[metaClientPrefix+"ticket"] != "T-1" {
		t.Fatalf("session metadata %v", md)
	}
	_, err = svc.SpawnSubagent(ctx, &pb.SpawnSubagentRequest{ParentSessionId: parent, Spec: &pb.SubagentSpec{Prompt: "hello"}})
	wantCode(t, "second SpawnSubagent", err, codes.ResourceExhausted, CodeSubagentLimit)
	if list, err := svc.ListSubagents(ctx, &pb.ListSubagentsRequest{ParentSessionId: parent, Statuses: running}); err != nil || len(list.GetSubagents()) != 1 {
		t.Fatalf("running subagents %v, %v", list, err)
	}

	resp, err := svc.CancelSubagent(ctx, &pb.CancelSubagentRequest{SubagentId: sa.GetId(), Reason: "test"})
	if err != nil || !resp.GetWasActive() || resp.GetSubagent().GetStatus() != pb.SubagentStatus_SUBAGENT_STATUS_CANCELLED {
		t.Fatalf("CancelSubagent: %v, %v", resp, err)
	}
	if md := sess.Metadata(); md[MetaStatus] != "cancelled" {
		t.Fatalf("final status in the session metadata: %v", md)
	}
	if list, err := svc.ListSubagents(ctx, &pb.ListSubagentsRequest{Statuses: running}); err != nil || len(list.GetSubagents()) != 0 {
		t.Fatalf("running subagents after the cancel %v, %v", list, err)
	}

	second, err := svc.SpawnSubagent(ctx, &pb.SpawnSubagentRequest{ParentSessionId: parent, Spec: &pb.SubagentSpec{Prompt: "hello"}})
	if err != nil {
		t.Fatalf("SpawnSubagent once the first ended: %v", err)
	}
	done := waitDone(t, svc, second.GetSubagent().GetId())
	if done.GetStatus() != pb.SubagentStatus_SUBAGENT_STATUS_COMPLETED || done.GetResult() == "" || done.GetError() != "" {
		t.Fatalf("second subagent %v", done)
	}
	again, err := svc.CancelSubagent(ctx, &pb.CancelSubagentRequest{SubagentId: done.GetId()})
	if err != nil || again.GetWasActive() {
		t.Fatalf("cancelling a finished subagent: %v, %v", again, err)
	}
	_, err = svc.CancelSubagent(ctx, &pb.CancelSubagentRequest{SubagentId: "nope"})
	wantCode(t, "CancelSubagent of an unknown id", err, codes.NotFound, CodeSubagentNotFound)
}

func TestDisabledRefusesEveryCall(t *testing.T) {
	ctx := context.Background()
	var d Disabled
	errs := map[string]error{}
	_, errs["SpawnSubagent"] = d.SpawnSubagent(ctx, nil)
	_, errs["ListSubagents"] = d.ListSubagents(ctx, nil)
	_, errs["CancelSubagent"] = d.CancelSubagent(ctx, nil)
	errs["WatchSubagent"] = d.WatchSubagent(nil, nil)
	_, errs["CreateOrchestration"] = d.CreateOrchestration(ctx, nil)
	errs["WatchOrchestration"] = d.WatchOrchestration(nil, nil)
	_, errs["CancelOrchestration"] = d.CancelOrchestration(ctx, nil)
	_, errs["ListOrchestrations"] = d.ListOrchestrations(ctx, nil)
	for name, err := range errs {
		wantCode(t, name, err, codes.Unimplemented, server.CodeNotImplemented)
	}
}

// The daemon's parallel cap stays below the CLI pool's size (8 by
// default), one slot being the parent's: steps are never started into a
// pool their own orchestration filled.
func TestMaxParallelStaysBelowThePool(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct{ asked, want int }{{4, 4}, {7, 7}, {8, 7}, {16, 7}} {
		if got := e.service(Options{MaxParallel: tc.asked}).opt.MaxParallel; got != tc.want {
			t.Errorf("MaxParallel %d with a pool of %d: got %d, want %d", tc.asked, e.m.MaxProcesses(), got, tc.want)
		}
	}
}
