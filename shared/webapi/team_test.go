package webapi

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// fakeTeam is TeamService with the agent's rules for specs (a name, known
// skills, unique names, a used skill stays) over fixed teammates and tasks.
type fakeTeam struct {
	pb.UnimplementedTeamServiceServer

	agent     *fakeAgent // its sessions decide SESSION_NOT_FOUND
	mu        sync.Mutex
	teammates map[string][]*pb.Teammate
	tasks     map[string][]*pb.TeamTask
	specs     []*pb.TeammateSpec
	skills    []*pb.SkillSpec
	updates   []*pb.UpdateTeammateSpecRequest
	calls     int // calls that reached the service
	failWith  error
	nextID    int
}

func newFakeTeam(agent *fakeAgent) *fakeTeam {
	return &fakeTeam{agent: agent, teammates: map[string][]*pb.Teammate{}, tasks: map[string][]*pb.TeamTask{}}
}

var fakeTime = timestamppb.New(time.Date(2025, 2, 15, 8, 0, 0, 0, time.UTC))

// begin counts a call, checks the session when one is named, and returns
// the error the call fails with; it holds f.mu until done is called.
func (f *fakeTeam) begin(session string) (done func(), err error) {
	f.mu.Lock()
	f.calls++
	if f.failWith != nil {
		return f.mu.Unlock, f.failWith
	}
	if session != "" {
		f.agent.mu.Lock()
		known := f.agent.find(session) != nil
		f.agent.mu.Unlock()
		if !known {
			return f.mu.Unlock, betcodeErr(codes.NotFound, "SESSION_NOT_FOUND", "session "+session+" does not exist", nil)
		}
	}
	return f.mu.Unlock, nil
}

func (f *fakeTeam) ListTeammates(_ context.Context, req *pb.ListTeammatesRequest) (*pb.ListTeammatesResponse, error) {
	done, err := f.begin(req.SessionId)
	defer done()
	if err != nil {
		return nil, err
	}
	return &pb.ListTeammatesResponse{Teammates: f.teammates[req.SessionId]}, nil
}

func (f *fakeTeam) GetTeammate(_ context.Context, req *pb.GetTeammateRequest) (*pb.GetTeammateResponse, error) {
	done, err := f.begin(req.SessionId)
	defer done()
	if err != nil {
		return nil, err
	}
	for _, t := range f.teammates[req.SessionId] {
		if t.AgentId == req.AgentId {
			return &pb.GetTeammateResponse{Teammate: t}, nil
		}
	}
	return nil, betcodeErr(codes.NotFound, "TEAMMATE_NOT_FOUND", "no teammate "+req.AgentId, nil)
}

func (f *fakeTeam) ListTasks(_ context.Context, req *pb.ListTasksRequest) (*pb.ListTasksResponse, error) {
	done, err := f.begin(req.SessionId)
	defer done()
	if err != nil {
		return nil, err
	}
	return &pb.ListTasksResponse{Tasks: f.tasks[req.SessionId]}, nil
}

func (f *fakeTeam) ListTeammateSpecs(context.Context, *pb.ListTeammateSpecsRequest) (*pb.ListTeammateSpecsResponse, error) {
	done, err := f.begin("")
	defer done()
	if err != nil {
		return nil, err
	}
	return &pb.ListTeammateSpecsResponse{Specs: f.specs}, nil
}

// checkSpec is the agent's validation of a teammate spec.
func (f *fakeTeam) checkSpec(s *pb.TeammateSpec) error {
	if s.Name == "" {
		return betcodeErr(codes.InvalidArgument, "INVALID_ARGUMENT", "a teammate spec needs a name", nil)
	}
	for _, o := range f.specs {
		if o.Name == s.Name && o.Id != s.Id {
			return betcodeErr(codes.AlreadyExists, "SPEC_EXISTS", "a teammate spec named "+s.Name+" exists", nil)
		}
	}
	for _, id := range s.SkillIds {
		if !slices.ContainsFunc(f.skills, func(k *pb.SkillSpec) bool { return k.Id == id }) {
			return betcodeErr(codes.InvalidArgument, "INVALID_ARGUMENT", "unknown skill "+id, nil)
		}
	}
	return nil
}

