package team

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/betcode-dev/betcode/agent/server"
	"github.com/betcode-dev/betcode/agent/session"
	"github.com/betcode-dev/betcode/agent/subagent"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// fakeSessions are sessions with canned events and open prompts.
type fakeSessions struct {
	events  map[string][]*pb.AgentEvent
	pending map[string][]*pb.AgentEvent
}

func (f *fakeSessions) Pending(_ context.Context, id string) ([]*pb.AgentEvent, error) {
	if _, ok := f.events[id]; !ok {
		return nil, fmt.Errorf("load session: %w", session.ErrNotFound)
	}
	return f.pending[id], nil
}

func (f *fakeSessions) Events(_ context.Context, id string, kinds []string, fn func(*pb.AgentEvent) error) error {
	for _, ev := range f.events[id] {
		if !slices.Contains(kinds, session.Kind(ev)) {
			continue
		}
		if err := fn(ev); err != nil {
			return err
		}
	}
	return nil
}

func (f *fakeSessions) Latest(ctx context.Context, id string, kinds []string, fn func(*pb.AgentEvent) error) error {
	evs := f.events[id]
	for i := len(evs) - 1; i >= 0; i-- {
		if !slices.Contains(kinds, session.Kind(evs[i])) {
			continue
		}
		if err := fn(evs[i]); err != nil {
			return err
		}
	}
	return nil
}

// fakeSubagents answers ListSubagents and ListOrchestrations from lists.
type fakeSubagents struct {
	pb.UnimplementedSubagentServiceServer
	subagents []*pb.Subagent
	orchs     []*pb.Orchestration
	err       error
}

func (f *fakeSubagents) ListSubagents(_ context.Context, req *pb.ListSubagentsRequest) (*pb.ListSubagentsResponse, error) {
	if f.err != nil {
		return nil, f.err
	}
	out := &pb.ListSubagentsResponse{}
	for _, sa := range f.subagents {
		if sa.GetParentSessionId() == req.GetParentSessionId() {
			out.Subagents = append(out.Subagents, sa)
		}
	}
	return out, nil
}

func (f *fakeSubagents) ListOrchestrations(_ context.Context, req *pb.ListOrchestrationsRequest) (*pb.ListOrchestrationsResponse, error) {
	if f.err != nil {
		return nil, f.err
	}
	out := &pb.ListOrchestrationsResponse{}
	for _, o := range f.orchs {
		if o.GetParentSessionId() == req.GetParentSessionId() {
			out.Orchestrations = append(out.Orchestrations, o)
		}
	}
	return out, nil
}

func userInput(s string) *pb.AgentEvent {
	return &pb.AgentEvent{Event: &pb.AgentEvent_UserInput{UserInput: &pb.UserInputEvent{Content: s}}}
}

func todo(items ...*pb.TodoItem) *pb.AgentEvent {
	return &pb.AgentEvent{Event: &pb.AgentEvent_TodoUpdate{TodoUpdate: &pb.TodoUpdate{Items: items}}}
}

