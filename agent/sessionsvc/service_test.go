package sessionsvc

import (
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/betcode-dev/betcode/agent/session"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/fakeapi"
)

const (
	running  = pb.SessionStatus_SESSION_STATUS_RUNNING
	working  = pb.SessionStatus_SESSION_STATUS_WORKING
	stopping = pb.SessionStatus_SESSION_STATUS_STOPPING
	stopped  = pb.SessionStatus_SESSION_STATUS_STOPPED
	claudeP  = pb.SessionProvider_SESSION_PROVIDER_CLAUDE_CODE
)

// collect receives a watch stream until it ends, on a goroutine the test
// waits for.
func collect(st grpc.ServerStreamingClient[pb.SessionStatusEvent]) <-chan []*pb.SessionStatusEvent {
	out := make(chan []*pb.SessionStatusEvent, 1)
	go func() {
		var evs []*pb.SessionStatusEvent
		for {
			ev, err := st.Recv()
			if err != nil {
				out <- evs
				return
			}
			evs = append(evs, ev)
		}
	}()
	return out
}

func statuses(evs []*pb.SessionStatusEvent) []pb.SessionStatus {
	out := make([]pb.SessionStatus, len(evs))
	for i, ev := range evs {
		out[i] = ev.GetNewStatus()
	}
	return out
}

