package e2e

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/betcode-dev/betcode/agent/internal/testenv"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/fakeapi"
)

// These tests drive permission requests, questions, checklists and plan mode
// through the real CLI: the fake model asks for a tool (RUNTOOL: a Bash
// command that creates fakeapi.ToolFile), and the tests answer as a user would.

const runTool = "please RUNTOOL now"

func isPermissionRequest(ev *pb.AgentEvent) bool { return ev.GetPermissionRequest() != nil }

func isStatus(st pb.AgentStatus) func(*pb.AgentEvent) bool {
	return func(ev *pb.AgentEvent) bool { return ev.GetStatusChange().GetStatus() == st }
}

func isError(code string) func(*pb.AgentEvent) bool {
	return func(ev *pb.AgentEvent) bool { return ev.GetError().GetCode() == code }
}

// permissionRequests returns the PermissionRequests among evs.
func permissionRequests(evs []*pb.AgentEvent) []*pb.PermissionRequest {
	var out []*pb.PermissionRequest
	for _, ev := range evs {
		if pr := ev.GetPermissionRequest(); pr != nil {
			out = append(out, pr)
		}
	}
	return out
}

// toolResult returns the last ToolCallResult among evs, or nil.
func toolResult(evs []*pb.AgentEvent) *pb.ToolCallResult {
	var out *pb.ToolCallResult
	for _, ev := range evs {
		if tr := ev.GetToolCallResult(); tr != nil {
			out = tr
		}
	}
	return out
}

// statusAfter returns the status of the first StatusChange that follows
// the first event matching pred.
func statusAfter(evs []*pb.AgentEvent, pred func(*pb.AgentEvent) bool) pb.AgentStatus {
	seen := false
	for _, ev := range evs {
		if seen {
			if sc := ev.GetStatusChange(); sc != nil {
				return sc.Status
			}
		}
		seen = seen || pred(ev)
	}
	return pb.AgentStatus_AGENT_STATUS_UNSPECIFIED
}

func answer(t *testing.T, s convStream, requestID string, d pb.PermissionDecision, reason string) {
	t.Helper()
	err := s.Send(&pb.AgentRequest{Request: &pb.AgentRequest_Permission{Permission: &pb.PermissionResponse{
		RequestId: requestID, Decision: d, Reason: reason,
	}}})
	if err != nil {
		t.Fatal(err)
	}
}

// toolFileExists reports whether the RUNTOOL command ran in dir.
func toolFileExists(t *testing.T, dir string) bool {
	t.Helper()
	_, err := os.Stat(filepath.Join(dir, fakeapi.ToolFile))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return err == nil
}

func removeToolFile(t *testing.T, dir string) {
	t.Helper()
	if err := os.Remove(filepath.Join(dir, fakeapi.ToolFile)); err != nil {
		t.Fatal(err)
	}
}

func permissionLog(t *testing.T, ctx context.Context, api pb.AgentServiceClient, sessionID string) []*pb.PermissionLogEntry {
	t.Helper()
	resp, err := api.ListPermissionLog(ctx, &pb.PermissionLogRequest{SessionId: sessionID})
	if err != nil {
		t.Fatal(err)
	}
	return resp.Entries
}

// lastMainRequest returns the last request of the CLI's agent loop.
func lastMainRequest(t *testing.T, api *fakeapi.Server) *fakeapi.Request {
	t.Helper()
	reqs := api.Requests()
	for i := len(reqs) - 1; i >= 0; i-- {
		if reqs[i].MainLoop() {
			return &reqs[i]
		}
	}
	t.Fatal("the fake API got no main-loop request")
	return nil
}

