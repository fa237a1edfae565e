package e2e

import (
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/fakeapi"
)

// TestTeamThroughRelay: TeamService reaches the machine through the relay's
// tunnel with the owner's token, like every agent service: specs are saved
// and read back, refusals keep their BetCode codes, a session's todo list and
// its Agent-tool teammate are listed (the agent runs without the
// subagent_orchestration flag: no subagent teammates); another user reaches
// nothing.
func TestTeamThroughRelay(t *testing.T) {
	w := newWorld(t, "")
	a := w.startAgent("m1", w.addr)
	ctx := onMachine(ctxT(t, 120*time.Second), "m1")
	teams := pb.NewTeamServiceClient(w.client())

	skill, err := teams.CreateSkillSpec(ctx, &pb.CreateSkillSpecRequest{Spec: &pb.SkillSpec{
		Name: "custom-linter", Description: "Run custom linting rules", SkillType: pb.SkillType_SKILL_TYPE_INTERNAL,
		SkillMdContent: "# Custom Linter", AllowedTools: "Bash",
	}})
	if err != nil {
		t.Fatalf("CreateSkillSpec through the relay: %v", err)
	}
	spec, err := teams.CreateTeammateSpec(ctx, &pb.CreateTeammateSpecRequest{Spec: &pb.TeammateSpec{
		Name: "security-auditor", Role: "Security specialist", Instructions: "Analyze code.", SkillIds: []string{skill.GetSpec().GetId()},
	}})
	if err != nil || spec.GetSpec().GetId() == "" || spec.GetSpec().GetCreatedAt() == nil {
		t.Fatalf("CreateTeammateSpec through the relay: %v (%v)", spec, err)
	}
	upd, err := teams.UpdateTeammateSpec(ctx, &pb.UpdateTeammateSpecRequest{
		Spec: &pb.TeammateSpec{Id: spec.GetSpec().GetId(), Instructions: "Focus on OWASP Top 10."}, UpdateMask: []string{"instructions"},
	})
	if err != nil || upd.GetSpec().GetInstructions() != "Focus on OWASP Top 10." || upd.GetSpec().GetRole() != "Security specialist" {
		t.Fatalf("UpdateTeammateSpec through the relay: %v (%v)", upd, err)
	}
	list, err := teams.ListTeammateSpecs(ctx, &pb.ListTeammateSpecsRequest{})
	if err != nil || len(list.GetSpecs()) != 1 || list.GetSpecs()[0].GetInstructions() != "Focus on OWASP Top 10." {
		t.Fatalf("ListTeammateSpecs through the relay: %v (%v)", list, err)
	}
	_, err = teams.CreateTeammateSpec(ctx, &pb.CreateTeammateSpecRequest{Spec: &pb.TeammateSpec{Name: "security-auditor"}})
	if status.Code(err) != codes.AlreadyExists || reason(err) != "SPEC_EXISTS" {
		t.Fatalf("duplicate teammate spec: %v (%s)", err, reason(err))
	}
	_, err = teams.DeleteSkillSpec(ctx, &pb.DeleteSkillSpecRequest{Id: skill.GetSpec().GetId()})
	if status.Code(err) != codes.FailedPrecondition || reason(err) != "SKILL_IN_USE" {
		t.Fatalf("deleting a skill in use: %v (%s)", err, reason(err))
	}

	// A session that keeps a todo list and runs one Agent-tool subagent
	// in the foreground.
	call := &fakeapi.ToolUse{ID: "toolu_relay_agent", Name: "Agent", Input: map[string]any{
		"description": "Count", "prompt": "STREAM 2", "subagent_type": "general-purpose", "run_in_background": false,
	}}
	w.api.Enqueue(fakeapi.Reply{ToolUse: call})
	agentAPI := pb.NewAgentServiceClient(w.client())
	s, err := agentAPI.Converse(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(&pb.AgentRequest{Request: &pb.AgentRequest_Start{Start: &pb.StartConversation{WorkingDirectory: a.project}}}); err != nil {
		t.Fatal(err)
	}
	say := func(msg string) []*pb.AgentEvent {
		t.Helper()
		if err := s.Send(&pb.AgentRequest{Request: &pb.AgentRequest_Message{Message: &pb.UserMessage{Content: msg}}}); err != nil {
			t.Fatal(err)
		}
		return recvUntil(t, s, isTurnComplete)
	}
	id := sessionOf(t, say("delegate the counting"))
	tm, err := teams.ListTeammates(ctx, &pb.ListTeammatesRequest{SessionId: id})
	if err != nil || len(tm.GetTeammates()) != 1 {
		t.Fatalf("ListTeammates through the relay: %v (%v)", tm, err)
	}
	got := tm.GetTeammates()[0]
	if got.GetAgentId() != call.ID || got.GetKind() != pb.TeammateKind_TEAMMATE_KIND_TASK_TOOL ||
		got.GetStatus() != pb.TeammateStatus_TEAMMATE_STATUS_STOPPED || got.GetName() != "Count" || !strings.Contains(got.GetOutput(), "w0 w1") {
		t.Fatalf("the Agent-tool teammate through the relay: %v", got)
	}
	_, err = teams.GetTeammate(ctx, &pb.GetTeammateRequest{SessionId: id, AgentId: "nobody"})
	if status.Code(err) != codes.NotFound || reason(err) != "TEAMMATE_NOT_FOUND" {
		t.Fatalf("unknown teammate: %v (%s)", err, reason(err))
	}
	say("TODO")
	tasks, err := teams.ListTasks(ctx, &pb.ListTasksRequest{SessionId: id})
	if err != nil {
		t.Fatalf("ListTasks through the relay: %v", err)
	}
	var subjects []string
	for _, tk := range tasks.GetTasks() {
		subjects = append(subjects, tk.GetSubject())
	}
	if want := []string{"Write the parser", "Add tests", "Update docs"}; !slices.Equal(subjects, want) {
		t.Fatalf("tasks through the relay: %q, want %q", subjects, want)
	}
	_, err = teams.ListTasks(ctx, &pb.ListTasksRequest{SessionId: "no-such-session"})
	if status.Code(err) != codes.NotFound || reason(err) != "SESSION_NOT_FOUND" {
		t.Fatalf("ListTasks of an unknown session: %v (%s)", err, reason(err))
	}

	// bob: NOT_FOUND for alice's machine, as for every other call; no
	// token: refused before the machine.
	bob := pb.NewTeamServiceClient(w.dial(w.addr, w.userToken("bob")))
	_, err = bob.ListTeammateSpecs(ctx, &pb.ListTeammateSpecsRequest{})
	wantCode(t, "bob ListTeammateSpecs on m1", err, codes.NotFound, `no machine "m1"`)
	_, err = bob.DeleteTeammateSpec(ctx, &pb.DeleteTeammateSpecRequest{Id: spec.GetSpec().GetId()})
	wantCode(t, "bob DeleteTeammateSpec on m1", err, codes.NotFound, `no machine "m1"`)
	_, err = pb.NewTeamServiceClient(w.dial(w.addr, "")).ListSkillSpecs(ctx, &pb.ListSkillSpecsRequest{})
	if status.Code(err) != codes.Unauthenticated {
		t.Fatalf("ListSkillSpecs without a token: %v", err)
	}

	if _, err := teams.DeleteTeammateSpec(ctx, &pb.DeleteTeammateSpecRequest{Id: spec.GetSpec().GetId()}); err != nil {
		t.Fatalf("DeleteTeammateSpec through the relay: %v", err)
	}
	if _, err := teams.DeleteSkillSpec(ctx, &pb.DeleteSkillSpecRequest{Id: skill.GetSpec().GetId()}); err != nil {
		t.Fatalf("DeleteSkillSpec through the relay: %v", err)
	}
}