// TestLifecycle creates a session, sends it a message that runs a tool,
// watches every transition and stops it.
func TestLifecycle(t *testing.T) {
	e := newEnv(t, envOptions{allow: []string{"Bash"}})
	ctx := ctxT(t)
	ms := e.create(t, ctx, &pb.CreateSessionRequest{TaskId: "T-1"})
	if ms.GetStatus() != running || ms.GetProvider() != claudeP || ms.GetPid() == 0 || ms.GetStartedAt() == nil {
		t.Fatalf("created session = %v, want RUNNING claude-code with a pid and started_at", ms)
	}
	if !strings.HasPrefix(ms.GetAgentName(), "claude-code-") || ms.GetTaskId() != "T-1" {
		t.Fatalf("agent_name %q task_id %q", ms.GetAgentName(), ms.GetTaskId())
	}
	w, err := e.api.WatchSession(ctx, &pb.WatchSessionRequest{SessionId: ms.GetId()})
	if err != nil {
		t.Fatal(err)
	}
	// The first event is the current status: once it arrived, the watcher
	// is registered and sees every later transition.
	first, err := w.Recv()
	if err != nil || first.GetNewStatus() != running {
		t.Fatalf("first watch event %v, %v; want RUNNING", first, err)
	}
	watched := collect(w)

	acts, err := e.send(t, ctx, ms.GetId(), "please RUNTOOL now")
	if err != nil {
		t.Fatalf("SendMessage: %v", err)
	}
	var types []pb.ActivityType
	for _, a := range acts {
		types = append(types, a.GetType())
		if a.GetSessionId() != ms.GetId() || a.GetTimestamp() == nil {
			t.Fatalf("activity %v lacks session id or timestamp", a)
		}
	}
	call := slices.Index(types, pb.ActivityType_ACTIVITY_TYPE_TOOL_CALL)
	result := slices.Index(types, pb.ActivityType_ACTIVITY_TYPE_TOOL_RESULT)
	if call < 0 || result < call {
		t.Fatalf("activity types %v: want a TOOL_CALL then a TOOL_RESULT", types)
	}
	if acts[call].GetToolName() != "Bash" || acts[result].GetToolCallId() != acts[call].GetToolCallId() || !acts[result].GetToolSuccess() {
		t.Fatalf("tool call %v / result %v", acts[call], acts[result])
	}
	done := acts[len(acts)-1]
	if done.GetType() != pb.ActivityType_ACTIVITY_TYPE_COMPLETION || done.GetContent() == "" || done.GetTokensOutput() == 0 {
		t.Fatalf("last activity %v: want a COMPLETION with text and output tokens", done)
	}

	got, err := e.api.GetSession(ctx, &pb.GetSessionRequest{SessionId: ms.GetId()})
	if err != nil || got.GetStatus() != running || got.GetTokensOutput() == 0 {
		t.Fatalf("GetSession after the turn: %v, %v", got, err)
	}
	stop, err := e.api.StopSession(ctx, &pb.StopSessionRequest{SessionId: ms.GetId(), Graceful: true})
	if err != nil {
		t.Fatalf("StopSession: %v", err)
	}
	if s := stop.GetSession(); s.GetStatus() != stopped || s.GetEndedAt() == nil || s.GetPid() != 0 {
		t.Fatalf("stopped session = %v", s)
	}
	evs := <-watched
	want := []pb.SessionStatus{working, running, stopping, stopped}
	if got := statuses(evs); !slices.Equal(got, want) {
		t.Fatalf("watched transitions %v, want %v", got, want)
	}
	for i, ev := range evs[1:] {
		if ev.GetPreviousStatus() != evs[i].GetNewStatus() {
			t.Fatalf("transition %d: previous %v, want %v", i+1, ev.GetPreviousStatus(), evs[i].GetNewStatus())
		}
	}

	_, err = e.api.StopSession(ctx, &pb.StopSessionRequest{SessionId: ms.GetId()})
	wantCode(t, "StopSession on a stopped session", err, codes.FailedPrecondition, CodeAlreadyStopped)
	_, err = e.send(t, ctx, ms.GetId(), "hello")
	wantCode(t, "SendMessage to a stopped session", err, codes.FailedPrecondition, CodeWrongState)

	// Stopped sessions are listed only on request.
	list, err := e.api.ListSessions(ctx, &pb.SessionServiceListSessionsRequest{})
	if err != nil || len(list.GetSessions()) != 0 {
		t.Fatalf("ListSessions (active) = %v, %v; want none", list, err)
	}
	list, err = e.api.ListSessions(ctx, &pb.SessionServiceListSessionsRequest{IncludeTerminated: true, Provider: claudeP})
	if err != nil || len(list.GetSessions()) != 1 || list.GetSessions()[0].GetStatus() != stopped {
		t.Fatalf("ListSessions (all) = %v, %v; want the stopped session", list, err)
	}

	// Restart: a new session with the same configuration.
	rs, err := e.api.RestartSession(ctx, &pb.RestartSessionRequest{SessionId: ms.GetId()})
	if err != nil {
		t.Fatalf("RestartSession: %v", err)
	}
	r := rs.GetSession()
	if r.GetId() == ms.GetId() || r.GetStatus() != running || r.GetRestartCount() != 1 || r.GetTaskId() != "T-1" || r.GetAgentName() != ms.GetAgentName() {
		t.Fatalf("restarted session = %v", r)
	}
	acts, err = e.send(t, ctx, r.GetId(), "hello")
	if err != nil || acts[len(acts)-1].GetContent() != fakeapi.HelloText {
		t.Fatalf("SendMessage after restart: %v, %v", acts, err)
	}
}

