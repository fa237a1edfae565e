package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/betcode-dev/betcode/agent/acp"
	"github.com/betcode-dev/betcode/agent/internal/testenv"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/fakeapi"
)

// requireACPAgent returns the pinned claude-agent-acp or fails with what
// to install (never skips).
func requireACPAgent(t *testing.T) string {
	t.Helper()
	p, err := acp.FindClaudeAgent()
	if err == nil {
		return p
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%v\nCI must install the pinned ACP agent before the tests: run make acp", err)
	}
	t.Fatalf("%v\ninstall it once with `make acp` (scripts/install-acp.sh), or point %s at a claude-agent-acp %s", err, acp.ClaudeAgentBinEnv, acp.PinnedClaudeAgentVersion)
	return ""
}

// startACPAgent runs the real agent with the real claude-agent-acp as the
// ACP agent "claude", against the fake Messages API.
func startACPAgent(t *testing.T) (*testenv.Agent, *fakeapi.Server) {
	t.Helper()
	bin := requireACPAgent(t)
	api := testenv.FakeAPI(t)
	home := t.TempDir()
	if err := acp.ManualModeSettings(home); err != nil {
		t.Fatal(err)
	}
	agent := testenv.StartAgent(t, testenv.AgentOptions{
		Home: home,
		Args: []string{"--acp-agent", "claude=" + bin},
		Env:  acp.ClaudeAgentEnv(home, api.URL()),
	})
	return agent, api
}

func TestACPSessionEndToEnd(t *testing.T) {
	agent, api := startACPAgent(t)
	ctx := ctxT(t)
	dir := agent.ProjectDir(t)
	s := startConv(t, ctx, agent.API, &pb.StartConversation{
		WorkingDirectory: dir, Provider: pb.SessionProvider_SESSION_PROVIDER_ACP,
		ProviderConfig: map[string]string{acp.ConfigAgent: "claude"},
	})
	var all []*pb.AgentEvent

	// Streamed text.
	say(t, s, "STREAM 5")
	evs := until(t, s, isTurnComplete)
	all = append(all, evs...)
	id := sessionID(t, evs)
	if got, want := text(evs), strings.Join(fakeapi.NumberedDeltas(5), ""); got != want {
		t.Errorf("text = %q, want %q", got, want)
	}
	deltas := 0
	for _, ev := range evs {
		if ev.GetTextDelta() != nil {
			deltas++
		}
	}
	if deltas < 2 {
		t.Errorf("text came in %d deltas, want it streamed", deltas)
	}
	if tc := last(evs).GetTurnComplete(); tc.StopReason != "end_turn" {
		t.Errorf("stop reason %q, want end_turn", tc.StopReason)
	}

	// A tool call the client allows: the file appears.
	say(t, s, "RUNTOOL")
	evs = until(t, s, func(ev *pb.AgentEvent) bool { return ev.GetPermissionRequest() != nil })
	all = append(all, evs...)
	req := last(evs).GetPermissionRequest()
	if req.ToolName != "Bash" || !strings.Contains(req.GetInput().GetFields()["command"].GetStringValue(), "created-by-tool.txt") {
		t.Fatalf("permission request = %v", req)
	}
	if err := s.Send(&pb.AgentRequest{Request: &pb.AgentRequest_Permission{Permission: &pb.PermissionResponse{
		RequestId: req.RequestId, Decision: pb.PermissionDecision_ALLOW_ONCE}}}); err != nil {
		t.Fatal(err)
	}
	evs = until(t, s, isTurnComplete)
	all = append(all, evs...)
	if _, err := os.Stat(filepath.Join(dir, "created-by-tool.txt")); err != nil {
		t.Errorf("the allowed tool did not run: %v", err)
	}
	if !strings.Contains(text(evs), "Tool result received") {
		t.Errorf("text after the tool = %q", text(evs))
	}
	checkSequences(t, all, 0)
	if err := s.CloseSend(); err != nil {
		t.Fatal(err)
	}

	// ListSessions names the provider.
	l, err := agent.API.ListSessions(ctx, &pb.ListSessionsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, ss := range l.Sessions {
		if ss.Id == id {
			found = true
			if ss.Provider != pb.SessionProvider_SESSION_PROVIDER_ACP {
				t.Errorf("ListSessions provider = %v, want ACP", ss.Provider)
			}
		}
	}
	if !found {
		t.Fatalf("session %s not listed", id)
	}

	// ResumeSession replays every event from the log.
	r, err := agent.API.ResumeSession(ctx, &pb.ResumeSessionRequest{SessionId: id})
	if err != nil {
		t.Fatal(err)
	}
	replayed := until(t, r, func(ev *pb.AgentEvent) bool { return ev.Sequence >= last(all).Sequence })
	if len(replayed) != len(all) {
		t.Fatalf("replayed %d events, want %d", len(replayed), len(all))
	}
	checkSequences(t, replayed, 0)
	for i := range all {
		if fmt.Sprintf("%T", replayed[i].Event) != fmt.Sprintf("%T", all[i].Event) || replayed[i].Sequence != all[i].Sequence {
			t.Fatalf("replayed event %d = %v, want %v", i, replayed[i], all[i])
		}
	}
	if err := r.CloseSend(); err != nil {
		t.Fatal(err)
	}

	// After a restart of the agent the next message loads the ACP session
	// (session/load): the model sees the earlier turns.
	agent = agent.Restart(t)
	s = startConv(t, ctx, agent.API, &pb.StartConversation{SessionId: id})
	say(t, s, "hello again")
	evs = until(t, s, isTurnComplete)
	if evs[0].Sequence <= last(all).Sequence {
		t.Fatalf("first event after the restart has sequence %d, not above %d", evs[0].Sequence, last(all).Sequence)
	}
	reqs := api.Requests()
	conv := reqs[len(reqs)-1].Conversation()
	if len(conv) < 3 || !strings.Contains(conv[0].Text, "STREAM 5") {
		t.Errorf("the model saw %d messages after the restart (first %q); want the earlier turns loaded", len(conv), firstText(conv))
	}
}

func firstText(ms []fakeapi.Message) string {
	if len(ms) == 0 {
		return ""
	}
	return ms[0].Text
}