func newService(t *testing.T, ss Sessions, subs pb.SubagentServiceServer) *Service {
	t.Helper()
	st, _ := newStore(t)
	s, err := New(Options{Sessions: ss, Subagents: subs, Store: st})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// wantStatus fails t unless err has gRPC code c and BetCode code reason.
func wantStatus(t *testing.T, what string, err error, c codes.Code, reason string) {
	t.Helper()
	if status.Code(err) != c || server.BetCodeCode(err) != reason {
		t.Fatalf("%s: %v (BetCode code %q), want %v / %s", what, err, server.BetCodeCode(err), c, reason)
	}
}

// world: session s1 ran an Agent call (at 2) and has two subagents, one
// finished (created at 1), one running (created at 3) in its own session.
func world() (*fakeSessions, *fakeSubagents) {
	ss := &fakeSessions{events: map[string][]*pb.AgentEvent{
		"s1": {userInput("plan it"), toolStart(2, "a1", "Agent", researchInput), textOf("a1", "reading"),
			todo(&pb.TodoItem{Id: "1", Subject: "old"}),
			todo(&pb.TodoItem{Id: "1", Subject: "Write the parser", Status: pb.TodoStatus_COMPLETED},
				&pb.TodoItem{Id: "2", Subject: "Add tests", Description: "unit", Status: pb.TodoStatus_IN_PROGRESS},
				&pb.TodoItem{Id: "3", Subject: "Update docs", Status: pb.TodoStatus_PENDING}),
			{ParentToolUseId: "a1", Event: &pb.AgentEvent_TodoUpdate{TodoUpdate: &pb.TodoUpdate{Items: []*pb.TodoItem{{Id: "1", Subject: "the subagent's own"}}}}},
		},
		"sub-done":    {userInput("STREAM 2"), textOf("", "w0 w1 ")},
		"sub-running": {userInput("first"), textOf("", "old turn"), userInput("second"), textOf("", "so "), textOf("", "far")},
		"s2":          {},
	}}
	subs := &fakeSubagents{subagents: []*pb.Subagent{
		{Id: "sa-done", ParentSessionId: "s1", SessionId: "sub-done", Name: "counter", Status: pb.SubagentStatus_SUBAGENT_STATUS_COMPLETED,
			Result: "w0 w1 ", CreatedAt: at(1), FinishedAt: at(4), Usage: &pb.UsageReport{CostUsd: 0.25}, OrchestrationId: "o1", StepId: "a"},
		{Id: "sa-run", ParentSessionId: "s1", SessionId: "sub-running", Name: "worker", Status: pb.SubagentStatus_SUBAGENT_STATUS_RUNNING,
			CreatedAt: at(3), OrchestrationId: "o1", StepId: "b"},
		{Id: "sa-other", ParentSessionId: "s2", SessionId: "x", Name: "elsewhere", Status: pb.SubagentStatus_SUBAGENT_STATUS_PENDING, CreatedAt: at(1)},
	}, orchs: []*pb.Orchestration{{Id: "o1", ParentSessionId: "s1", Steps: []*pb.OrchestrationStepState{
		{StepId: "a", Status: pb.SubagentStatus_SUBAGENT_STATUS_COMPLETED, SubagentId: "sa-done", Attempt: 1},
		{StepId: "b", DependsOn: []string{"a"}, Status: pb.SubagentStatus_SUBAGENT_STATUS_RUNNING, SubagentId: "sa-run", Attempt: 1},
		{StepId: "c", DependsOn: []string{"a", "b"}, Status: pb.SubagentStatus_SUBAGENT_STATUS_PENDING},
	}}}}
	return ss, subs
}

func TestListTeammates(t *testing.T) {
	ss, subs := world()
	done := &pb.Teammate{AgentId: "sa-done", SessionId: "s1", Name: "counter", AgentType: SubagentAgentType,
		Status: pb.TeammateStatus_TEAMMATE_STATUS_STOPPED, Kind: pb.TeammateKind_TEAMMATE_KIND_SUBAGENT, TeammateSessionId: "sub-done",
		Output: "w0 w1 ", SubagentStatus: pb.SubagentStatus_SUBAGENT_STATUS_COMPLETED, OrchestrationId: "o1", StepId: "a",
		Prompt: "STREAM 2", CreatedAt: at(1), FinishedAt: at(4), CostUsd: 0.25}
	tool := with(taskTool("a1", pb.TeammateStatus_TEAMMATE_STATUS_WORKING, 2), func(t *pb.Teammate) { t.Output = "reading" })
	running := &pb.Teammate{AgentId: "sa-run", SessionId: "s1", Name: "worker", AgentType: SubagentAgentType,
		Status: pb.TeammateStatus_TEAMMATE_STATUS_WORKING, Kind: pb.TeammateKind_TEAMMATE_KIND_SUBAGENT, TeammateSessionId: "sub-running",
		Output: "so far", SubagentStatus: pb.SubagentStatus_SUBAGENT_STATUS_RUNNING, OrchestrationId: "o1", StepId: "b",
		Prompt: "first", CreatedAt: at(3)}
	tests := []struct {
		name string
		subs pb.SubagentServiceServer
		want []*pb.Teammate
	}{
		{"subagents and Task-tool subagents, oldest first", subs, []*pb.Teammate{done, tool, running}},
		{"flag off: only the Task-tool subagents", subagent.Disabled{}, []*pb.Teammate{tool}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newService(t, ss, tt.subs)
			resp, err := s.ListTeammates(t.Context(), &pb.ListTeammatesRequest{SessionId: "s1"})
			if err != nil {
				t.Fatal(err)
			}
			checkProtos(t, "teammates", resp.GetTeammates(), tt.want)
			for _, want := range tt.want {
				got, err := s.GetTeammate(t.Context(), &pb.GetTeammateRequest{SessionId: "s1", AgentId: want.GetAgentId()})
				if err != nil {
					t.Fatalf("GetTeammate %s: %v", want.GetAgentId(), err)
				}
				checkProtos(t, "teammate", []*pb.Teammate{got.GetTeammate()}, []*pb.Teammate{want})
			}
		})
	}
}