// TestStopWorking stops a session in the middle of a slow turn, at once.
func TestStopWorking(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := ctxT(t)
	ms := e.create(t, ctx, &pb.CreateSessionRequest{})
	w, err := e.api.WatchSession(ctx, &pb.WatchSessionRequest{SessionId: ms.GetId()})
	if err != nil {
		t.Fatal(err)
	}
	if ev, err := w.Recv(); err != nil || ev.GetNewStatus() != running {
		t.Fatalf("first watch event %v, %v", ev, err)
	}
	st, err := e.api.SendMessage(ctx, &pb.SendMessageRequest{SessionId: ms.GetId(), Message: "SLOW please"})
	if err != nil {
		t.Fatal(err)
	}
	// The turn runs once the session is WORKING.
	if ev, err := w.Recv(); err != nil || ev.GetNewStatus() != working {
		t.Fatalf("second watch event %v, %v; want WORKING", ev, err)
	}
	_, err = e.send(t, ctx, ms.GetId(), "again")
	wantCode(t, "SendMessage to a WORKING session", err, codes.FailedPrecondition, CodeWrongState)
	stop, err := e.api.StopSession(ctx, &pb.StopSessionRequest{SessionId: ms.GetId(), Graceful: false})
	if err != nil || stop.GetSession().GetStatus() != stopped {
		t.Fatalf("StopSession: %v, %v", stop, err)
	}
	// The interrupted SendMessage ends with its completion.
	var last *pb.SessionActivityEvent
	for {
		ev, err := st.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("SendMessage stream: %v", err)
		}
		last = ev
	}
	if last.GetType() != pb.ActivityType_ACTIVITY_TYPE_COMPLETION {
		t.Fatalf("last activity of the stopped turn = %v, want COMPLETION", last)
	}
}

// TestErrors checks the BETCODE-NNNN codes of refused calls.
func TestErrors(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := ctxT(t)
	dir := e.project(t)
	unknown := session.NewSessionID()
	for _, tc := range []struct {
		name     string
		call     func() error
		code     codes.Code
		betcode  string
		contains string
	}{
		{"no working directory", func() error {
			_, err := e.api.CreateSession(ctx, &pb.CreateSessionRequest{Provider: claudeP})
			return err
		}, codes.InvalidArgument, CodeProjectNotFound, "required"},
		{"missing project", func() error {
			_, err := e.api.CreateSession(ctx, &pb.CreateSessionRequest{WorkingDirectory: dir + "/nope", Provider: claudeP})
			return err
		}, codes.NotFound, CodeProjectNotFound, "does not exist"},
		{"no provider", func() error {
			_, err := e.api.CreateSession(ctx, &pb.CreateSessionRequest{WorkingDirectory: dir})
			return err
		}, codes.InvalidArgument, CodeProviderNotSupported, "provider is required"},
		{"openclaw", func() error {
			_, err := e.api.CreateSession(ctx, &pb.CreateSessionRequest{WorkingDirectory: dir, Provider: pb.SessionProvider_SESSION_PROVIDER_OPENCLAW})
			return err
		}, codes.InvalidArgument, CodeProviderNotSupported, "openclaw is not supported by BetCode"},
		{"codex not registered", func() error {
			_, err := e.api.CreateSession(ctx, &pb.CreateSessionRequest{WorkingDirectory: dir, Provider: pb.SessionProvider_SESSION_PROVIDER_CODEX})
			return err
		}, codes.InvalidArgument, CodeProviderNotSupported, "codex is not supported by this agent"},
		{"bad provider_config", func() error {
			_, err := e.api.CreateSession(ctx, &pb.CreateSessionRequest{WorkingDirectory: dir, Provider: claudeP, ProviderConfig: map[string]string{"x": "y"}})
			return err
		}, codes.Internal, CodeCreationFailed, "provider_config"},
		{"get unknown", func() error {
			_, err := e.api.GetSession(ctx, &pb.GetSessionRequest{SessionId: unknown})
			return err
		}, codes.NotFound, CodeSessionNotFound, ""},
		{"stop unknown", func() error {
			_, err := e.api.StopSession(ctx, &pb.StopSessionRequest{SessionId: unknown})
			return err
		}, codes.NotFound, CodeSessionNotFound, ""},
		{"send unknown", func() error {
			_, err := e.send(t, ctx, unknown, "hi")
			return err
		}, codes.NotFound, CodeSessionNotFound, ""},
		{"watch unknown", func() error {
			w, err := e.api.WatchSession(ctx, &pb.WatchSessionRequest{SessionId: unknown})
			if err == nil {
				_, err = w.Recv()
			}
			return err
		}, codes.NotFound, CodeSessionNotFound, ""},
		{"token budget", func() error {
			ms := e.create(t, ctx, &pb.CreateSessionRequest{MaxTokens: 1})
			if _, err := e.send(t, ctx, ms.GetId(), "hello"); err != nil {
				return err
			}
			_, err := e.send(t, ctx, ms.GetId(), "hello")
			return err
		}, codes.ResourceExhausted, CodeTokenBudgetExceeded, "tokens"},
		{"timeout", func() error {
			ms := e.create(t, ctx, &pb.CreateSessionRequest{Timeout: durationpb.New(time.Nanosecond)})
			_, err := e.send(t, ctx, ms.GetId(), "hello")
			return err
		}, codes.DeadlineExceeded, CodeSessionTimeout, "timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			wantCode(t, tc.name, err, tc.code, tc.betcode)
			if !strings.Contains(err.Error(), tc.contains) || !strings.Contains(err.Error(), tc.betcode+": ") {
				t.Fatalf("%s: message %q lacks %q or the code prefix", tc.name, err, tc.contains)
			}
		})
	}
}