// waitForPermission reads a RUNTOOL turn up to its PermissionRequest for
// Bash and the WAITING_FOR_USER status that follows it.
func waitForPermission(t *testing.T, s recver) (*pb.PermissionRequest, []*pb.AgentEvent) {
	t.Helper()
	evs := until(t, s, isPermissionRequest)
	pr := last(evs).GetPermissionRequest()
	if pr.ToolName != "Bash" || pr.RequestId == "" || pr.Input.AsMap()["command"] != fakeapi.ToolCommand {
		t.Fatalf("PermissionRequest = %v, want Bash %q with a request id", pr, fakeapi.ToolCommand)
	}
	if pr.ToolUseId == "" {
		t.Errorf("PermissionRequest has no tool_use_id: %v", pr)
	}
	evs = append(evs, until(t, s, func(ev *pb.AgentEvent) bool {
		return isStatus(pb.AgentStatus_WAITING_FOR_USER)(ev) || isTurnComplete(ev)
	})...)
	if !isStatus(pb.AgentStatus_WAITING_FOR_USER)(last(evs)) {
		t.Fatalf("after the PermissionRequest got %v, want StatusChange WAITING_FOR_USER", last(evs))
	}
	return pr, evs
}

// checkToolRan asserts a finished RUNTOOL turn ran the command.
func checkToolRan(t *testing.T, dir string, evs []*pb.AgentEvent) {
	t.Helper()
	if tr := toolResult(evs); tr == nil || tr.IsError || strings.TrimSpace(tr.Output) != "done" {
		t.Errorf("ToolCallResult = %v, want output \"done\"", tr)
	}
	if !toolFileExists(t, dir) {
		t.Errorf("the tool did not run: %s does not exist", fakeapi.ToolFile)
	}
	if got, want := text(evs), fakeapi.ToolResultPrefix+"done"; got != want {
		t.Errorf("final answer %q, want %q", got, want)
	}
}

func TestPermissionAllowOnceRunsTheToolAndAsksAgain(t *testing.T) {
	api := testenv.FakeAPI(t)
	agent := testenv.StartAgent(t, testenv.AgentOptions{APIURL: api.URL()})
	ctx := ctxT(t)
	dir := agent.ProjectDir(t)
	s := startConv(t, ctx, agent.API, &pb.StartConversation{WorkingDirectory: dir})

	say(t, s, runTool)
	pr, evs := waitForPermission(t, s)
	if toolFileExists(t, dir) {
		t.Fatal("the tool ran before it was allowed")
	}
	answer(t, s, pr.RequestId, pb.PermissionDecision_ALLOW_ONCE, "")
	evs = append(evs, until(t, s, isTurnComplete)...)
	checkSequences(t, evs, 0)
	checkToolRan(t, dir, evs)
	if n := len(permissionRequests(evs)); n != 1 {
		t.Errorf("%d PermissionRequests in the turn, want 1", n)
	}

	// Allowed once only: the same command asks again.
	removeToolFile(t, dir)
	say(t, s, runTool)
	pr2, _ := waitForPermission(t, s)
	if pr2.RequestId == pr.RequestId {
		t.Errorf("the second request reuses request id %s", pr.RequestId)
	}
	if toolFileExists(t, dir) {
		t.Fatal("the tool ran again without asking")
	}
	answer(t, s, pr2.RequestId, pb.PermissionDecision_ALLOW_ONCE, "")
	checkToolRan(t, dir, until(t, s, isTurnComplete))

	entries := permissionLog(t, ctx, agent.API, sessionID(t, evs))
	if len(entries) != 2 {
		t.Fatalf("permission log has %d entries, want 2: %v", len(entries), entries)
	}
	for i, e := range entries {
		if e.Decision != "allow" || e.Source != "user" || e.ToolName != "Bash" || e.Rule != "" {
			t.Errorf("log entry %d = %v, want a user's allow of Bash without a rule", i, e)
		}
	}
	if entries[0].RequestId != pr.RequestId || entries[1].RequestId != pr2.RequestId {
		t.Errorf("log request ids %s, %s; want %s, %s", entries[0].RequestId, entries[1].RequestId, pr.RequestId, pr2.RequestId)
	}
}