func (f *fakeTeam) CreateTeammateSpec(_ context.Context, req *pb.CreateTeammateSpecRequest) (*pb.CreateTeammateSpecResponse, error) {
	done, err := f.begin("")
	defer done()
	if err != nil {
		return nil, err
	}
	s := proto.Clone(req.Spec).(*pb.TeammateSpec)
	f.nextID++
	s.Id, s.CreatedAt, s.UpdatedAt = fmt.Sprintf("spec-%d", f.nextID), fakeTime, fakeTime
	if err := f.checkSpec(s); err != nil {
		return nil, err
	}
	f.specs = append(f.specs, s)
	return &pb.CreateTeammateSpecResponse{Spec: s}, nil
}

func (f *fakeTeam) UpdateTeammateSpec(_ context.Context, req *pb.UpdateTeammateSpecRequest) (*pb.UpdateTeammateSpecResponse, error) {
	done, err := f.begin("")
	defer done()
	if err != nil {
		return nil, err
	}
	f.updates = append(f.updates, req)
	i := slices.IndexFunc(f.specs, func(s *pb.TeammateSpec) bool { return s.Id == req.Spec.GetId() })
	if i < 0 {
		return nil, betcodeErr(codes.NotFound, "SPEC_NOT_FOUND", "no teammate spec "+req.Spec.GetId(), nil)
	}
	s := proto.Clone(f.specs[i]).(*pb.TeammateSpec)
	for _, p := range req.UpdateMask {
		switch p {
		case "name":
			s.Name = req.Spec.Name
		case "role":
			s.Role = req.Spec.Role
		case "instructions":
			s.Instructions = req.Spec.Instructions
		case "skill_ids":
			s.SkillIds = req.Spec.SkillIds
		case "model":
			s.Model = req.Spec.Model
		default:
			return nil, status.Error(codes.InvalidArgument, "mask "+p)
		}
	}
	if err := f.checkSpec(s); err != nil {
		return nil, err
	}
	f.specs[i] = s
	return &pb.UpdateTeammateSpecResponse{Spec: s}, nil
}

func (f *fakeTeam) DeleteTeammateSpec(_ context.Context, req *pb.DeleteTeammateSpecRequest) (*pb.DeleteTeammateSpecResponse, error) {
	done, err := f.begin("")
	defer done()
	if err != nil {
		return nil, err
	}
	i := slices.IndexFunc(f.specs, func(s *pb.TeammateSpec) bool { return s.Id == req.Id })
	if i < 0 {
		return nil, betcodeErr(codes.NotFound, "SPEC_NOT_FOUND", "no teammate spec "+req.Id, nil)
	}
	f.specs = slices.Delete(f.specs, i, i+1)
	return &pb.DeleteTeammateSpecResponse{}, nil
}

func (f *fakeTeam) ListSkillSpecs(context.Context, *pb.ListSkillSpecsRequest) (*pb.ListSkillSpecsResponse, error) {
	done, err := f.begin("")
	defer done()
	if err != nil {
		return nil, err
	}
	return &pb.ListSkillSpecsResponse{Specs: f.skills}, nil
}

func (f *fakeTeam) CreateSkillSpec(_ context.Context, req *pb.CreateSkillSpecRequest) (*pb.CreateSkillSpecResponse, error) {
	done, err := f.begin("")
	defer done()
	if err != nil {
		return nil, err
	}
	s := proto.Clone(req.Spec).(*pb.SkillSpec)
	switch {
	case s.Name == "":
		return nil, betcodeErr(codes.InvalidArgument, "INVALID_ARGUMENT", "a skill spec needs a name", nil)
	case s.SkillType == pb.SkillType_SKILL_TYPE_INTERNAL && s.SkillMdContent == "":
		return nil, betcodeErr(codes.InvalidArgument, "INVALID_ARGUMENT", "an internal skill needs its SKILL.md content", nil)
	case slices.ContainsFunc(f.skills, func(k *pb.SkillSpec) bool { return k.Name == s.Name }):
		return nil, betcodeErr(codes.AlreadyExists, "SPEC_EXISTS", "a skill spec named "+s.Name+" exists", nil)
	}
	f.nextID++
	s.Id, s.CreatedAt = fmt.Sprintf("skill-%d", f.nextID), fakeTime
	f.skills = append(f.skills, s)
	return &pb.CreateSkillSpecResponse{Spec: s}, nil
}

