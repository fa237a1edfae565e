package e2e

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/betcode-dev/betcode/agent/internal/testenv"
	"github.com/betcode-dev/betcode/agent/server"
	"github.com/betcode-dev/betcode/agent/team"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/fakeapi"
)

// TeamService through the daemon (flag on), with the real Claude Code CLI
// and a fake model that delegates to Claude Code's own subagent tool.

const (
	// delegateWord makes the fake model call the Agent tool; with
	// foregroundWord too, it asks for a foreground run.
	delegateWord   = "DELEGATE"
	foregroundWord = "FOREGROUND"
	// subtaskWord marks the subagent's prompt: its request waits for the
	// test (delegatingAPI's proceed) before the model answers subtaskReport.
	subtaskWord   = "SUBTASK"
	subtaskReport = "Three OAuth pitfalls: redirect URIs, state, PKCE."
)

func delegateInput(foreground bool) map[string]any {
	in := map[string]any{"description": "Research OAuth", "prompt": subtaskWord + " research OAuth", "subagent_type": "general-purpose"}
	if foreground {
		in["run_in_background"] = false
	}
	return in
}

// delegatingAPI starts the fake model: DELEGATE calls the Agent tool, and
// each subagent request waits for one receive from proceed.
func delegatingAPI(t *testing.T) (api *fakeapi.Server, proceed chan<- struct{}) {
	t.Helper()
	gate, stop := make(chan struct{}), make(chan struct{})
	api, err := fakeapi.Start(fakeapi.Config{Responder: func(req *fakeapi.Request) fakeapi.Reply {
		if req.MainLoop() && req.LastToolResult() == nil {
			switch p := req.Prompt(); {
			case strings.Contains(p, subtaskWord):
				select {
				case <-gate:
				case <-stop:
				}
				return fakeapi.Reply{Text: subtaskReport}
			case strings.Contains(p, delegateWord):
				return fakeapi.Reply{ToolUse: &fakeapi.ToolUse{Name: "Agent", Input: delegateInput(strings.Contains(p, foregroundWord))}}
			}
		}
		return fakeapi.KeywordReply(req)
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { api.Close() })
	t.Cleanup(func() { close(stop) }) // first: a held request lets go
	return api, gate
}

// waitSubtasks waits until n subagent requests reached the fake model.
func waitSubtasks(t *testing.T, ctx context.Context, api *fakeapi.Server, n int) {
	t.Helper()
	_, err := api.Wait(ctx, func(reqs []fakeapi.Request) bool {
		got := 0
		for _, r := range reqs {
			if r.MainLoop() && strings.Contains(r.Prompt(), subtaskWord) {
				got++
			}
		}
		return got >= n
	})
	if err != nil {
		t.Fatalf("waiting for %d subagent requests: %v", n, err)
	}
}

// let lets one waiting subagent request have its answer.
func let(t *testing.T, ctx context.Context, proceed chan<- struct{}) {
	t.Helper()
	select {
	case proceed <- struct{}{}:
	case <-ctx.Done():
		t.Fatal("no subagent request is waiting for its answer")
	}
}

// agentCall reads the conversation until the model's Agent tool call.
func agentCall(t *testing.T, conv convStream) (*pb.ToolCallStart, []*pb.AgentEvent) {
	t.Helper()
	var call *pb.ToolCallStart
	evs := until(t, conv, func(ev *pb.AgentEvent) bool {
		if c := ev.GetToolCallStart(); c != nil && slices.Contains(team.TaskTools, c.GetToolName()) {
			call = c
			return true
		}
		return false
	})
	if call.GetToolName() != "Agent" {
		t.Errorf("Claude Code calls its subagent tool %q, not Agent: update team.TaskTools' comment and docs/teams.md", call.GetToolName())
	}
	return call, evs
}

// taskUpdates returns the SubagentTaskUpdates of the Agent call id in evs.
func taskUpdates(evs []*pb.AgentEvent, id string) []*pb.SubagentTaskUpdate {
	var out []*pb.SubagentTaskUpdate
	for _, ev := range evs {
		if u := ev.GetSubagentTask(); u != nil && u.GetToolUseId() == id {
			out = append(out, u)
		}
	}
	return out
}

// isTaskEnd matches the SubagentTaskUpdate that ends the Agent call id's
// subagent with status s.
func isTaskEnd(id string, s pb.SubagentTaskStatus) func(*pb.AgentEvent) bool {
	return func(ev *pb.AgentEvent) bool {
		u := ev.GetSubagentTask()
		return u.GetToolUseId() == id && u.GetStatus() == s
	}
}

func listTeammates(t *testing.T, ctx context.Context, svc pb.TeamServiceClient, sessionID string) map[string]*pb.Teammate {
	t.Helper()
	resp, err := svc.ListTeammates(ctx, &pb.ListTeammatesRequest{SessionId: sessionID})
	if err != nil {
		t.Fatalf("ListTeammates: %v", err)
	}
	out := map[string]*pb.Teammate{}
	for i, tm := range resp.GetTeammates() {
		if i > 0 && tm.GetCreatedAt().AsTime().Before(resp.GetTeammates()[i-1].GetCreatedAt().AsTime()) {
			t.Fatalf("teammates not oldest first: %v", resp.GetTeammates())
		}
		out[tm.GetAgentId()] = tm
	}
	return out
}

// watchUntil reads a WatchSubagent stream until pred holds for a message.
func watchUntil(t *testing.T, w pb.SubagentService_WatchSubagentClient, pred func(*pb.WatchSubagentResponse) bool) {
	t.Helper()
	for {
		r, err := w.Recv()
		if err != nil {
			t.Fatalf("WatchSubagent: %v", err)
		}
		if pred(r) {
			return
		}
	}
}

func TestTeam(t *testing.T) {
	api, proceed := delegatingAPI(t)
	agent := testenv.StartAgent(t, testenv.AgentOptions{APIURL: api.URL(), Args: []string{"--feature-flag", server.SubagentOrchestration}})
	teams := pb.NewTeamServiceClient(agent.Conn)
	subs := pb.NewSubagentServiceClient(agent.Conn)
	ctx := testenv.Ctx(t, 4*time.Minute)
	conv := startConv(t, ctx, agent.API, &pb.StartConversation{WorkingDirectory: agent.ProjectDir(t)})

	// Claude Code's own Agent tool, in the foreground: the call is a
	// teammate, working until its result, stopped with the subagent's
	// report.
	say(t, conv, delegateWord+" "+foregroundWord)
	fg, evs := agentCall(t, conv)
	parent := sessionID(t, evs)
	waitSubtasks(t, ctx, api, 1)
	t.Run("foreground Task-tool teammate working", func(t *testing.T) {
		tm := listTeammates(t, ctx, teams, parent)[fg.GetToolId()]
		if tm.GetKind() != pb.TeammateKind_TEAMMATE_KIND_TASK_TOOL || tm.GetStatus() != pb.TeammateStatus_TEAMMATE_STATUS_WORKING ||
			tm.GetName() != "Research OAuth" || tm.GetAgentType() != "general-purpose" || tm.GetPrompt() != subtaskWord+" research OAuth" ||
			tm.GetSessionId() != parent || tm.GetCreatedAt() == nil || tm.GetFinishedAt() != nil {
			t.Fatalf("while the subagent works: %v", tm)
		}
		got, err := teams.GetTeammate(ctx, &pb.GetTeammateRequest{SessionId: parent, AgentId: fg.GetToolId()})
		if err != nil || got.GetTeammate().GetStatus() != pb.TeammateStatus_TEAMMATE_STATUS_WORKING {
			t.Fatalf("GetTeammate: %v, %v", got, err)
		}
	})
	let(t, ctx, proceed)
	fgTurn := until(t, conv, isTurnComplete)
	t.Run("foreground subagent's task updates", func(t *testing.T) {
		// STARTED in the foreground, COMPLETED with the report before the
		// call's own result.
		got := taskUpdates(fgTurn, fg.GetToolId())
		if len(got) < 2 || got[0].GetStatus() != pb.SubagentTaskStatus_SUBAGENT_TASK_STATUS_STARTED || got[0].GetIsBackgrounded() ||
			got[0].GetDescription() != "Research OAuth" || got[0].GetSubagentType() != "general-purpose" || got[0].GetTaskId() == "" {
			t.Fatalf("task updates of the foreground call: %v", got)
		}
		end := got[len(got)-1]
		if end.GetStatus() != pb.SubagentTaskStatus_SUBAGENT_TASK_STATUS_COMPLETED || end.GetSummary() != subtaskReport || end.GetTotalTokens() == 0 {
			t.Fatalf("last task update of the foreground call: %v", end)
		}
		ended := slices.IndexFunc(fgTurn, func(ev *pb.AgentEvent) bool { return ev.GetSubagentTask() == end })
		result := slices.IndexFunc(fgTurn, func(ev *pb.AgentEvent) bool { return ev.GetToolCallResult().GetToolId() == fg.GetToolId() })
		if result < ended || fgTurn[ended].GetParentToolUseId() != "" {
			t.Fatalf("the foreground call's end (event %d, parent %q) does not come before its result (event %d)", ended, fgTurn[ended].GetParentToolUseId(), result)
		}
	})
	t.Run("foreground Task-tool teammate stopped with its report", func(t *testing.T) {
		tm := listTeammates(t, ctx, teams, parent)[fg.GetToolId()]
		if tm.GetStatus() != pb.TeammateStatus_TEAMMATE_STATUS_STOPPED || tm.GetOutput() != subtaskReport || tm.GetError() != "" || tm.GetFinishedAt() == nil {
			t.Fatalf("once the subagent reported: %v", tm)
		}
	})

	// In the background (Claude Code 2.1's default): the call returns at
	// once and the subagent works on after its parent's turn ended.
	say(t, conv, delegateWord)
	bg, _ := agentCall(t, conv)
	turn := until(t, conv, isTurnComplete)
	launched := slices.ContainsFunc(turn, func(ev *pb.AgentEvent) bool {
		r := ev.GetToolCallResult()
		return r.GetToolId() == bg.GetToolId() && strings.HasPrefix(r.GetOutput(), team.BackgroundLaunch)
	})
	if !launched {
		t.Fatalf("the background Agent call's result does not start with %q: %v", team.BackgroundLaunch, turn)
	}
	if got := taskUpdates(turn, bg.GetToolId()); len(got) != 1 || got[0].GetStatus() != pb.SubagentTaskStatus_SUBAGENT_TASK_STATUS_STARTED || !got[0].GetIsBackgrounded() {
		t.Fatalf("task updates of the background call in its parent's turn: %v, want STARTED in the background", got)
	}
	waitSubtasks(t, ctx, api, 2)
	t.Run("background Task-tool teammate working after its parent's turn", func(t *testing.T) {
		tm := listTeammates(t, ctx, teams, parent)[bg.GetToolId()]
		if tm.GetStatus() != pb.TeammateStatus_TEAMMATE_STATUS_WORKING || tm.GetFinishedAt() != nil {
			t.Fatalf("while the background subagent works: %v", tm)
		}
	})
	let(t, ctx, proceed)
	// Claude Code says the subagent completed, then starts a turn of its
	// own to tell the model.
	until(t, conv, isTaskEnd(bg.GetToolId(), pb.SubagentTaskStatus_SUBAGENT_TASK_STATUS_COMPLETED))
	t.Run("background Task-tool teammate stopped with its report", func(t *testing.T) {
		tm := listTeammates(t, ctx, teams, parent)[bg.GetToolId()]
		if tm.GetStatus() != pb.TeammateStatus_TEAMMATE_STATUS_STOPPED || tm.GetOutput() != subtaskReport || tm.GetError() != "" || tm.GetFinishedAt() == nil {
			t.Fatalf("once the background subagent reported: %v", tm)
		}
	})
	until(t, conv, isTurnComplete)

	t.Run("todo list", func(t *testing.T) {
		say(t, conv, "TODO")
		until(t, conv, isTurnComplete)
		resp, err := teams.ListTasks(ctx, &pb.ListTasksRequest{SessionId: parent})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, tk := range resp.GetTasks() {
			got = append(got, tk.GetId()+" "+tk.GetSubject()+" "+strings.TrimPrefix(tk.GetStatus().String(), "TEAM_TASK_STATUS_"))
		}
		want := []string{"1 Write the parser COMPLETED", "2 Add tests IN_PROGRESS", "3 Update docs PENDING"}
		if !slices.Equal(got, want) {
			t.Fatalf("tasks %q, want %q", got, want)
		}
	})

	t.Run("subagent teammate", func(t *testing.T) {
		resp, err := subs.SpawnSubagent(ctx, &pb.SpawnSubagentRequest{ParentSessionId: parent, Spec: &pb.SubagentSpec{Name: "counter", Prompt: "STREAM 3"}})
		if err != nil {
			t.Fatal(err)
		}
		sa := waitSubagent(t, ctx, subs, resp.GetSubagent().GetId())
		tm := listTeammates(t, ctx, teams, parent)[sa.GetId()]
		if tm.GetKind() != pb.TeammateKind_TEAMMATE_KIND_SUBAGENT || tm.GetStatus() != pb.TeammateStatus_TEAMMATE_STATUS_STOPPED ||
			tm.GetSubagentStatus() != pb.SubagentStatus_SUBAGENT_STATUS_COMPLETED || tm.GetName() != "counter" ||
			tm.GetAgentType() != team.SubagentAgentType || tm.GetTeammateSessionId() != sa.GetSessionId() ||
			tm.GetOutput() != "w0 w1 w2 " || tm.GetPrompt() != "STREAM 3" || tm.GetCostUsd() != sa.GetUsage().GetCostUsd() || tm.GetFinishedAt() == nil {
			t.Fatalf("finished subagent as teammate: %v (subagent %v)", tm, sa)
		}
	})

	t.Run("subagent teammate working, then cancelled", func(t *testing.T) {
		resp, err := subs.SpawnSubagent(ctx, &pb.SpawnSubagentRequest{ParentSessionId: parent, Spec: &pb.SubagentSpec{Name: "staller", Prompt: "STALL"}})
		if err != nil {
			t.Fatal(err)
		}
		id := resp.GetSubagent().GetId()
		w, err := subs.WatchSubagent(ctx, &pb.WatchSubagentRequest{SubagentId: id})
		if err != nil {
			t.Fatal(err)
		}
		// Its first words are out: the model stalls after them.
		watchUntil(t, w, func(r *pb.WatchSubagentResponse) bool { return r.GetAgentEvent().GetTextDelta() != nil })
		tm := listTeammates(t, ctx, teams, parent)[id]
		if tm.GetStatus() != pb.TeammateStatus_TEAMMATE_STATUS_WORKING || tm.GetSubagentStatus() != pb.SubagentStatus_SUBAGENT_STATUS_RUNNING ||
			tm.GetOutput() == "" || !strings.HasPrefix("This stream stalls.", tm.GetOutput()) || tm.GetFinishedAt() != nil {
			t.Fatalf("stalled subagent as teammate: %v", tm)
		}
		if _, err := subs.CancelSubagent(ctx, &pb.CancelSubagentRequest{SubagentId: id, Reason: "test"}); err != nil {
			t.Fatal(err)
		}
		tm = listTeammates(t, ctx, teams, parent)[id]
		if tm.GetStatus() != pb.TeammateStatus_TEAMMATE_STATUS_STOPPED || tm.GetSubagentStatus() != pb.SubagentStatus_SUBAGENT_STATUS_CANCELLED {
			t.Fatalf("cancelled subagent as teammate: %v", tm)
		}
	})

	t.Run("teammate spec given to a subagent", func(t *testing.T) {
		skill, err := teams.CreateSkillSpec(ctx, &pb.CreateSkillSpecRequest{Spec: &pb.SkillSpec{
			Name: "counting", Description: "Count in words", SkillType: pb.SkillType_SKILL_TYPE_INTERNAL, SkillMdContent: "# Counting\n\ncount from zero.",
		}})
		if err != nil {
			t.Fatal(err)
		}
		spec, err := teams.CreateTeammateSpec(ctx, &pb.CreateTeammateSpecRequest{Spec: &pb.TeammateSpec{
			Name: "counter-spec", Role: "Counting specialist", Instructions: "count carefully.", SkillIds: []string{skill.GetSpec().GetId()},
		}})
		if err != nil {
			t.Fatal(err)
		}
		resp, err := subs.SpawnSubagent(ctx, &pb.SpawnSubagentRequest{ParentSessionId: parent, Spec: &pb.SubagentSpec{
			Prompt: "STREAM 2", TeammateSpecId: spec.GetSpec().GetId(),
		}})
		if err != nil {
			t.Fatalf("SpawnSubagent with teammate_spec_id: %v", err)
		}
		sa := waitSubagent(t, ctx, subs, resp.GetSubagent().GetId())
		tm := listTeammates(t, ctx, teams, parent)[sa.GetId()]
		for _, want := range []string{`You are the teammate "counter-spec".`, "Role: Counting specialist", "count carefully.", "# Counting", "STREAM 2"} {
			if !strings.Contains(tm.GetPrompt(), want) {
				t.Fatalf("the subagent's prompt lacks %q: %q", want, tm.GetPrompt())
			}
		}
		if tm.GetName() != "counter-spec" || tm.GetOutput() != "w0 w1 " {
			t.Fatalf("subagent of a teammate spec as teammate: %v", tm)
		}
		_, err = subs.SpawnSubagent(ctx, &pb.SpawnSubagentRequest{ParentSessionId: parent, Spec: &pb.SubagentSpec{Prompt: "STREAM 1", TeammateSpecId: "no-such-spec"}})
		wantBetCode(t, "SpawnSubagent with an unknown teammate spec", err, codes.NotFound, team.CodeSpecNotFound)
		_, err = teams.DeleteSkillSpec(ctx, &pb.DeleteSkillSpecRequest{Id: skill.GetSpec().GetId()})
		wantBetCode(t, "DeleteSkillSpec of a skill in use", err, codes.FailedPrecondition, team.CodeSkillInUse)
	})

	t.Run("orchestration steps as tasks", func(t *testing.T) {
		resp, err := subs.CreateOrchestration(ctx, &pb.CreateOrchestrationRequest{ParentSessionId: parent, Name: "plan", Steps: []*pb.OrchestrationStep{
			step("a", "STREAM 1"), step("b", "STREAM 2"), step("c", "STREAM 3", "a", "b"),
		}})
		if err != nil {
			t.Fatal(err)
		}
		o := resp.GetOrchestration().GetId()
		_, final := watchOrch(t, ctx, subs, o, nil)
		owners := map[string]string{}
		for _, st := range final.GetSteps() {
			owners[st.GetStepId()] = st.GetSubagentId()
		}
		tasks, err := teams.ListTasks(ctx, &pb.ListTasksRequest{SessionId: parent})
		if err != nil {
			t.Fatal(err)
		}
		type row struct{ id, owner, blocks, blockedBy, status string }
		var got []row
		for _, tk := range tasks.GetTasks() {
			got = append(got, row{tk.GetId(), tk.GetAssignedAgentId(), strings.Join(tk.GetBlocks(), ","), strings.Join(tk.GetBlockedBy(), ","),
				strings.TrimPrefix(tk.GetStatus().String(), "TEAM_TASK_STATUS_")})
		}
		id := func(s string) string { return team.StepTaskID(o, s) }
		want := []row{
			{id("a"), owners["a"], id("c"), "", "COMPLETED"},
			{id("b"), owners["b"], id("c"), "", "COMPLETED"},
			{id("c"), owners["c"], "", id("a") + "," + id("b"), "COMPLETED"},
			{"1", "", "", "", "COMPLETED"}, {"2", "", "", "", "IN_PROGRESS"}, {"3", "", "", "", "PENDING"},
		}
		if !slices.Equal(got, want) {
			t.Fatalf("tasks\n%v\nwant\n%v", got, want)
		}
		if d := tasks.GetTasks()[2].GetDescription(); !strings.HasPrefix(d, "STREAM 3") {
			t.Fatalf("step c's description %q, want its subagent's prompt", d)
		}
		// Every step's subagent is a teammate of the session.
		tms := listTeammates(t, ctx, teams, parent)
		for s, sa := range owners {
			if tm := tms[sa]; tm.GetStepId() != s || tm.GetOrchestrationId() != o {
				t.Fatalf("step %s's subagent %s as teammate: %v", s, sa, tm)
			}
		}
	})

	// Last, as Claude Code may follow it with a turn of its own: an
	// interrupt of the session's turn kills its background subagents too.
	t.Run("background Task-tool teammate stopped by an interrupt", func(t *testing.T) {
		say(t, conv, delegateWord)
		killed, _ := agentCall(t, conv)
		until(t, conv, isTurnComplete)
		waitSubtasks(t, ctx, api, 3) // its model call is held: it works on
		say(t, conv, "SLOW")
		until(t, conv, func(ev *pb.AgentEvent) bool {
			return ev.GetParentToolUseId() == "" && ev.GetTextDelta().GetText() != ""
		})
		if tm := listTeammates(t, ctx, teams, parent)[killed.GetToolId()]; tm.GetStatus() != pb.TeammateStatus_TEAMMATE_STATUS_WORKING {
			t.Fatalf("before the interrupt: %v", tm)
		}
		if err := conv.Send(&pb.AgentRequest{Request: &pb.AgentRequest_Cancel{Cancel: &pb.CancelRequest{Reason: "test"}}}); err != nil {
			t.Fatal(err)
		}
		until(t, conv, isTaskEnd(killed.GetToolId(), pb.SubagentTaskStatus_SUBAGENT_TASK_STATUS_STOPPED))
		tm := listTeammates(t, ctx, teams, parent)[killed.GetToolId()]
		if tm.GetStatus() != pb.TeammateStatus_TEAMMATE_STATUS_STOPPED || tm.GetError() != team.ErrStopped || tm.GetFinishedAt() == nil {
			t.Fatalf("after the interrupt: %v", tm)
		}
	})

	t.Run("errors", func(t *testing.T) {
		_, err := teams.ListTeammates(ctx, &pb.ListTeammatesRequest{SessionId: "no-such-session"})
		wantBetCode(t, "ListTeammates of an unknown session", err, codes.NotFound, team.CodeSessionNotFound)
		_, err = teams.GetTeammate(ctx, &pb.GetTeammateRequest{SessionId: parent, AgentId: "no-such-agent"})
		wantBetCode(t, "GetTeammate of an unknown agent", err, codes.NotFound, team.CodeTeammateNotFound)
		_, err = teams.ListTasks(ctx, &pb.ListTasksRequest{SessionId: "no-such-session"})
		wantBetCode(t, "ListTasks of an unknown session", err, codes.NotFound, team.CodeSessionNotFound)
	})
}

func wantBetCode(t *testing.T, what string, err error, c codes.Code, code string) {
	t.Helper()
	if status.Code(err) != c || server.BetCodeCode(err) != code {
		t.Fatalf("%s: %v (BetCode code %q), want %v / %s", what, err, server.BetCodeCode(err), c, code)
	}
}