func TestPermissionAllowSessionIsRememberedAcrossRestart(t *testing.T) {
	api := testenv.FakeAPI(t)
	agent := testenv.StartAgent(t, testenv.AgentOptions{APIURL: api.URL()})
	ctx := ctxT(t)
	dir := agent.ProjectDir(t)
	s := startConv(t, ctx, agent.API, &pb.StartConversation{WorkingDirectory: dir})

	say(t, s, runTool)
	pr, evs := waitForPermission(t, s)
	id := sessionID(t, evs)
	answer(t, s, pr.RequestId, pb.PermissionDecision_ALLOW_SESSION, "")
	checkToolRan(t, dir, until(t, s, isTurnComplete))

	// The same command runs without asking.
	removeToolFile(t, dir)
	say(t, s, runTool)
	evs = until(t, s, isTurnComplete)
	if prs := permissionRequests(evs); len(prs) != 0 {
		t.Errorf("asked again after ALLOW_SESSION: %v", prs)
	}
	checkToolRan(t, dir, evs)
	entries := permissionLog(t, ctx, agent.API, id)
	if len(entries) != 2 {
		t.Fatalf("permission log has %d entries, want 2: %v", len(entries), entries)
	}
	if e := entries[0]; e.Source != "user" || e.Decision != "allow" || !strings.Contains(e.Rule, fakeapi.ToolCommand) {
		t.Errorf("first log entry = %v, want the user's grant naming the command", e)
	}
	if e := entries[1]; e.Source != "session_grant" || e.Decision != "allow" || !strings.Contains(e.Rule, fakeapi.ToolCommand) {
		t.Errorf("second log entry = %v, want an allow by the session grant", e)
	}
	_ = s.CloseSend()

	// The grant survives an agent restart. Catch up on what happened while
	// away first (see TestRestartKeepsCompletedTurnsComplete), then attach.
	lastSeen := last(evs).Sequence
	agent = agent.Restart(t)
	r, err := agent.API.ResumeSession(ctx, &pb.ResumeSessionRequest{SessionId: id, FromSequence: lastSeen})
	if err != nil {
		t.Fatal(err)
	}
	drain(t, r)
	removeToolFile(t, dir)
	s = startConv(t, ctx, agent.API, &pb.StartConversation{SessionId: id})
	say(t, s, runTool)
	evs = until(t, s, isTurnComplete)
	if prs := permissionRequests(evs); len(prs) != 0 {
		t.Errorf("asked again after a restart: %v", prs)
	}
	checkToolRan(t, dir, evs)
	entries = permissionLog(t, ctx, agent.API, id)
	if len(entries) != 3 || entries[2].Source != "session_grant" || entries[2].Decision != "allow" {
		t.Errorf("permission log after restart = %v, want a third entry: an allow by the session grant", entries)
	}
}

// TestRestartKeepsCompletedTurnsComplete kills the agent after turns that
// completed (the client saw TurnComplete and IDLE): after the restart their
// history must not gain an "interrupted" turn, which a client attached live
// would take for the end of its next turn. A turn's end reaches the client
// only once committed, so the stored session status must be idle by then.
func TestRestartKeepsCompletedTurnsComplete(t *testing.T) {
	api := testenv.FakeAPI(t)
	agent := testenv.StartAgent(t, testenv.AgentOptions{APIURL: api.URL()})
	ctx := ctxT(t)
	const sessions = 3
	lastSeen := map[string]uint64{}
	for range sessions {
		s := startConv(t, ctx, agent.API, &pb.StartConversation{WorkingDirectory: agent.ProjectDir(t)})
		say(t, s, "hello")
		evs := until(t, s, isTurnComplete)
		evs = append(evs, until(t, s, isStatus(pb.AgentStatus_IDLE))...)
		lastSeen[sessionID(t, evs)] = last(evs).Sequence
		_ = s.CloseSend()
	}
	agent = agent.Restart(t)
	for id, seq := range lastSeen {
		r, err := agent.API.ResumeSession(ctx, &pb.ResumeSessionRequest{SessionId: id, FromSequence: seq})
		if err != nil {
			t.Fatal(err)
		}
		if after := drain(t, r); len(after) != 0 {
			t.Errorf("session %s: the restart added events to a completed turn: %v", id, after)
		}
	}
}