func (f *fakeTeam) DeleteSkillSpec(_ context.Context, req *pb.DeleteSkillSpecRequest) (*pb.DeleteSkillSpecResponse, error) {
	done, err := f.begin("")
	defer done()
	if err != nil {
		return nil, err
	}
	i := slices.IndexFunc(f.skills, func(s *pb.SkillSpec) bool { return s.Id == req.Id })
	if i < 0 {
		return nil, betcodeErr(codes.NotFound, "SPEC_NOT_FOUND", "no skill spec "+req.Id, nil)
	}
	for _, s := range f.specs {
		if slices.Contains(s.SkillIds, req.Id) {
			return nil, betcodeErr(codes.FailedPrecondition, "SKILL_IN_USE", "teammate spec "+s.Name+" uses it", nil)
		}
	}
	f.skills = slices.Delete(f.skills, i, i+1)
	return &pb.DeleteSkillSpecResponse{}, nil
}

// keys returns the sorted keys of a JSON object.
func keys(m map[string]any) []string { return slices.Sorted(maps.Keys(m)) }

func TestTeammates(t *testing.T) {
	ts := newTestServer(t, Options{})
	ts.fake.addSession(&pb.SessionSummary{Id: "s1"})
	ts.fake.addSession(&pb.SessionSummary{Id: "empty"})
	ts.fake.team.teammates["s1"] = []*pb.Teammate{
		{AgentId: "toolu_1", SessionId: "s1", Name: "Find the tests", AgentType: "general-purpose",
			Status: pb.TeammateStatus_TEAMMATE_STATUS_WORKING, Kind: pb.TeammateKind_TEAMMATE_KIND_TASK_TOOL,
			Output: "Looking…", Prompt: "find them", CreatedAt: fakeTime},
		{AgentId: "sub-1", SessionId: "s1", Name: "tests", AgentType: "subagent",
			Status: pb.TeammateStatus_TEAMMATE_STATUS_STOPPED, Kind: pb.TeammateKind_TEAMMATE_KIND_SUBAGENT,
			TeammateSessionId: "s9", SubagentStatus: pb.SubagentStatus_SUBAGENT_STATUS_FAILED, Error: "exit 1",
			OrchestrationId: "o1", StepId: "test", CreatedAt: fakeTime, FinishedAt: fakeTime, CostUsd: 0.25},
	}

	st, _, body := ts.call(t, "GET", "/api/sessions/s1/teammates", goodToken, nil)
	if st != 200 {
		t.Fatalf("GET teammates = %d %s", st, body)
	}
	got := decode[[]map[string]any](t, body)
	want := []map[string]any{
		{"agentId": "toolu_1", "sessionId": "s1", "name": "Find the tests", "agentType": "general-purpose", "status": "working",
			"output": "Looking…", "kind": "task_tool", "prompt": "find them", "createdAt": "2025-02-15T08:00:00Z"},
		{"agentId": "sub-1", "sessionId": "s1", "name": "tests", "agentType": "subagent", "status": "stopped", "output": "",
			"kind": "subagent", "teammateSessionId": "s9", "subagentStatus": "failed", "error": "exit 1", "orchestrationId": "o1",
			"stepId": "test", "createdAt": "2025-02-15T08:00:00Z", "finishedAt": "2025-02-15T08:00:00Z", "costUsd": 0.25},
	}
	if len(got) != len(want) {
		t.Fatalf("GET teammates = %s, want %d teammates", body, len(want))
	}
	for i := range want {
		if !maps.Equal(got[i], want[i]) {
			t.Errorf("teammate %d = %v\nwant %v", i, got[i], want[i])
		}
	}

	st, _, body = ts.call(t, "GET", "/api/sessions/s1/teammates/sub-1", goodToken, nil)
	if one := decode[map[string]any](t, body); st != 200 || !maps.Equal(one, want[1]) {
		t.Errorf("GET teammate sub-1 = %d %s", st, body)
	}
	st, _, body = ts.call(t, "GET", "/api/sessions/empty/teammates", goodToken, nil)
	if st != 200 || string(body) != "[]\n" {
		t.Errorf("GET teammates of a session without any = %d %q, want 200 []", st, body)
	}
}