// The service reads the events that end a background Agent call: its
// SubagentTaskUpdates, and a restart of the session's process.
func TestListTeammatesEndsFromTaskEvents(t *testing.T) {
	completed := pb.SubagentTaskStatus_SUBAGENT_TASK_STATUS_COMPLETED
	ss := &fakeSessions{events: map[string][]*pb.AgentEvent{"s1": {
		toolStart(1, "a1", "Agent", researchInput), taskUpdate(1, "a1", pb.SubagentTaskStatus_SUBAGENT_TASK_STATUS_STARTED, true, "", ""),
		toolResult(2, "a1", launched, false), turnEnd(3), subText(4, "a1", "The report."), taskUpdate(5, "a1", completed, true, "The report.", ""),
		toolStart(6, "a2", "Agent", researchInput), toolResult(7, "a2", launched, false), turnEnd(8), resumed(9),
	}}}
	s := newService(t, ss, subagent.Disabled{})
	resp, err := s.ListTeammates(t.Context(), &pb.ListTeammatesRequest{SessionId: "s1"})
	if err != nil {
		t.Fatal(err)
	}
	stopped := pb.TeammateStatus_TEAMMATE_STATUS_STOPPED
	checkProtos(t, "teammates", resp.GetTeammates(), []*pb.Teammate{
		with(taskTool("a1", stopped, 1), func(t *pb.Teammate) { t.Output, t.FinishedAt = "The report.", at(5) }),
		with(taskTool("a2", stopped, 6), func(t *pb.Teammate) { t.Error, t.FinishedAt = ErrProcessEnded, at(9) }),
	})
}