func TestPermissionDenyPassesTheReasonToClaude(t *testing.T) {
	api := testenv.FakeAPI(t)
	agent := testenv.StartAgent(t, testenv.AgentOptions{APIURL: api.URL()})
	ctx := ctxT(t)
	dir := agent.ProjectDir(t)
	s := startConv(t, ctx, agent.API, &pb.StartConversation{WorkingDirectory: dir})

	say(t, s, runTool)
	pr, evs := waitForPermission(t, s)
	const reason = "not on Fridays"
	answer(t, s, pr.RequestId, pb.PermissionDecision_DENY, reason)
	evs = append(evs, until(t, s, isTurnComplete)...)
	checkSequences(t, evs, 0)

	if st := statusAfter(evs, isStatus(pb.AgentStatus_WAITING_FOR_USER)); st != pb.AgentStatus_THINKING {
		t.Errorf("status after the deny = %v, want THINKING", st)
	}
	if toolFileExists(t, dir) {
		t.Error("the denied tool ran")
	}
	if tr := toolResult(evs); tr == nil || !tr.IsError || !strings.Contains(tr.Output, reason) {
		t.Errorf("ToolCallResult = %v, want an error quoting %q", tr, reason)
	}
	tr := lastMainRequest(t, api).LastToolResult()
	if tr == nil || !tr.IsError || !strings.Contains(tr.Content, reason) {
		t.Errorf("Claude got tool result %+v, want an error quoting %q", tr, reason)
	}
	if got := text(evs); !strings.Contains(got, reason) {
		t.Errorf("final answer %q does not quote the reason", got)
	}
	entries := permissionLog(t, ctx, agent.API, sessionID(t, evs))
	if len(entries) != 1 || entries[0].Decision != "deny" || entries[0].Source != "user" || !strings.Contains(entries[0].Reason, reason) {
		t.Errorf("permission log = %v, want the user's deny with the reason", entries)
	}
}

func TestPermissionRules(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		ran      bool
		decision string
		rules    []string // the log entry's rule names one of these
	}{
		{
			name: "allow", args: []string{"--allow", "Bash(touch *)", "--allow", "Bash(echo *)"},
			ran: true, decision: "allow", rules: []string{"Bash(touch *)", "Bash(echo *)"},
		},
		{
			name: "deny", args: []string{"--deny", "Bash(touch *)"},
			ran: false, decision: "deny", rules: []string{"Bash(touch *)"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			api := testenv.FakeAPI(t)
			agent := testenv.StartAgent(t, testenv.AgentOptions{APIURL: api.URL(), Args: tc.args})
			ctx := ctxT(t)
			dir := agent.ProjectDir(t)
			s := startConv(t, ctx, agent.API, &pb.StartConversation{WorkingDirectory: dir})
			say(t, s, runTool)
			evs := until(t, s, isTurnComplete)
			checkSequences(t, evs, 0)
			if prs := permissionRequests(evs); len(prs) != 0 {
				t.Errorf("a rule decides, yet the user was asked: %v", prs)
			}
			for _, ev := range evs {
				if isStatus(pb.AgentStatus_WAITING_FOR_USER)(ev) {
					t.Errorf("status went to WAITING_FOR_USER: %v", ev)
				}
			}
			if got := toolFileExists(t, dir); got != tc.ran {
				t.Errorf("tool ran = %v, want %v", got, tc.ran)
			}
			tr := toolResult(evs)
			if tc.ran && (tr == nil || tr.IsError || strings.TrimSpace(tr.Output) != "done") {
				t.Errorf("ToolCallResult = %v, want done", tr)
			}
			if !tc.ran && (tr == nil || !tr.IsError || !strings.Contains(tr.Output, "Bash(touch *)")) {
				t.Errorf("ToolCallResult = %v, want an error naming the rule", tr)
			}
			entries := permissionLog(t, ctx, agent.API, sessionID(t, evs))
			if len(entries) != 1 {
				t.Fatalf("permission log has %d entries, want 1: %v", len(entries), entries)
			}
			e := entries[0]
			named := false
			for _, r := range tc.rules {
				named = named || strings.Contains(e.Rule, r)
			}
			if e.Source != "rule" || e.Decision != tc.decision || !named || e.ToolName != "Bash" {
				t.Errorf("log entry = %v, want a %s by a rule naming one of %q", e, tc.decision, tc.rules)
			}
		})
	}
}