func TestTeammateStatusNames(t *testing.T) {
	for s := range pb.TeammateStatus_name {
		name := teammateOf(&pb.Teammate{Status: pb.TeammateStatus(s)}).Status
		if !slices.Contains([]string{"starting", "working", "idle", "stopped"}, name) {
			t.Errorf("TeammateStatus %v = %q, not a ccgrid status", pb.TeammateStatus(s), name)
		}
	}
	for s := range pb.TeamTaskStatus_name {
		name := teamTaskOf(&pb.TeamTask{Status: pb.TeamTaskStatus(s)}).Status
		if !slices.Contains([]string{"pending", "in_progress", "completed"}, name) {
			t.Errorf("TeamTaskStatus %v = %q, not a ccgrid status", pb.TeamTaskStatus(s), name)
		}
	}
	for s := range pb.SkillType_name {
		if pb.SkillType(s) != pb.SkillType_SKILL_TYPE_UNSPECIFIED && skillTypeNames[pb.SkillType(s)] == "" {
			t.Errorf("SkillType %v has no web name", pb.SkillType(s))
		}
	}
	if got := subagentStatusName(pb.SubagentStatus_SUBAGENT_STATUS_WAITING_FOR_USER); got != "waiting_for_user" {
		t.Errorf("subagentStatusName(WAITING_FOR_USER) = %q", got)
	}
}

func TestTasks(t *testing.T) {
	ts := newTestServer(t, Options{})
	ts.fake.addSession(&pb.SessionSummary{Id: "s1"})
	ts.fake.team.tasks["s1"] = []*pb.TeamTask{
		{Id: "o1/research", Subject: "research", Description: "read the spec", Status: pb.TeamTaskStatus_TEAM_TASK_STATUS_COMPLETED,
			AssignedAgentId: "sub-1", Blocks: []string{"o1/build"}, StepStatus: pb.SubagentStatus_SUBAGENT_STATUS_COMPLETED, OrchestrationId: "o1"},
		{Id: "o1/build", Subject: "build", Status: pb.TeamTaskStatus_TEAM_TASK_STATUS_IN_PROGRESS, AssignedAgentId: "sub-2",
			BlockedBy: []string{"o1/research"}, StepStatus: pb.SubagentStatus_SUBAGENT_STATUS_RUNNING, OrchestrationId: "o1"},
		{Id: "1", Subject: "Write tests", Status: pb.TeamTaskStatus_TEAM_TASK_STATUS_PENDING},
	}
	st, _, body := ts.call(t, "GET", "/api/sessions/s1/tasks", goodToken, nil)
	if st != 200 {
		t.Fatalf("GET tasks = %d %s", st, body)
	}
	got := decode[[]map[string]any](t, body)
	want := []map[string]any{
		{"id": "o1/research", "subject": "research", "description": "read the spec", "status": "completed", "assignedAgentId": "sub-1",
			"blocks": []any{"o1/build"}, "blockedBy": []any{}, "stepStatus": "completed", "orchestrationId": "o1"},
		{"id": "o1/build", "subject": "build", "status": "in_progress", "assignedAgentId": "sub-2",
			"blocks": []any{}, "blockedBy": []any{"o1/research"}, "stepStatus": "running", "orchestrationId": "o1"},
		{"id": "1", "subject": "Write tests", "status": "pending", "blocks": []any{}, "blockedBy": []any{}},
	}
	if len(got) != len(want) {
		t.Fatalf("GET tasks = %s, want %d tasks", body, len(want))
	}
	for i := range want {
		if fmt.Sprint(got[i]) != fmt.Sprint(want[i]) {
			t.Errorf("task %d = %v\nwant %v", i, got[i], want[i])
		}
	}
}

