package e2e

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/betcode-dev/betcode/agent/internal/testenv"
	"github.com/betcode-dev/betcode/agent/server"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/fakeapi"
)

// startTurn opens a new session on agent and starts a turn with prompt,
// returning the stream once the first text delta arrived.
func startTurn(t *testing.T, agent *testenv.Agent, prompt string) (convStream, []*pb.AgentEvent) {
	t.Helper()
	s := startConv(t, ctxT(t), agent.API, &pb.StartConversation{WorkingDirectory: agent.ProjectDir(t)})
	evs := until(t, s, func(ev *pb.AgentEvent) bool { return ev.GetSessionInfo() != nil })
	say(t, s, prompt)
	evs = append(evs, until(t, s, func(ev *pb.AgentEvent) bool { return ev.GetTextDelta() != nil })...)
	return s, evs
}

// waitExit waits up to d for the agent to exit and returns how long it took
// from since.
func waitExit(t *testing.T, agent *testenv.Agent, since time.Time, d time.Duration) time.Duration {
	t.Helper()
	select {
	case <-agent.Exited():
	case <-time.After(d):
		t.Fatalf("agent did not exit within %s of SIGTERM\n%s", d, agent.Log())
	}
	if st := agent.Cmd.ProcessState; st == nil || !st.Success() {
		t.Fatalf("agent exit: %v\n%s", agent.Cmd.ProcessState, agent.Log())
	}
	return time.Since(since)
}

// replayAll restarts an agent on the data dir of old and replays session id
// from the start: the events must run from 1 with no gap and end the last
// turn with a TurnComplete and an IDLE status.
func replayAll(t *testing.T, old *testenv.Agent, id string) []*pb.AgentEvent {
	t.Helper()
	agent := testenv.StartAgent(t, old.Opts)
	r, err := agent.API.ResumeSession(ctxT(t), &pb.ResumeSessionRequest{SessionId: id})
	if err != nil {
		t.Fatal(err)
	}
	evs := drain(t, r)
	checkSequences(t, evs, 0)
	tc := -1
	for i, ev := range evs {
		if ev.GetTurnComplete() != nil {
			tc = i
		}
	}
	if tc < 0 || last(evs).GetStatusChange().GetStatus() != pb.AgentStatus_IDLE {
		t.Fatalf("replay does not end with a completed turn and IDLE: %v", evs[max(tc, 0):])
	}
	return evs
}

func TestSIGTERMDrainsRunningTurn(t *testing.T) {
	api := testenv.FakeAPI(t)
	agent := testenv.StartAgent(t, testenv.AgentOptions{APIURL: api.URL(), Args: []string{"--drain-timeout", "60s"}})
	s, got := startTurn(t, agent, "SLOW story please")
	id := sessionID(t, got)

	sent := time.Now()
	if err := agent.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := agent.WaitLog("agent draining", 30*time.Second); err != nil {
		t.Fatalf("%v\n%s", err, agent.Log())
	}
	ctx := ctxT(t)

	// Health says NOT_SERVING while the turn runs on.
	h, err := healthpb.NewHealthClient(agent.Conn).Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil || h.Status != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Errorf("health during the drain = %v, %v; want NOT_SERVING", h, err)
	}
	// A new session is refused with a clear error.
	ns, err := agent.API.Converse(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Send reports io.EOF if the agent already ended the stream; Recv
	// then has its status.
	if err := ns.Send(&pb.AgentRequest{Request: &pb.AgentRequest_Start{Start: &pb.StartConversation{WorkingDirectory: agent.ProjectDir(t)}}}); err != nil && !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	for err == nil {
		_, err = ns.Recv()
	}
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "shutting down") ||
		server.BetCodeCode(err) != server.CodeAgentShuttingDown {
		t.Errorf("new session during the drain: %v; want UNAVAILABLE %s", err, server.CodeAgentShuttingDown)
	}
	// So is a new message on the running session; the turn completes.
	say(t, s, "and another one")
	got = append(got, until(t, s, isTurnComplete)...)
	if r := last(got).GetTurnComplete().GetStopReason(); r != "end_turn" {
		t.Errorf("drained turn ended %q, want end_turn", r)
	}
	if want := strings.Join(fakeapi.NumberedDeltas(50), ""); text(got) != want {
		t.Errorf("drained turn text = %q, want all 50 deltas", text(got))
	}
	// Then the stream ends UNAVAILABLE, for the client to resume later.
	for err = nil; err == nil; {
		var ev *pb.AgentEvent
		if ev, err = s.Recv(); err == nil {
			got = append(got, ev)
		}
	}
	if status.Code(err) != codes.Unavailable || errors.Is(err, io.EOF) {
		t.Errorf("stream ended with %v, want UNAVAILABLE", err)
	}
	refused := false
	for _, ev := range got {
		if e := ev.GetError(); e != nil && ev.Sequence == 0 && e.Code == server.CodeAgentShuttingDown &&
			strings.Contains(e.Message, "accepts no new ones") {
			refused = true
		}
	}
	if !refused {
		t.Errorf("message during the drain was not refused with %s: %v", server.CodeAgentShuttingDown, got)
	}
	took := waitExit(t, agent, sent, 60*time.Second)
	if !strings.Contains(agent.Log(), "agent drained") {
		t.Errorf("no completed drain in the log (exit after %s):\n%s", took, agent.Log())
	}

	// A restarted agent replays the whole session: every event the client
	// saw, in order, and nothing closed as interrupted.
	var seen []*pb.AgentEvent
	for _, ev := range got {
		if ev.Sequence != 0 {
			seen = append(seen, ev)
		}
	}
	replay := replayAll(t, agent, id)
	if len(replay) < len(seen) {
		t.Fatalf("replay has %d events, the client saw %d", len(replay), len(seen))
	}
	for i, ev := range seen {
		if replay[i].Sequence != ev.Sequence || fmt.Sprintf("%T", replay[i].Event) != fmt.Sprintf("%T", ev.Event) {
			t.Fatalf("replay event %d = %v, client saw %v", i, replay[i], ev)
		}
	}
	for _, ev := range replay {
		if tc := ev.GetTurnComplete(); tc != nil && tc.StopReason != "end_turn" {
			t.Errorf("replay has a turn ending %q: %v", tc.StopReason, replay)
		}
	}
}

