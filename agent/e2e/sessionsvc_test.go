package e2e

import (
	"errors"
	"io"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/betcode-dev/betcode/agent/internal/testenv"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// These tests drive SessionService through the real daemon (served on its
// socket, as through the relay) and the real Claude Code CLI.

// TestSessionServiceThroughTheDaemon: create, send a message that runs an
// allowed tool, watch the transitions, stop; the session is one of
// AgentService's too, with its provider in ListSessions.
func TestSessionServiceThroughTheDaemon(t *testing.T) {
	api := testenv.FakeAPI(t)
	agent := testenv.StartAgent(t, testenv.AgentOptions{APIURL: api.URL(), Args: []string{"--allow", "Bash"}})
	svc := pb.NewSessionServiceClient(agent.Conn)
	ctx := ctxT(t)
	dir := agent.ProjectDir(t)

	created, err := svc.CreateSession(ctx, &pb.CreateSessionRequest{WorkingDirectory: dir, Provider: pb.SessionProvider_SESSION_PROVIDER_CLAUDE_CODE, AgentName: "coordinator"})
	if err != nil {
		t.Fatalf("CreateSession: %v", err)
	}
	ms := created.GetSession()
	if ms.GetStatus() != pb.SessionStatus_SESSION_STATUS_RUNNING || ms.GetAgentName() != "coordinator" || ms.GetWorkingDirectory() != dir {
		t.Fatalf("created %v", ms)
	}
	w, err := svc.WatchSession(ctx, &pb.WatchSessionRequest{SessionId: ms.GetId()})
	if err != nil {
		t.Fatal(err)
	}
	if ev, err := w.Recv(); err != nil || ev.GetNewStatus() != pb.SessionStatus_SESSION_STATUS_RUNNING {
		t.Fatalf("first watch event %v, %v", ev, err)
	}

	st, err := svc.SendMessage(ctx, &pb.SendMessageRequest{SessionId: ms.GetId(), Message: "please RUNTOOL now"})
	if err != nil {
		t.Fatal(err)
	}
	var acts []*pb.SessionActivityEvent
	for {
		ev, err := st.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("SendMessage: %v", err)
		}
		acts = append(acts, ev)
	}
	var types []pb.ActivityType
	for _, a := range acts {
		types = append(types, a.GetType())
	}
	if !slices.Contains(types, pb.ActivityType_ACTIVITY_TYPE_TOOL_CALL) || !slices.Contains(types, pb.ActivityType_ACTIVITY_TYPE_TOOL_RESULT) {
		t.Fatalf("activity %v: want a tool call and its result", types)
	}
	if last := acts[len(acts)-1]; last.GetType() != pb.ActivityType_ACTIVITY_TYPE_COMPLETION || last.GetTokensOutput() == 0 {
		t.Fatalf("last activity %v", last)
	}

	// AgentService sees the same session, its events and its provider.
	list, err := agent.API.ListSessions(ctx, &pb.ListSessionsRequest{})
	if err != nil || len(list.GetSessions()) != 1 || list.GetSessions()[0].GetId() != ms.GetId() ||
		list.GetSessions()[0].GetProvider() != pb.SessionProvider_SESSION_PROVIDER_CLAUDE_CODE || list.GetSessions()[0].GetName() != "coordinator" {
		t.Fatalf("AgentService.ListSessions = %v, %v", list, err)
	}
	evs := drain(t, resume(t, ctx, agent.API, ms.GetId(), false))
	checkSequences(t, evs, 0)
	var sawTool bool
	for _, ev := range evs {
		sawTool = sawTool || ev.GetToolCallResult() != nil
	}
	if !sawTool {
		t.Fatalf("replay of the managed session (%d events) has no tool result", len(evs))
	}

	if _, err := svc.StopSession(ctx, &pb.StopSessionRequest{SessionId: ms.GetId(), Graceful: true}); err != nil {
		t.Fatalf("StopSession: %v", err)
	}
	var seen []pb.SessionStatus
	for {
		ev, err := w.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("WatchSession: %v", err)
		}
		seen = append(seen, ev.GetNewStatus())
	}
	want := []pb.SessionStatus{pb.SessionStatus_SESSION_STATUS_WORKING, pb.SessionStatus_SESSION_STATUS_RUNNING,
		pb.SessionStatus_SESSION_STATUS_STOPPING, pb.SessionStatus_SESSION_STATUS_STOPPED}
	if !slices.Equal(seen, want) {
		t.Fatalf("transitions %v, want %v", seen, want)
	}
	_, err = svc.StopSession(ctx, &pb.StopSessionRequest{SessionId: ms.GetId()})
	wantStatus(t, "second StopSession", err, codes.FailedPrecondition, "BETCODE-2020")
}