func TestTeammateErrors(t *testing.T) {
	ss, subs := world()
	tests := []struct {
		name   string
		subs   pb.SubagentServiceServer
		call   func(s *Service) error
		code   codes.Code
		reason string
	}{
		{"unknown session", subs, func(s *Service) error {
			_, err := s.ListTeammates(t.Context(), &pb.ListTeammatesRequest{SessionId: "nope"})
			return err
		}, codes.NotFound, CodeSessionNotFound},
		{"unknown teammate", subs, func(s *Service) error {
			_, err := s.GetTeammate(t.Context(), &pb.GetTeammateRequest{SessionId: "s1", AgentId: "nope"})
			return err
		}, codes.NotFound, CodeTeammateNotFound},
		{"another session's subagent", subs, func(s *Service) error {
			_, err := s.GetTeammate(t.Context(), &pb.GetTeammateRequest{SessionId: "s1", AgentId: "sa-other"})
			return err
		}, codes.NotFound, CodeTeammateNotFound},
		{"no agent id", subs, func(s *Service) error {
			_, err := s.GetTeammate(t.Context(), &pb.GetTeammateRequest{SessionId: "s1"})
			return err
		}, codes.InvalidArgument, server.CodeInvalidArgument},
		{"unknown session for tasks", subs, func(s *Service) error {
			_, err := s.ListTasks(t.Context(), &pb.ListTasksRequest{SessionId: "nope"})
			return err
		}, codes.NotFound, CodeSessionNotFound},
		{"SubagentService fails", &fakeSubagents{err: server.Status(codes.Unavailable, server.CodeAgentShuttingDown, "stopping")}, func(s *Service) error {
			_, err := s.ListTeammates(t.Context(), &pb.ListTeammatesRequest{SessionId: "s1"})
			return err
		}, codes.Unavailable, server.CodeAgentShuttingDown},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantStatus(t, tt.name, tt.call(newService(t, ss, tt.subs)), tt.code, tt.reason)
		})
	}
}

func TestListTasks(t *testing.T) {
	ss, subs := world()
	steps := []*pb.TeamTask{
		{Id: "o1/a", Subject: "a", Description: "STREAM 2", Status: pb.TeamTaskStatus_TEAM_TASK_STATUS_COMPLETED, AssignedAgentId: "sa-done",
			Blocks: []string{"o1/b", "o1/c"}, StepStatus: pb.SubagentStatus_SUBAGENT_STATUS_COMPLETED, OrchestrationId: "o1"},
		{Id: "o1/b", Subject: "b", Description: "first", Status: pb.TeamTaskStatus_TEAM_TASK_STATUS_IN_PROGRESS, AssignedAgentId: "sa-run",
			Blocks: []string{"o1/c"}, BlockedBy: []string{"o1/a"}, StepStatus: pb.SubagentStatus_SUBAGENT_STATUS_RUNNING, OrchestrationId: "o1"},
		{Id: "o1/c", Subject: "c", Status: pb.TeamTaskStatus_TEAM_TASK_STATUS_PENDING,
			BlockedBy: []string{"o1/a", "o1/b"}, StepStatus: pb.SubagentStatus_SUBAGENT_STATUS_PENDING, OrchestrationId: "o1"},
	}
	todos := []*pb.TeamTask{
		{Id: "1", Subject: "Write the parser", Status: pb.TeamTaskStatus_TEAM_TASK_STATUS_COMPLETED},
		{Id: "2", Subject: "Add tests", Description: "unit", Status: pb.TeamTaskStatus_TEAM_TASK_STATUS_IN_PROGRESS},
		{Id: "3", Subject: "Update docs", Status: pb.TeamTaskStatus_TEAM_TASK_STATUS_PENDING},
	}
	tests := []struct {
		name    string
		session string
		subs    pb.SubagentServiceServer
		want    []*pb.TeamTask
	}{
		{"steps, then the session's latest own list", "s1", subs, append(slices.Clone(steps), todos...)},
		{"flag off: the session's list", "s1", subagent.Disabled{}, todos},
		{"ListOrchestrations not served yet", "s1", &struct {
			pb.UnimplementedSubagentServiceServer
		}{}, todos},
		{"nothing", "s2", subs, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := newService(t, ss, tt.subs).ListTasks(t.Context(), &pb.ListTasksRequest{SessionId: tt.session})
			if err != nil {
				t.Fatal(err)
			}
			checkProtos(t, "tasks", resp.GetTasks(), tt.want)
		})
	}
}