func TestTeammateSpecs(t *testing.T) {
	ts := newTestServer(t, Options{})
	team := ts.fake.team
	team.skills = []*pb.SkillSpec{{Id: "skill-a", Name: "a"}, {Id: "skill-b", Name: "b"}}

	st, _, body := ts.call(t, "GET", "/api/teammate-specs", goodToken, nil)
	if st != 200 || string(body) != "[]\n" {
		t.Fatalf("GET teammate-specs (none) = %d %q, want 200 []", st, body)
	}
	st, _, body = ts.call(t, "POST", "/api/teammate-specs", goodToken,
		map[string]any{"name": "researcher", "role": "Research specialist", "instructions": "Cite sources.", "skillIds": []string{"skill-a"}})
	created := decode[map[string]any](t, body)
	if st != 201 || created["id"] == "" || created["name"] != "researcher" || created["role"] != "Research specialist" ||
		created["instructions"] != "Cite sources." || fmt.Sprint(created["skillIds"]) != "[skill-a]" || created["createdAt"] != "2025-02-15T08:00:00Z" {
		t.Fatalf("POST teammate-specs = %d %s", st, body)
	}
	if k := keys(created); !slices.Equal(k, []string{"createdAt", "id", "instructions", "name", "role", "skillIds", "updatedAt"}) {
		t.Errorf("a teammate spec has the fields %q", k)
	}
	id := created["id"].(string)

	// PATCH sends only the fields it has.
	st, _, body = ts.call(t, "PATCH", "/api/teammate-specs/"+id, goodToken, map[string]any{"skillIds": []string{"skill-a", "skill-b"}, "id": "ignored"})
	patched := decode[map[string]any](t, body)
	if st != 200 || fmt.Sprint(patched["skillIds"]) != "[skill-a skill-b]" || patched["instructions"] != "Cite sources." || patched["id"] != id {
		t.Errorf("PATCH skillIds = %d %s", st, body)
	}
	team.mu.Lock()
	last := team.updates[len(team.updates)-1]
	team.mu.Unlock()
	if !slices.Equal(last.UpdateMask, []string{"skill_ids"}) || last.Spec.Id != id {
		t.Errorf("UpdateTeammateSpec got mask %q for %q, want [skill_ids] for %q", last.UpdateMask, last.Spec.Id, id)
	}
	// Clearing a field is a change too.
	st, _, body = ts.call(t, "PATCH", "/api/teammate-specs/"+id, goodToken, map[string]any{"instructions": ""})
	if patched := decode[map[string]any](t, body); st != 200 || patched["instructions"] != nil || patched["role"] != "Research specialist" {
		t.Errorf("PATCH instructions to empty = %d %s", st, body)
	}
	// Nothing to change: the spec as it is, and no update (whose empty mask would mean all fields).
	team.mu.Lock()
	n := len(team.updates)
	team.mu.Unlock()
	st, _, body = ts.call(t, "PATCH", "/api/teammate-specs/"+id, goodToken, map[string]any{})
	if got := decode[map[string]any](t, body); st != 200 || got["name"] != "researcher" || got["role"] != "Research specialist" {
		t.Errorf("PATCH {} = %d %s, want the spec unchanged", st, body)
	}
	team.mu.Lock()
	if len(team.updates) != n {
		t.Errorf("PATCH {} called UpdateTeammateSpec")
	}
	team.mu.Unlock()

	st, _, body = ts.call(t, "GET", "/api/teammate-specs", goodToken, nil)
	if list := decode[[]TeammateSpec](t, body); st != 200 || len(list) != 1 || list[0].ID != id {
		t.Errorf("GET teammate-specs = %d %s", st, body)
	}
	if st, _, body = ts.call(t, "DELETE", "/api/teammate-specs/"+id, goodToken, nil); st != 204 || len(body) != 0 {
		t.Errorf("DELETE teammate-specs/%s = %d %s", id, st, body)
	}
	if st, _, body = ts.call(t, "GET", "/api/teammate-specs", goodToken, nil); string(body) != "[]\n" {
		t.Errorf("after DELETE: GET teammate-specs = %d %s", st, body)
	}
}