// TestProviderErrors: providers the agent cannot run are refused by
// SessionService and by AgentService's StartSession and Converse, with
// BETCODE-2002 (not supported or not installed) or BETCODE-2030 (not
// configured) and what to do about it.
func TestProviderErrors(t *testing.T) {
	api := testenv.FakeAPI(t)
	// A Codex that is not installed (codex_test.go covers one not configured).
	agent := testenv.StartAgent(t, testenv.AgentOptions{APIURL: api.URL(), Args: []string{"--codex-bin", "/nonexistent/codex"}})
	svc := pb.NewSessionServiceClient(agent.Conn)
	ctx := ctxT(t)
	dir := agent.ProjectDir(t)
	for _, tc := range []struct {
		kind    pb.SessionProvider
		code    codes.Code
		betcode string
		want    string
	}{
		{pb.SessionProvider_SESSION_PROVIDER_OPENCLAW, codes.InvalidArgument, "BETCODE-2002", "openclaw is not supported by BetCode"},
		{pb.SessionProvider_SESSION_PROVIDER_CODEX, codes.InvalidArgument, "BETCODE-2002", "codex is not installed"},
		{pb.SessionProvider_SESSION_PROVIDER_OPENAI_API, codes.Unavailable, "BETCODE-2030", "set --openai-base-url"},
		{pb.SessionProvider_SESSION_PROVIDER_ACP, codes.Unavailable, "BETCODE-2030", "--acp-agent"},
	} {
		t.Run(tc.kind.String(), func(t *testing.T) {
			_, err := svc.CreateSession(ctx, &pb.CreateSessionRequest{WorkingDirectory: dir, Provider: tc.kind})
			wantStatus(t, "CreateSession", err, tc.code, tc.betcode)
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("CreateSession error %q lacks %q", err, tc.want)
			}
			_, err = agent.API.StartSession(ctx, &pb.StartSessionRequest{WorkingDirectory: dir, Provider: tc.kind})
			wantStatus(t, "StartSession", err, tc.code, tc.betcode)
			conv, err := agent.API.Converse(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := conv.Send(&pb.AgentRequest{Request: &pb.AgentRequest_Start{Start: &pb.StartConversation{WorkingDirectory: dir, Provider: tc.kind}}}); err != nil {
				t.Fatal(err)
			}
			// A fatal ErrorEvent with the code, then the status.
			ev, err := conv.Recv()
			if err != nil || ev.GetError().GetCode() != tc.betcode || !ev.GetError().GetIsFatal() {
				t.Fatalf("Converse start: first answer %v, %v; want a fatal %s ErrorEvent", ev, err, tc.betcode)
			}
			_, err = conv.Recv()
			wantStatus(t, "Converse start", err, tc.code, tc.betcode)
		})
	}
	list, err := svc.ListSessions(ctx, &pb.SessionServiceListSessionsRequest{IncludeTerminated: true})
	if err != nil || len(list.GetSessions()) != 0 {
		t.Fatalf("refused providers left sessions behind: %v, %v", list, err)
	}
}
