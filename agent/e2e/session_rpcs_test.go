package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/betcode-dev/betcode/agent/internal/testenv"
	"github.com/betcode-dev/betcode/agent/server"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/fakeapi"
)

// These tests drive the web API's session RPCs (StartSession,
// AnswerPermission, AnswerQuestion, WatchSessions, RenameSession,
// DeleteSession) through the real daemon and the real CLI.

// asUser is ctx with the x-betcode-user metadata the relay sets.
func asUser(ctx context.Context, user string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, server.MDUser, user)
}

// wantStatus fails unless err is a status with code c and BetCode code bc.
func wantStatus(t *testing.T, what string, err error, c codes.Code, bc string) {
	t.Helper()
	if status.Code(err) != c || server.BetCodeCode(err) != bc {
		t.Fatalf("%s: got %v (betcode %q), want %v / %s", what, err, server.BetCodeCode(err), c, bc)
	}
}

// resume replays a session from its first event and follows it until it
// is idle (or, with follow, until ctx ends).
func resume(t *testing.T, ctx context.Context, api pb.AgentServiceClient, id string, follow bool) grpc.ServerStreamingClient[pb.AgentEvent] {
	t.Helper()
	if follow {
		ctx = metadata.AppendToOutgoingContext(ctx, server.MDFollow, "true")
	}
	r, err := api.ResumeSession(ctx, &pb.ResumeSessionRequest{SessionId: id})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// startSession calls StartSession and checks the answer names a session.
func startSession(t *testing.T, ctx context.Context, api pb.AgentServiceClient, req *pb.StartSessionRequest) *pb.StartSessionResponse {
	t.Helper()
	resp, err := api.StartSession(ctx, req)
	if err != nil {
		t.Fatalf("StartSession: %v", err)
	}
	if resp.GetSession().GetId() == "" {
		t.Fatalf("StartSession answered %v, without a session id", resp)
	}
	return resp
}

func TestStartSessionRunsTheFirstTurnWithoutAStream(t *testing.T) {
	api := testenv.FakeAPI(t)
	agent := testenv.StartAgent(t, testenv.AgentOptions{APIURL: api.URL()})
	ctx := ctxT(t)
	dir := agent.ProjectDir(t)
	req := &pb.StartSessionRequest{
		WorkingDirectory: dir, Name: "first try", IdempotencyKey: "key-1",
		Message: &pb.UserMessage{Content: "hello there"},
	}
	resp := startSession(t, asUser(ctx, "alice"), agent.API, req)
	sum := resp.Session
	if resp.Duplicate || sum.Name != "first try" || sum.CreatedBy != "alice" || sum.WorkingDirectory != dir || resp.Sequence == 0 {
		t.Errorf("StartSession = %v, want a new session named %q created by alice in %s with its SessionInfo sequenced", resp, req.Name, dir)
	}

	// Nobody was attached: the turn ran anyway and replays in full.
	evs := drain(t, resume(t, ctx, agent.API, sum.Id, false))
	checkSequences(t, evs, 0)
	if sessionID(t, evs) != sum.Id {
		t.Errorf("the replay's SessionInfo names another session")
	}
	if got := text(evs); got != fakeapi.HelloText {
		t.Errorf("the first turn answered %q, want %q", got, fakeapi.HelloText)
	}
	var tc *pb.TurnComplete
	for _, ev := range evs {
		if ev.GetTurnComplete() != nil {
			tc = ev.GetTurnComplete()
		}
	}
	if tc.GetStopReason() != "end_turn" {
		t.Fatalf("turn ended with %v, want end_turn", tc)
	}

	// The same key again starts nothing and names the same session.
	again := startSession(t, ctx, agent.API, req)
	if !again.Duplicate || again.Session.Id != sum.Id {
		t.Errorf("repeat with the same idempotency key = %v, want duplicate of %s", again, sum.Id)
	}
	list, err := agent.API.ListSessions(ctx, &pb.ListSessionsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if list.Total != 1 || len(list.Sessions) != 1 {
		t.Fatalf("ListSessions = %v, want the one session", list)
	}
	got := list.Sessions[0]
	if got.Name != "first try" || got.CreatedBy != "alice" || got.LastStopReason != "end_turn" ||
		got.AgentStatus != pb.AgentStatus_IDLE || got.PendingPrompts != 0 || got.MessageCount == 0 || got.LastMessagePreview != "hello there" {
		t.Errorf("ListSessions summary = %v", got)
	}
	if n := len(api.Requests()); n == 0 {
		t.Error("the fake API saw no request")
	}
}

func TestStartSessionRefusesBadRequests(t *testing.T) {
	agent := testenv.StartAgent(t, testenv.AgentOptions{})
	ctx := ctxT(t)
	dir := agent.ProjectDir(t)
	tests := []struct {
		name string
		req  *pb.StartSessionRequest
		code codes.Code
		bc   string
	}{
		{"missing directory", &pb.StartSessionRequest{WorkingDirectory: filepath.Join(dir, "nope")}, codes.InvalidArgument, server.CodeDirectoryNotFound},
		{"file as directory", &pb.StartSessionRequest{WorkingDirectory: writeFile(t, dir, "f.txt", "x")}, codes.InvalidArgument, server.CodeDirectoryNotFound},
		{"relative directory", &pb.StartSessionRequest{WorkingDirectory: "rel/dir"}, codes.InvalidArgument, server.CodeInvalidArgument},
		{"unknown permission mode", &pb.StartSessionRequest{WorkingDirectory: dir, PermissionMode: "yolo"}, codes.InvalidArgument, server.CodeInvalidArgument},
		{"name too long", &pb.StartSessionRequest{WorkingDirectory: dir, Name: strings.Repeat("é", 201)}, codes.InvalidArgument, server.CodeInvalidArgument},
		{"message too large", &pb.StartSessionRequest{WorkingDirectory: dir, Message: &pb.UserMessage{Content: strings.Repeat("x", 2<<20)}}, codes.InvalidArgument, server.CodeInvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := agent.API.StartSession(ctx, tt.req)
			wantStatus(t, "StartSession", err, tt.code, tt.bc)
		})
	}
	// Nothing was created by the refused calls.
	list, err := agent.API.ListSessions(ctx, &pb.ListSessionsRequest{})
	if err != nil || list.Total != 0 {
		t.Fatalf("ListSessions after refused starts = %v, %v; want none", list, err)
	}
	// A name of exactly 200 characters is fine; an empty message makes an
	// idle session.
	resp := startSession(t, ctx, agent.API, &pb.StartSessionRequest{WorkingDirectory: dir, Name: strings.Repeat("é", 200), Message: &pb.UserMessage{}})
	if resp.Session.AgentStatus != pb.AgentStatus_IDLE || resp.Session.Status != "idle" || resp.Session.MessageCount != 0 {
		t.Errorf("session without a prompt = %v, want idle", resp.Session)
	}
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestAnswerPermissionWithoutAStream(t *testing.T) {
	api := testenv.FakeAPI(t)
	agent := testenv.StartAgent(t, testenv.AgentOptions{APIURL: api.URL()})
	ctx := ctxT(t)
	dir := agent.ProjectDir(t)
	resp := startSession(t, ctx, agent.API, &pb.StartSessionRequest{WorkingDirectory: dir, Message: &pb.UserMessage{Content: runTool}})
	id := resp.Session.Id
	r := resume(t, ctx, agent.API, id, false)
	pr, evs := waitForPermission(t, r)
	if toolFileExists(t, dir) {
		t.Fatal("the tool ran before it was allowed")
	}

	// The answer goes to the wrong session, then to the right one.
	_, err := agent.API.AnswerPermission(ctx, &pb.AnswerPermissionRequest{SessionId: "no-such-session",
		Response: &pb.PermissionResponse{RequestId: pr.RequestId, Decision: pb.PermissionDecision_ALLOW_ONCE}})
	wantStatus(t, "AnswerPermission to an unknown session", err, codes.NotFound, server.CodeSessionNotFound)
	ans, err := agent.API.AnswerPermission(ctx, &pb.AnswerPermissionRequest{SessionId: id,
		Response: &pb.PermissionResponse{RequestId: pr.RequestId, Decision: pb.PermissionDecision_ALLOW_ONCE}})
	if err != nil {
		t.Fatalf("AnswerPermission: %v", err)
	}
	if ans.Sequence <= last(evs).Sequence {
		t.Errorf("AnswerPermission sequence %d, want past the request's %d", ans.Sequence, last(evs).Sequence)
	}
	evs = append(evs, until(t, r, isTurnComplete)...)
	checkSequences(t, evs, 0)
	checkToolRan(t, dir, evs)

	// A second answer finds nothing pending.
	_, err = agent.API.AnswerPermission(ctx, &pb.AnswerPermissionRequest{SessionId: id,
		Response: &pb.PermissionResponse{RequestId: pr.RequestId, Decision: pb.PermissionDecision_DENY}})
	wantStatus(t, "second AnswerPermission", err, codes.FailedPrecondition, server.CodePermissionNotPending)
	_, err = agent.API.AnswerPermission(ctx, &pb.AnswerPermissionRequest{SessionId: id, Response: &pb.PermissionResponse{Decision: pb.PermissionDecision_ALLOW_ONCE}})
	wantStatus(t, "AnswerPermission without a request id", err, codes.InvalidArgument, server.CodeInvalidArgument)

	entries := permissionLog(t, ctx, agent.API, id)
	if len(entries) != 1 || entries[0].Decision != "allow" || entries[0].Source != "user" || entries[0].RequestId != pr.RequestId {
		t.Errorf("permission log = %v, want the one allow", entries)
	}
}

func TestAnswerPermissionWithUpdatedInputRunsTheEditedTool(t *testing.T) {
	api := testenv.FakeAPI(t)
	agent := testenv.StartAgent(t, testenv.AgentOptions{APIURL: api.URL()})
	ctx := ctxT(t)
	dir := agent.ProjectDir(t)
	resp := startSession(t, ctx, agent.API, &pb.StartSessionRequest{WorkingDirectory: dir, Message: &pb.UserMessage{Content: runTool}})
	r := resume(t, ctx, agent.API, resp.Session.Id, false)
	pr, _ := waitForPermission(t, r)

	const edited = "printf 'edited by the user' > edited.txt && echo done"
	input, err := structpb.NewStruct(map[string]any{"command": edited, "description": "Write the edited file"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = agent.API.AnswerPermission(ctx, &pb.AnswerPermissionRequest{SessionId: resp.Session.Id, Response: &pb.PermissionResponse{
		RequestId: pr.RequestId, Decision: pb.PermissionDecision_ALLOW_ONCE, UpdatedInput: input,
	}})
	if err != nil {
		t.Fatalf("AnswerPermission: %v", err)
	}
	evs := until(t, r, isTurnComplete)
	b, err := os.ReadFile(filepath.Join(dir, "edited.txt"))
	if err != nil || string(b) != "edited by the user" {
		t.Errorf("edited.txt = %q, %v; want the edited command's output", b, err)
	}
	if toolFileExists(t, dir) {
		t.Errorf("the original command ran: %s exists", fakeapi.ToolFile)
	}
	if tr := toolResult(evs); tr == nil || tr.IsError || strings.TrimSpace(tr.Output) != "done" {
		t.Errorf("ToolCallResult = %v, want done", tr)
	}
	entries := permissionLog(t, ctx, agent.API, resp.Session.Id)
	if len(entries) != 1 || entries[0].Decision != "allow" || !strings.Contains(entries[0].Reason, "edited") {
		t.Errorf("permission log = %v, want an allow noting the edit", entries)
	}
	if !strings.Contains(agent.Log(), "edited.txt") {
		t.Error("the agent's log does not show the edited input")
	}
}

func TestAnswerQuestionWithoutAStream(t *testing.T) {
	api := testenv.FakeAPI(t)
	agent := testenv.StartAgent(t, testenv.AgentOptions{APIURL: api.URL()})
	ctx := ctxT(t)
	resp := startSession(t, ctx, agent.API, &pb.StartSessionRequest{WorkingDirectory: agent.ProjectDir(t), Message: &pb.UserMessage{Content: "ASK me"}})
	id := resp.Session.Id
	r := resume(t, ctx, agent.API, id, false)
	until(t, r, func(ev *pb.AgentEvent) bool { return ev.GetUserQuestion() != nil })
	evs := until(t, r, isStatus(pb.AgentStatus_WAITING_FOR_USER))
	var qid string
	for _, ev := range evs {
		if q := ev.GetUserQuestion(); q != nil {
			qid = q.QuestionId
		}
	}
	if qid == "" {
		t.Fatalf("no question id before WAITING_FOR_USER: %v", evs)
	}
	answers := map[string]string{"Which database should we use?": "SQLite", "Which features do you want?": "Auth"}
	if _, err := agent.API.AnswerQuestion(ctx, &pb.AnswerQuestionRequest{SessionId: id,
		Response: &pb.UserQuestionResponse{QuestionId: qid, Answers: answers}}); err != nil {
		t.Fatalf("AnswerQuestion: %v", err)
	}
	rest := until(t, r, isTurnComplete)
	if !strings.Contains(text(rest), "SQLite") {
		t.Errorf("final answer %q does not quote the answer", text(rest))
	}
	_, err := agent.API.AnswerQuestion(ctx, &pb.AnswerQuestionRequest{SessionId: id,
		Response: &pb.UserQuestionResponse{QuestionId: qid, Answers: answers}})
	wantStatus(t, "second AnswerQuestion", err, codes.FailedPrecondition, server.CodePermissionNotPending)
}

// updates receives session updates until pred is true for one (inclusive).
func updates(t *testing.T, w grpc.ServerStreamingClient[pb.SessionUpdate], pred func(*pb.SessionUpdate) bool) []*pb.SessionUpdate {
	t.Helper()
	var out []*pb.SessionUpdate
	for {
		u, err := w.Recv()
		if err != nil {
			t.Fatalf("watch: recv after %d updates: %v (last: %v)", len(out), err, lastUpdate(out))
		}
		out = append(out, u)
		if pred(u) {
			return out
		}
	}
}

func lastUpdate(us []*pb.SessionUpdate) *pb.SessionUpdate {
	if len(us) == 0 {
		return nil
	}
	return us[len(us)-1]
}

func watch(t *testing.T, ctx context.Context, api pb.AgentServiceClient, dir string) grpc.ServerStreamingClient[pb.SessionUpdate] {
	t.Helper()
	w, err := api.WatchSessions(ctx, &pb.WatchSessionsRequest{WorkingDirectory: dir})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func TestWatchSessionsShowsEveryChange(t *testing.T) {
	api := testenv.FakeAPI(t)
	agent := testenv.StartAgent(t, testenv.AgentOptions{APIURL: api.URL()})
	ctx := ctxT(t)
	dirA, dirB := agent.ProjectDir(t), agent.ProjectDir(t)
	a := startSession(t, ctx, agent.API, &pb.StartSessionRequest{WorkingDirectory: dirA, Name: "A"}).Session

	// The snapshot: A, then its end.
	all := watch(t, ctx, agent.API, "")
	onlyA := watch(t, ctx, agent.API, dirA)
	for name, w := range map[string]grpc.ServerStreamingClient[pb.SessionUpdate]{"all": all, "dirA": onlyA} {
		snap := updates(t, w, func(u *pb.SessionUpdate) bool { return u.SnapshotDone })
		if len(snap) != 2 || snap[0].Session.GetId() != a.Id || snap[0].Session.Name != "A" || snap[0].Cause != nil || snap[1].Session != nil {
			t.Fatalf("%s: snapshot = %v, want A then snapshot_done", name, snap)
		}
	}

	// B is created and asks for permission.
	b := startSession(t, asUser(ctx, "bob"), agent.API, &pb.StartSessionRequest{WorkingDirectory: dirB, Message: &pb.UserMessage{Content: runTool}}).Session
	got := updates(t, all, func(u *pb.SessionUpdate) bool { return len(u.Pending) > 0 })
	if first := got[0]; first.Session.GetId() != b.Id || first.Cause.GetSessionInfo() == nil || first.Session.CreatedBy != "bob" {
		t.Errorf("first update after StartSession = %v, want B's creation (cause session_info, created_by bob)", first)
	}
	asked := lastUpdate(got)
	pr := asked.Pending[0].GetPermissionRequest()
	if asked.Session.Id != b.Id || asked.Cause.GetPermissionRequest() == nil || asked.Session.PendingPrompts != 1 || len(asked.Pending) != 1 ||
		pr.GetToolName() != "Bash" || asked.Pending[0].Sequence == 0 {
		t.Fatalf("update with the prompt = %v, want B's pending Bash request", asked)
	}
	waiting := updates(t, all, func(u *pb.SessionUpdate) bool { return u.Session.GetAgentStatus() == pb.AgentStatus_WAITING_FOR_USER })
	if u := lastUpdate(waiting); u.Cause.GetStatusChange() == nil || len(u.Pending) != 1 {
		t.Errorf("WAITING_FOR_USER update = %v, want a status change still listing the prompt", u)
	}

	// A watcher that joins now sees the open prompt in its snapshot.
	late := watch(t, ctx, agent.API, "")
	snap := updates(t, late, func(u *pb.SessionUpdate) bool { return u.SnapshotDone })
	var lateB *pb.SessionUpdate
	for _, u := range snap {
		if u.Session.GetId() == b.Id {
			lateB = u
		}
	}
	if lateB == nil || len(lateB.Pending) != 1 || lateB.Pending[0].GetPermissionRequest().GetRequestId() != pr.RequestId ||
		lateB.Session.PendingPrompts != 1 || lateB.Session.AgentStatus != pb.AgentStatus_WAITING_FOR_USER {
		t.Fatalf("late watcher's snapshot of B = %v, want the open prompt and WAITING_FOR_USER", lateB)
	}

	// The answer resolves the prompt; the turn ends.
	if _, err := agent.API.AnswerPermission(ctx, &pb.AnswerPermissionRequest{SessionId: b.Id,
		Response: &pb.PermissionResponse{RequestId: pr.RequestId, Decision: pb.PermissionDecision_ALLOW_ONCE}}); err != nil {
		t.Fatal(err)
	}
	resolved := lastUpdate(updates(t, all, func(u *pb.SessionUpdate) bool { return u.Session.GetPendingPrompts() == 0 }))
	if resolved.Session.Id != b.Id || len(resolved.Pending) != 0 {
		t.Errorf("resolving update = %v, want B with nothing pending", resolved)
	}
	toEnd := updates(t, all, func(u *pb.SessionUpdate) bool { return u.Cause.GetTurnComplete() != nil })
	usage := false
	for _, u := range toEnd {
		usage = usage || (u.Cause.GetUsage() != nil && u.Session.TotalOutputTokens > 0)
	}
	if !usage {
		t.Errorf("no update caused by usage before the turn's end: %v", toEnd)
	}
	ended := lastUpdate(toEnd)
	if ended.Session.Id != b.Id || ended.Session.LastStopReason != "end_turn" || ended.Session.AgentStatus != pb.AgentStatus_IDLE || ended.Session.TotalOutputTokens == 0 {
		t.Errorf("turn end update = %v, want B idle after end_turn with its usage", ended)
	}
	checkToolRan(t, dirB, drain(t, resume(t, ctx, agent.API, b.Id, false)))

	// Rename, then delete.
	renamed, err := agent.API.RenameSession(ctx, &pb.RenameSessionRequest{SessionId: b.Id, Name: "  the B session "})
	if err != nil || renamed.Name != "the B session" {
		t.Fatalf("RenameSession = %v, %v", renamed, err)
	}
	u := lastUpdate(updates(t, all, func(u *pb.SessionUpdate) bool { return u.Session.GetName() == "the B session" }))
	if u.Session.Id != b.Id || u.Cause != nil {
		t.Errorf("rename update = %v, want B without a cause", u)
	}
	if _, err := agent.API.DeleteSession(ctx, &pb.DeleteSessionRequest{SessionId: b.Id}); err != nil {
		t.Fatal(err)
	}
	u = lastUpdate(updates(t, all, func(u *pb.SessionUpdate) bool { return u.Deleted }))
	if u.Session.GetId() != b.Id || u.Session.WorkingDirectory != "" {
		t.Errorf("delete update = %v, want only B's id", u)
	}

	// The watcher of dirA saw none of that: its next update is A's rename.
	if _, err := agent.API.RenameSession(ctx, &pb.RenameSessionRequest{SessionId: a.Id, Name: "A2"}); err != nil {
		t.Fatal(err)
	}
	if u, err := onlyA.Recv(); err != nil || u.Session.GetId() != a.Id || u.Session.Name != "A2" {
		t.Errorf("dirA watcher's first update = %v, %v; want A's rename", u, err)
	}
}

func TestRenameSession(t *testing.T) {
	agent := testenv.StartAgent(t, testenv.AgentOptions{})
	ctx := ctxT(t)
	id := startSession(t, ctx, agent.API, &pb.StartSessionRequest{WorkingDirectory: agent.ProjectDir(t), Name: "old"}).Session.Id
	tests := []struct {
		name, to, want string
		code           codes.Code
		bc             string
		session        string
	}{
		{name: "rename", to: "new name", want: "new name"},
		{name: "200 characters", to: strings.Repeat("ß", 200), want: strings.Repeat("ß", 200)},
		{name: "201 characters", to: strings.Repeat("ß", 201), code: codes.InvalidArgument, bc: server.CodeInvalidArgument},
		{name: "clear", to: "", want: ""},
		{name: "unknown session", to: "x", session: "no-such-session", code: codes.NotFound, bc: server.CodeSessionNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sid := id
			if tt.session != "" {
				sid = tt.session
			}
			sum, err := agent.API.RenameSession(ctx, &pb.RenameSessionRequest{SessionId: sid, Name: tt.to})
			if tt.code != codes.OK {
				wantStatus(t, "RenameSession", err, tt.code, tt.bc)
				return
			}
			if err != nil || sum.Name != tt.want || sum.Id != id {
				t.Fatalf("RenameSession = %v, %v; want name %q", sum, err, tt.want)
			}
		})
	}
	// The name survives a restart.
	if _, err := agent.API.RenameSession(ctx, &pb.RenameSessionRequest{SessionId: id, Name: "kept"}); err != nil {
		t.Fatal(err)
	}
	agent = agent.Restart(t)
	list, err := agent.API.ListSessions(ctx, &pb.ListSessionsRequest{})
	if err != nil || len(list.Sessions) != 1 || list.Sessions[0].Name != "kept" {
		t.Fatalf("ListSessions after a restart = %v, %v; want the name kept", list, err)
	}
}

func TestDeleteSessionStopsARunningTurn(t *testing.T) {
	api := testenv.FakeAPI(t)
	agent := testenv.StartAgent(t, testenv.AgentOptions{APIURL: api.URL()})
	ctx := ctxT(t)
	dir := agent.ProjectDir(t)
	keep := startSession(t, ctx, agent.API, &pb.StartSessionRequest{WorkingDirectory: dir}).Session.Id
	resp := startSession(t, ctx, agent.API, &pb.StartSessionRequest{WorkingDirectory: dir, IdempotencyKey: "slow",
		Message: &pb.UserMessage{Content: "please be SLOW"}})
	id := resp.Session.Id
	r := resume(t, ctx, agent.API, id, true)
	until(t, r, func(ev *pb.AgentEvent) bool { return ev.GetTextDelta().GetText() != "" })

	del, err := agent.API.DeleteSession(ctx, &pb.DeleteSessionRequest{SessionId: id})
	if err != nil || !del.WasActive {
		t.Fatalf("DeleteSession = %v, %v; want was_active", del, err)
	}
	// The follower's stream ends: the session is gone.
	for {
		_, err := r.Recv()
		if err != nil {
			wantStatus(t, "the deleted session's stream", err, codes.NotFound, server.CodeSessionNotFound)
			break
		}
	}
	// Its CLI is stopped: no pool slot is held.
	h, err := pb.NewBetCodeHealthClient(agent.Conn).GetHealthDetails(ctx, &pb.HealthDetailsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range h.Components {
		if c.Name == "subprocess_pool" && !strings.HasPrefix(c.Message, "0/") {
			t.Errorf("subprocess pool after the delete: %q, want no slot used", c.Message)
		}
	}
	list, err := agent.API.ListSessions(ctx, &pb.ListSessionsRequest{})
	if err != nil || list.Total != 1 || list.Sessions[0].Id != keep {
		t.Fatalf("ListSessions after the delete = %v, %v; want only the other session", list, err)
	}
	_, err = resume(t, ctx, agent.API, id, false).Recv()
	wantStatus(t, "ResumeSession of the deleted session", err, codes.NotFound, server.CodeSessionNotFound)
	_, err = agent.API.DeleteSession(ctx, &pb.DeleteSessionRequest{SessionId: id})
	wantStatus(t, "second DeleteSession", err, codes.NotFound, server.CodeSessionNotFound)
	_, err = agent.API.QueueMessage(ctx, &pb.QueueMessageRequest{SessionId: id, Message: &pb.UserMessage{Content: "hi"}})
	wantStatus(t, "QueueMessage to the deleted session", err, codes.NotFound, server.CodeSessionNotFound)

	// The idempotency key is free again: it starts a new session.
	again := startSession(t, ctx, agent.API, &pb.StartSessionRequest{WorkingDirectory: dir, IdempotencyKey: "slow"})
	if again.Duplicate || again.Session.Id == id {
		t.Errorf("StartSession with the deleted session's key = %v, want a new session", again)
	}
	// The deletion survives a restart.
	agent = agent.Restart(t)
	_, err = resume(t, ctx, agent.API, id, false).Recv()
	wantStatus(t, "ResumeSession after a restart", err, codes.NotFound, server.CodeSessionNotFound)
}

func TestStartSessionPermissionModes(t *testing.T) {
	api := testenv.FakeAPI(t)
	agent := testenv.StartAgent(t, testenv.AgentOptions{APIURL: api.URL()})
	ctx := ctxT(t)
	tests := []struct {
		mode   string
		asks   bool   // a PermissionRequest reaches the user
		ran    bool   // the RUNTOOL command ran
		source string // the permission log's source, when it has an entry
	}{
		{mode: "", asks: true},
		{mode: "default", asks: true},
		{mode: "acceptEdits", ran: true},
		{mode: "bypassPermissions", ran: true, source: "mode"},
		{mode: "plan"},
	}
	for _, tt := range tests {
		t.Run("mode="+tt.mode, func(t *testing.T) {
			dir := agent.ProjectDir(t)
			resp := startSession(t, ctx, agent.API, &pb.StartSessionRequest{WorkingDirectory: dir, PermissionMode: tt.mode,
				Message: &pb.UserMessage{Content: runTool}})
			r := resume(t, ctx, agent.API, resp.Session.Id, false)
			evs := until(t, r, func(ev *pb.AgentEvent) bool { return isPermissionRequest(ev) || isTurnComplete(ev) })
			if got := isPermissionRequest(last(evs)); got != tt.asks {
				t.Fatalf("asked = %v, want %v (last event %v)", got, tt.asks, last(evs))
			}
			if tt.asks {
				// A session waiting for an answer can be deleted too.
				if _, err := agent.API.DeleteSession(ctx, &pb.DeleteSessionRequest{SessionId: resp.Session.Id}); err != nil {
					t.Fatal(err)
				}
				return
			}
			if got := toolFileExists(t, dir); got != tt.ran {
				t.Errorf("the tool ran = %v, want %v", got, tt.ran)
			}
			entries := permissionLog(t, ctx, agent.API, resp.Session.Id)
			if tt.source != "" && (len(entries) != 1 || entries[0].Source != tt.source || entries[0].Decision != "allow") {
				t.Errorf("permission log = %v, want one allow by %s", entries, tt.source)
			}
		})
	}
}