func TestDrainTimeoutStopsLongTurn(t *testing.T) {
	const drainTimeout = 2 * time.Second
	api := testenv.FakeAPI(t)
	agent := testenv.StartAgent(t, testenv.AgentOptions{APIURL: api.URL(), Args: []string{"--drain-timeout", drainTimeout.String()}})
	s, got := startTurn(t, agent, "STALL forever")
	id := sessionID(t, got)
	sent := time.Now()
	if err := agent.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// Stopping the CLI takes at most three steps of 3s; the margin covers it.
	took := waitExit(t, agent, sent, drainTimeout+15*time.Second)
	if took < drainTimeout || !strings.Contains(agent.Log(), "drain timeout") {
		t.Errorf("agent exited after %s without waiting the drain timeout %s:\n%s", took, drainTimeout, agent.Log())
	}
	var err error
	for err == nil {
		_, err = s.Recv()
	}
	if status.Code(err) != codes.Unavailable {
		t.Errorf("stream ended with %v, want UNAVAILABLE", err)
	}
	// The cut turn ends as after an agent crash, "interrupted", saying why.
	replay := replayAll(t, agent, id)
	var tc *pb.TurnComplete
	var cause *pb.ErrorEvent
	for _, ev := range replay {
		if e := ev.GetError(); e != nil {
			cause = e
		}
		if ev.GetTurnComplete() != nil {
			tc = ev.GetTurnComplete()
		}
	}
	if tc.StopReason != "interrupted" || cause.GetCode() != server.CodeAgentShuttingDown {
		t.Errorf("the cut turn ended %q after error %v; want interrupted after %s", tc.StopReason, cause, server.CodeAgentShuttingDown)
	}
	t.Logf("exit %s after SIGTERM", took)
}

func TestSecondSIGTERMSkipsDrain(t *testing.T) {
	api := testenv.FakeAPI(t)
	agent := testenv.StartAgent(t, testenv.AgentOptions{APIURL: api.URL(), Args: []string{"--drain-timeout", "5m"}})
	_, got := startTurn(t, agent, "STALL forever")
	id := sessionID(t, got)
	if err := agent.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := agent.WaitLog("agent draining", 30*time.Second); err != nil {
		t.Fatalf("%v\n%s", err, agent.Log())
	}
	sent := time.Now()
	if err := agent.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitExit(t, agent, sent, 20*time.Second)
	if !strings.Contains(agent.Log(), "cut short by a second signal") {
		t.Errorf("no skipped drain in the log:\n%s", agent.Log())
	}
	replayAll(t, agent, id)
}