func TestSkillSpecs(t *testing.T) {
	ts := newTestServer(t, Options{})
	md := "# DB query\n\nRun SQL with psql."
	st, _, body := ts.call(t, "POST", "/api/skill-specs", goodToken, map[string]any{"name": "db-query", "description": "Run SQL",
		"skillType": "internal", "skillMdContent": md, "allowedTools": "Bash,Read", "argumentHint": "query:string"})
	created := decode[map[string]any](t, body)
	want := map[string]any{"id": created["id"], "name": "db-query", "description": "Run SQL", "skillType": "internal",
		"skillMdContent": md, "allowedTools": "Bash,Read", "argumentHint": "query:string", "createdAt": "2025-02-15T08:00:00Z"}
	if st != 201 || created["id"] == "" || !maps.Equal(created, want) {
		t.Fatalf("POST skill-specs = %d %s", st, body)
	}
	st, _, body = ts.call(t, "POST", "/api/skill-specs", goodToken, map[string]any{"name": "pdf", "description": "Read PDFs",
		"skillType": "external", "pluginName": "document-tools"})
	pdf := decode[SkillSpec](t, body)
	if st != 201 || pdf.SkillType != "external" || pdf.PluginName != "document-tools" {
		t.Fatalf("POST an external skill = %d %s", st, body)
	}
	st, _, body = ts.call(t, "GET", "/api/skill-specs", goodToken, nil)
	if list := decode[[]map[string]any](t, body); st != 200 || len(list) != 2 || !maps.Equal(list[0], want) {
		t.Errorf("GET skill-specs = %d %s", st, body)
	}
	if st, _, body = ts.call(t, "DELETE", "/api/skill-specs/"+pdf.ID, goodToken, nil); st != 204 {
		t.Errorf("DELETE skill-specs/%s = %d %s", pdf.ID, st, body)
	}
}