func TestStatusMappings(t *testing.T) {
	tests := []struct {
		in       pb.SubagentStatus
		teammate pb.TeammateStatus
		task     pb.TeamTaskStatus
	}{
		{pb.SubagentStatus_SUBAGENT_STATUS_PENDING, pb.TeammateStatus_TEAMMATE_STATUS_STARTING, pb.TeamTaskStatus_TEAM_TASK_STATUS_PENDING},
		{pb.SubagentStatus_SUBAGENT_STATUS_RUNNING, pb.TeammateStatus_TEAMMATE_STATUS_WORKING, pb.TeamTaskStatus_TEAM_TASK_STATUS_IN_PROGRESS},
		{pb.SubagentStatus_SUBAGENT_STATUS_WAITING_FOR_USER, pb.TeammateStatus_TEAMMATE_STATUS_IDLE, pb.TeamTaskStatus_TEAM_TASK_STATUS_IN_PROGRESS},
		{pb.SubagentStatus_SUBAGENT_STATUS_COMPLETED, pb.TeammateStatus_TEAMMATE_STATUS_STOPPED, pb.TeamTaskStatus_TEAM_TASK_STATUS_COMPLETED},
		{pb.SubagentStatus_SUBAGENT_STATUS_FAILED, pb.TeammateStatus_TEAMMATE_STATUS_STOPPED, pb.TeamTaskStatus_TEAM_TASK_STATUS_COMPLETED},
		{pb.SubagentStatus_SUBAGENT_STATUS_CANCELLED, pb.TeammateStatus_TEAMMATE_STATUS_STOPPED, pb.TeamTaskStatus_TEAM_TASK_STATUS_PENDING},
		{pb.SubagentStatus_SUBAGENT_STATUS_SKIPPED, pb.TeammateStatus_TEAMMATE_STATUS_STOPPED, pb.TeamTaskStatus_TEAM_TASK_STATUS_PENDING},
		{pb.SubagentStatus_SUBAGENT_STATUS_UNSPECIFIED, pb.TeammateStatus_TEAMMATE_STATUS_UNSPECIFIED, pb.TeamTaskStatus_TEAM_TASK_STATUS_PENDING},
	}
	for _, tt := range tests {
		t.Run(tt.in.String(), func(t *testing.T) {
			if got := teammateStatus(tt.in); got != tt.teammate {
				t.Errorf("teammate status %v, want %v", got, tt.teammate)
			}
			if got := stepTaskStatus(tt.in); got != tt.task {
				t.Errorf("task status %v, want %v", got, tt.task)
			}
		})
	}
	todoTests := []struct {
		in   pb.TodoStatus
		want pb.TeamTaskStatus
	}{
		{pb.TodoStatus_PENDING, pb.TeamTaskStatus_TEAM_TASK_STATUS_PENDING},
		{pb.TodoStatus_IN_PROGRESS, pb.TeamTaskStatus_TEAM_TASK_STATUS_IN_PROGRESS},
		{pb.TodoStatus_COMPLETED, pb.TeamTaskStatus_TEAM_TASK_STATUS_COMPLETED},
		{pb.TodoStatus_TODO_STATUS_UNSPECIFIED, pb.TeamTaskStatus_TEAM_TASK_STATUS_PENDING},
	}
	for _, tt := range todoTests {
		if got := todoTaskStatus(tt.in); got != tt.want {
			t.Errorf("todo %v: %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestSpecErrors(t *testing.T) {
	ss, subs := world()
	s := newService(t, ss, subs)
	ctx := t.Context()
	k, err := s.CreateSkillSpec(ctx, &pb.CreateSkillSpecRequest{Spec: internalSkill("lint")})
	if err != nil {
		t.Fatal(err)
	}
	tm, err := s.CreateTeammateSpec(ctx, &pb.CreateTeammateSpecRequest{Spec: &pb.TeammateSpec{Name: "tester", SkillIds: []string{k.GetSpec().GetId()}}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		call   func() error
		code   codes.Code
		reason string
	}{
		{"teammate without a name", func() error {
			_, err := s.CreateTeammateSpec(ctx, &pb.CreateTeammateSpecRequest{Spec: &pb.TeammateSpec{Role: "r"}})
			return err
		}, codes.InvalidArgument, server.CodeInvalidArgument},
		{"no spec at all", func() error {
			_, err := s.CreateTeammateSpec(ctx, &pb.CreateTeammateSpecRequest{})
			return err
		}, codes.InvalidArgument, server.CodeInvalidArgument},
		{"teammate with an unknown skill", func() error {
			_, err := s.CreateTeammateSpec(ctx, &pb.CreateTeammateSpecRequest{Spec: &pb.TeammateSpec{Name: "x", SkillIds: []string{"nope"}}})
			return err
		}, codes.InvalidArgument, server.CodeInvalidArgument},
		{"duplicate teammate name", func() error {
			_, err := s.CreateTeammateSpec(ctx, &pb.CreateTeammateSpecRequest{Spec: &pb.TeammateSpec{Name: "tester"}})
			return err
		}, codes.AlreadyExists, CodeSpecExists},
		{"duplicate skill name", func() error {
			_, err := s.CreateSkillSpec(ctx, &pb.CreateSkillSpecRequest{Spec: internalSkill("lint")})
			return err
		}, codes.AlreadyExists, CodeSpecExists},
		{"internal skill without content", func() error {
			_, err := s.CreateSkillSpec(ctx, &pb.CreateSkillSpecRequest{Spec: &pb.SkillSpec{Name: "x", SkillType: pb.SkillType_SKILL_TYPE_INTERNAL}})
			return err
		}, codes.InvalidArgument, server.CodeInvalidArgument},
		{"update without id", func() error {
			_, err := s.UpdateTeammateSpec(ctx, &pb.UpdateTeammateSpecRequest{Spec: &pb.TeammateSpec{Name: "x"}})
			return err
		}, codes.InvalidArgument, server.CodeInvalidArgument},
		{"update of an unknown spec", func() error {
			_, err := s.UpdateTeammateSpec(ctx, &pb.UpdateTeammateSpecRequest{Spec: &pb.TeammateSpec{Id: "nope", Name: "x"}})
			return err
		}, codes.NotFound, CodeSpecNotFound},
		{"delete of an unknown teammate spec", func() error {
			_, err := s.DeleteTeammateSpec(ctx, &pb.DeleteTeammateSpecRequest{Id: "nope"})
			return err
		}, codes.NotFound, CodeSpecNotFound},
		{"delete of an unknown skill spec", func() error {
			_, err := s.DeleteSkillSpec(ctx, &pb.DeleteSkillSpecRequest{Id: "nope"})
			return err
		}, codes.NotFound, CodeSpecNotFound},
		{"delete of a skill in use", func() error {
			_, err := s.DeleteSkillSpec(ctx, &pb.DeleteSkillSpecRequest{Id: k.GetSpec().GetId()})
			return err
		}, codes.FailedPrecondition, CodeSkillInUse},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { wantStatus(t, tt.name, tt.call(), tt.code, tt.reason) })
	}
	// Once no teammate spec names it, the skill can go.
	if _, err := s.DeleteTeammateSpec(ctx, &pb.DeleteTeammateSpecRequest{Id: tm.GetSpec().GetId()}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DeleteSkillSpec(ctx, &pb.DeleteSkillSpecRequest{Id: k.GetSpec().GetId()}); err != nil {
		t.Fatal(err)
	}
	if l, _ := s.ListSkillSpecs(ctx, &pb.ListSkillSpecsRequest{}); len(l.GetSpecs()) != 0 {
		t.Fatalf("skills left: %v", l)
	}
}

func TestNewValidates(t *testing.T) {
	st, _ := newStore(t)
	ss, subs := world()
	tests := []struct {
		name string
		opt  Options
		want string
	}{
		{"no sessions", Options{Subagents: subs, Store: st}, "Sessions"},
		{"no subagents", Options{Sessions: ss, Store: st}, "Subagents"},
		{"no store", Options{Sessions: ss, Subagents: subs}, "Store"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := New(tt.opt); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("New: %v, want an error naming %s", err, tt.want)
			}
		})
	}
}