func TestPermissionTimeoutDenies(t *testing.T) {
	api := testenv.FakeAPI(t)
	agent := testenv.StartAgent(t, testenv.AgentOptions{APIURL: api.URL(), Args: []string{"--permission-timeout", "1s"}})
	ctx := ctxT(t)
	dir := agent.ProjectDir(t)
	s := startConv(t, ctx, agent.API, &pb.StartConversation{WorkingDirectory: dir})

	say(t, s, runTool)
	pr, evs := waitForPermission(t, s)
	// Nobody answers.
	evs = append(evs, until(t, s, isError("PERMISSION_TIMEOUT"))...)
	ee := last(evs).GetError()
	if ee.IsFatal || ee.Details["request_id"] != pr.RequestId {
		t.Errorf("timeout ErrorEvent = %v, want non-fatal for request %s", ee, pr.RequestId)
	}
	evs = append(evs, until(t, s, isTurnComplete)...)
	checkSequences(t, evs, 0)
	if st := statusAfter(evs, isError("PERMISSION_TIMEOUT")); st != pb.AgentStatus_THINKING {
		t.Errorf("status after the timeout = %v, want THINKING as after a user's DENY: the denied tool does not run", st)
	}
	if toolFileExists(t, dir) {
		t.Error("the tool ran although nobody allowed it")
	}
	if tr := toolResult(evs); tr == nil || !tr.IsError {
		t.Errorf("ToolCallResult = %v, want an error", tr)
	}
	entries := permissionLog(t, ctx, agent.API, sessionID(t, evs))
	if len(entries) != 1 || entries[0].Source != "timeout" || entries[0].Decision != "deny" || entries[0].RequestId != pr.RequestId {
		t.Errorf("permission log = %v, want one deny by timeout", entries)
	}

	// A late answer is stale.
	answer(t, s, pr.RequestId, pb.PermissionDecision_ALLOW_ONCE, "")
	late := until(t, s, func(ev *pb.AgentEvent) bool { return ev.GetError() != nil })
	if ee := last(late).GetError(); ee.Code != "PERMISSION_STALE" || ee.IsFatal {
		t.Errorf("late answer got %v, want a non-fatal PERMISSION_STALE", ee)
	}
	if toolFileExists(t, dir) {
		t.Error("the late answer ran the tool")
	}
}

func TestPermissionRequestReplaysToAReconnectingClient(t *testing.T) {
	api := testenv.FakeAPI(t)
	agent := testenv.StartAgent(t, testenv.AgentOptions{APIURL: api.URL()})
	ctx := ctxT(t)
	dir := agent.ProjectDir(t)

	cctx, drop := context.WithCancel(ctx)
	s := startConv(t, cctx, agent.API, &pb.StartConversation{WorkingDirectory: dir})
	say(t, s, runTool)
	pr, evs := waitForPermission(t, s)
	id := sessionID(t, evs)
	drop() // the client goes away without answering

	s2 := startConv(t, ctx, agent.API, &pb.StartConversation{SessionId: id, Metadata: map[string]string{"from_sequence": "0"}})
	replayed := until(t, s2, isPermissionRequest)
	if got := last(replayed).GetPermissionRequest(); got.RequestId != pr.RequestId {
		t.Fatalf("replayed PermissionRequest %v, want request %s", got, pr.RequestId)
	}
	if toolFileExists(t, dir) {
		t.Fatal("the tool ran before it was allowed")
	}
	answer(t, s2, pr.RequestId, pb.PermissionDecision_ALLOW_ONCE, "")
	rest := until(t, s2, isTurnComplete)
	checkSequences(t, append(replayed, rest...), 0)
	checkToolRan(t, dir, rest)
	if prs := permissionRequests(rest); len(prs) != 0 {
		t.Errorf("asked again after the answer: %v", prs)
	}
}