// TestTeamErrors: every route's errors, as the spec gives them.
func TestTeamErrors(t *testing.T) {
	ts := newTestServer(t, Options{})
	ts.fake.addSession(&pb.SessionSummary{Id: "s1"})
	team := ts.fake.team
	team.skills = []*pb.SkillSpec{{Id: "skill-used", Name: "used"}, {Id: "skill-free", Name: "free"}}
	team.specs = []*pb.TeammateSpec{{Id: "spec-1", Name: "researcher", SkillIds: []string{"skill-used"}}, {Id: "spec-2", Name: "tester"}}
	tests := []struct {
		name         string
		method, path string
		token        string
		body         any
		failWith     error
		status       int
		code         string
		noCall       bool // refused before TeamService is called
	}{
		{name: "no token", method: "GET", path: "/api/sessions/s1/teammates", status: 401, code: "UNAUTHENTICATED", noCall: true},
		{name: "bad token", method: "GET", path: "/api/teammate-specs", token: "bct_bad", status: 401, code: "UNAUTHENTICATED", noCall: true},
		{name: "teammates of an unknown session", method: "GET", path: "/api/sessions/nope/teammates", status: 404, code: "SESSION_NOT_FOUND"},
		{name: "teammate of an unknown session", method: "GET", path: "/api/sessions/nope/teammates/a1", status: 404, code: "SESSION_NOT_FOUND"},
		{name: "unknown teammate", method: "GET", path: "/api/sessions/s1/teammates/a1", status: 404, code: "TEAMMATE_NOT_FOUND"},
		{name: "tasks of an unknown session", method: "GET", path: "/api/sessions/nope/tasks", status: 404, code: "SESSION_NOT_FOUND"},
		{name: "spec without a name", method: "POST", path: "/api/teammate-specs", body: map[string]any{"role": "x"}, status: 400, code: "INVALID_ARGUMENT"},
		{name: "spec with an unknown skill", method: "POST", path: "/api/teammate-specs", body: map[string]any{"name": "n", "skillIds": []string{"skill-x"}}, status: 400, code: "INVALID_ARGUMENT"},
		{name: "spec with a duplicate name", method: "POST", path: "/api/teammate-specs", body: map[string]any{"name": "researcher"}, status: 409, code: "SPEC_EXISTS"},
		{name: "spec skillIds not a list", method: "POST", path: "/api/teammate-specs", body: map[string]any{"name": "n", "skillIds": "skill-free"}, status: 400, code: "INVALID_ARGUMENT", noCall: true},
		{name: "malformed spec", method: "POST", path: "/api/teammate-specs", body: "{", status: 400, code: "INVALID_ARGUMENT", noCall: true},
		{name: "rename to a duplicate", method: "PATCH", path: "/api/teammate-specs/spec-2", body: map[string]any{"name": "researcher"}, status: 409, code: "SPEC_EXISTS"},
		{name: "update an unknown spec", method: "PATCH", path: "/api/teammate-specs/spec-9", body: map[string]any{"role": "x"}, status: 404, code: "SPEC_NOT_FOUND"},
		{name: "empty update of an unknown spec", method: "PATCH", path: "/api/teammate-specs/spec-9", body: map[string]any{}, status: 404, code: "SPEC_NOT_FOUND"},
		{name: "delete an unknown spec", method: "DELETE", path: "/api/teammate-specs/spec-9", status: 404, code: "SPEC_NOT_FOUND"},
		{name: "skill without a type", method: "POST", path: "/api/skill-specs", body: map[string]any{"name": "s", "description": "d"}, status: 400, code: "INVALID_ARGUMENT", noCall: true},
		{name: "skill of an unknown type", method: "POST", path: "/api/skill-specs", body: map[string]any{"name": "s", "skillType": "builtin"}, status: 400, code: "INVALID_ARGUMENT", noCall: true},
		{name: "internal skill without content", method: "POST", path: "/api/skill-specs", body: map[string]any{"name": "s", "skillType": "internal"}, status: 400, code: "INVALID_ARGUMENT"},
		{name: "skill without a name", method: "POST", path: "/api/skill-specs", body: map[string]any{"skillType": "official"}, status: 400, code: "INVALID_ARGUMENT"},
		{name: "skill with a duplicate name", method: "POST", path: "/api/skill-specs", body: map[string]any{"name": "free", "skillType": "official"}, status: 409, code: "SPEC_EXISTS"},
		{name: "delete a skill still used", method: "DELETE", path: "/api/skill-specs/skill-used", status: 409, code: "SKILL_IN_USE"},
		{name: "delete an unknown skill", method: "DELETE", path: "/api/skill-specs/skill-9", status: 404, code: "SPEC_NOT_FOUND"},
		{name: "an agent without TeamService", method: "GET", path: "/api/skill-specs",
			failWith: status.Error(codes.Unimplemented, "unknown service betcode.v1.TeamService"), status: 501, code: "UNIMPLEMENTED"},
		{name: "machine offline", method: "GET", path: "/api/sessions/s1/tasks",
			failWith: status.Error(codes.Unavailable, "offline"), status: 503, code: "UNAVAILABLE"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.token == "" && tt.status != 401 {
				tt.token = goodToken
			}
			team.mu.Lock()
			team.failWith, team.calls = tt.failWith, 0
			team.mu.Unlock()
			st, _, body := ts.call(t, tt.method, tt.path, tt.token, tt.body)
			e := decode[errorBody](t, body)
			if st != tt.status || e.Code != tt.code || e.Error == "" {
				t.Fatalf("%s %s = %d %s, want %d %s", tt.method, tt.path, st, body, tt.status, tt.code)
			}
			team.mu.Lock()
			calls := team.calls
			team.mu.Unlock()
			if tt.noCall && calls != 0 {
				t.Errorf("TeamService was called %d times, want none", calls)
			}
		})
	}
	// Nothing changed.
	team.mu.Lock()
	defer team.mu.Unlock()
	if len(team.specs) != 2 || len(team.skills) != 2 {
		t.Errorf("after the refused calls: %d specs, %d skills", len(team.specs), len(team.skills))
	}
}

// TestTeamForwardsCredentials: the team routes call TeamService with the
// caller's token and, on the relay, the machine.
func TestTeamForwardsCredentials(t *testing.T) {
	ts := newTestServer(t, Options{Role: RoleRelay})
	st, _, body := ts.call(t, "GET", "/api/teammate-specs", goodToken, nil, headerMachine, "m-7")
	if st != http.StatusOK {
		t.Fatalf("GET teammate-specs = %d %s", st, body)
	}
	md := ts.fake.metadata()
	if got := md.Get(mdMachine); !slices.Equal(got, []string{"m-7"}) {
		t.Errorf("x-betcode-machine-id = %q, want m-7", got)
	}
}