// TestNotInstalled: a Claude Code binary that is missing answers
// BETCODE-2002 saying what to install.
func TestNotInstalled(t *testing.T) {
	e := newEnv(t, envOptions{claudeBin: "/nonexistent/claude"})
	_, err := e.api.CreateSession(ctxT(t), &pb.CreateSessionRequest{WorkingDirectory: e.project(t), Provider: claudeP})
	wantCode(t, "CreateSession without claude", err, codes.InvalidArgument, CodeProviderNotSupported)
	if !strings.Contains(err.Error(), "not installed") || !strings.Contains(err.Error(), "npm install -g @anthropic-ai/claude-code") {
		t.Fatalf("error %q does not say what to install", err)
	}
}

// TestAgentServiceSessionsAreManaged: a session made by the manager (as
// AgentService makes them) is visible and drivable through SessionService,
// and a stopped session that receives a message elsewhere is reopened.
func TestAgentServiceSessionsAreManaged(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := ctxT(t)
	all, err := e.api.WatchAllSessions(ctx, &pb.WatchAllSessionsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := e.m.Create(ctx, session.CreateRequest{WorkingDirectory: e.project(t)})
	if err != nil {
		t.Fatal(err)
	}
	ev, err := all.Recv()
	if err != nil || ev.GetSessionId() != s.ID() || ev.GetNewStatus() != running {
		t.Fatalf("WatchAllSessions first event %v, %v; want the new session RUNNING", ev, err)
	}
	got, err := e.api.GetSession(ctx, &pb.GetSessionRequest{SessionId: s.ID()})
	if err != nil || got.GetProvider() != claudeP || got.GetStatus() != running {
		t.Fatalf("GetSession = %v, %v", got, err)
	}
	acts, err := e.send(t, ctx, s.ID(), "hello")
	if err != nil || acts[len(acts)-1].GetContent() != fakeapi.HelloText {
		t.Fatalf("SendMessage: %v, %v", acts, err)
	}
	if _, err := e.api.StopSession(ctx, &pb.StopSessionRequest{SessionId: s.ID()}); err != nil {
		t.Fatal(err)
	}
	// AgentService sends the stopped session a message: it is reopened.
	if err := s.Send(ctx, session.Message{Text: "hello"}); err != nil {
		t.Fatal(err)
	}
	var seen []pb.SessionStatus
	for !slices.Equal(seen, []pb.SessionStatus{working, running, stopping, stopped, working, running}) {
		ev, err := all.Recv()
		if err != nil {
			t.Fatalf("WatchAllSessions after %v: %v", seen, err)
		}
		seen = append(seen, ev.GetNewStatus())
		if len(seen) > 6 {
			t.Fatalf("transitions %v", seen)
		}
	}
	got, err = e.api.GetSession(ctx, &pb.GetSessionRequest{SessionId: s.ID()})
	if err != nil || got.GetStatus() != running || got.GetEndedAt() != nil {
		t.Fatalf("reopened session = %v, %v", got, err)
	}
}