func TestQuestionRoundTrip(t *testing.T) {
	api := testenv.FakeAPI(t)
	agent := testenv.StartAgent(t, testenv.AgentOptions{APIURL: api.URL()})
	ctx := ctxT(t)
	s := startConv(t, ctx, agent.API, &pb.StartConversation{WorkingDirectory: agent.ProjectDir(t)})

	say(t, s, "ASK me")
	var qs []*pb.UserQuestion
	evs := until(t, s, func(ev *pb.AgentEvent) bool {
		if q := ev.GetUserQuestion(); q != nil {
			qs = append(qs, q)
		}
		return len(qs) == 2 || isTurnComplete(ev)
	})
	if len(qs) != 2 {
		t.Fatalf("got %d UserQuestions before %v, want 2", len(qs), last(evs))
	}
	want := []struct {
		question string
		multi    bool
		options  []string // label: description
	}{
		{"Which database should we use?", false, []string{"Postgres: Relational, robust", "SQLite: Embedded, simple"}},
		{"Which features do you want?", true, []string{"Auth: Login", "Search: Full text", "Billing: Payments"}},
	}
	for i, w := range want {
		q := qs[i]
		var opts []string
		for _, o := range q.Options {
			opts = append(opts, o.Label+": "+o.Description)
			if o.Value != o.Label {
				t.Errorf("question %d option value %q, want its label %q", i, o.Value, o.Label)
			}
		}
		if q.Question != w.question || q.MultiSelect != w.multi || strings.Join(opts, "|") != strings.Join(w.options, "|") {
			t.Errorf("question %d = %v, want %q multi_select=%v options %q", i, q, w.question, w.multi, w.options)
		}
		if q.QuestionId == "" || q.QuestionId != qs[0].QuestionId {
			t.Errorf("question %d has question_id %q, want the shared id %q", i, q.QuestionId, qs[0].QuestionId)
		}
	}
	evs = append(evs, until(t, s, isStatus(pb.AgentStatus_WAITING_FOR_USER))...)
	if prs := permissionRequests(evs); len(prs) != 0 {
		t.Errorf("a question also gave PermissionRequests: %v", prs)
	}

	err := s.Send(&pb.AgentRequest{Request: &pb.AgentRequest_QuestionResponse{QuestionResponse: &pb.UserQuestionResponse{
		QuestionId: qs[0].QuestionId,
		Answers:    map[string]string{want[0].question: "Postgres", want[1].question: "Auth, Search"},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	evs = append(evs, until(t, s, isTurnComplete)...)
	checkSequences(t, evs, 0)
	for _, ev := range evs {
		if ee := ev.GetError(); ee != nil {
			t.Errorf("error during the question turn: %v", ee)
		}
	}
	tr := lastMainRequest(t, api).LastToolResult()
	if tr == nil || tr.IsError {
		t.Fatalf("Claude got tool result %+v, want the answers", tr)
	}
	for _, part := range []string{want[0].question, "Postgres", want[1].question, "Auth, Search"} {
		if !strings.Contains(tr.Content, part) {
			t.Errorf("Claude's tool result %q does not contain %q", tr.Content, part)
		}
	}
	if !strings.Contains(text(evs), "Postgres") {
		t.Errorf("final answer %q does not quote the answers", text(evs))
	}
}

func TestTodoWriteShowsTheChecklist(t *testing.T) {
	api := testenv.FakeAPI(t)
	agent := testenv.StartAgent(t, testenv.AgentOptions{APIURL: api.URL()})
	ctx := ctxT(t)
	s := startConv(t, ctx, agent.API, &pb.StartConversation{WorkingDirectory: agent.ProjectDir(t)})

	say(t, s, "TODO")
	evs := until(t, s, func(ev *pb.AgentEvent) bool { return isTurnComplete(ev) || isPermissionRequest(ev) })
	if !isTurnComplete(last(evs)) {
		t.Fatalf("TodoWrite asked for permission: %v", last(evs))
	}
	checkSequences(t, evs, 0)
	var updates []*pb.TodoUpdate
	for _, ev := range evs {
		if u := ev.GetTodoUpdate(); u != nil {
			updates = append(updates, u)
		}
	}
	if len(updates) != 1 {
		t.Fatalf("%d TodoUpdates, want 1: %v", len(updates), updates)
	}
	statuses := map[string]pb.TodoStatus{"pending": pb.TodoStatus_PENDING, "in_progress": pb.TodoStatus_IN_PROGRESS, "completed": pb.TodoStatus_COMPLETED}
	todos := fakeapi.TodoInput["todos"].([]any)
	items := updates[0].Items
	if len(items) != len(todos) {
		t.Fatalf("TodoUpdate has %d items, want %d: %v", len(items), len(todos), items)
	}
	for i, td := range todos {
		w := td.(map[string]any)
		it := items[i]
		if it.Subject != w["content"] || it.ActiveForm != w["activeForm"] || it.Status != statuses[w["status"].(string)] || it.Id == "" {
			t.Errorf("item %d = %v, want %v", i, it, w)
		}
	}
	if tr := toolResult(evs); tr == nil || tr.IsError {
		t.Errorf("TodoWrite result = %v, want success", tr)
	}
}

func TestPlanModeExitShowsThePlan(t *testing.T) {
	api := testenv.FakeAPI(t)
	agent := testenv.StartAgent(t, testenv.AgentOptions{APIURL: api.URL()})
	ctx := ctxT(t)
	const plan = "1. do it"
	api.Enqueue(fakeapi.Reply{ToolUse: &fakeapi.ToolUse{Name: "ExitPlanMode", Input: map[string]any{"plan": plan}}})
	s := startConv(t, ctx, agent.API, &pb.StartConversation{WorkingDirectory: agent.ProjectDir(t), PlanMode: true})

	say(t, s, "make a plan")
	evs := until(t, s, func(ev *pb.AgentEvent) bool { return isPermissionRequest(ev) || isTurnComplete(ev) })
	pr := last(evs).GetPermissionRequest()
	if pr == nil || pr.ToolName != "ExitPlanMode" {
		t.Fatalf("got %v, want a PermissionRequest for ExitPlanMode", last(evs))
	}
	// The real CLI sends ExitPlanMode's can_use_tool with an empty input (its
	// current schema has no plan field): the user sees the plan to approve in
	// the tool call the model made.
	entered, shown := false, false
	for _, ev := range evs {
		if ts := ev.GetToolCallStart(); ts != nil && ts.ToolName == "ExitPlanMode" {
			shown = ts.Input.AsMap()["plan"] == plan
		}
		if pr := ev.GetPermissionRequest(); pr != nil && pr.Input.AsMap()["plan"] == plan {
			shown = true
		}
		if pm := ev.GetPlanMode(); pm != nil {
			entered = entered || pm.Active
			if !pm.Active {
				t.Errorf("left plan mode before it was allowed: %v", pm)
			}
		}
	}
	if !entered {
		t.Error("no PlanModeChange{active: true} for a session started in plan mode")
	}
	if !shown {
		t.Errorf("the plan %q was not shown before the approval was asked", plan)
	}
	answer(t, s, pr.RequestId, pb.PermissionDecision_ALLOW_ONCE, "")
	rest := until(t, s, isTurnComplete)
	evs = append(evs, rest...)
	checkSequences(t, evs, 0)
	var exits []*pb.PlanModeChange
	for _, ev := range rest {
		if pm := ev.GetPlanMode(); pm != nil {
			exits = append(exits, pm)
		}
	}
	if len(exits) != 1 || exits[0].Active || exits[0].Plan != plan {
		t.Errorf("PlanModeChanges after the approval = %v, want one {active: false, plan: %q}", exits, plan)
	}
}
