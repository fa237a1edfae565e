package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/betcode-dev/betcode/agent/acp"
	"github.com/betcode-dev/betcode/agent/internal/testenv"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/fakeacp"
	"github.com/betcode-dev/betcode/shared/fakeapi"
)

// The test binary doubles as the fake ACP agent when the daemon runs it
// with fakeacp.EnvRun set (before TestMain, which is shared).
func init() { fakeacp.Main() }

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

	// ListSessions names the provider; ResumeSession replays every event.
	checkListedAs(t, ctx, agent.API, id, pb.SessionProvider_SESSION_PROVIDER_ACP)
	checkReplay(t, ctx, agent.API, id, all)

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

// TestACPFakeAgentEndToEnd drives the daemon with the project's fake ACP
// agent (this test binary) for what claude-agent-acp cannot be made to
// do: a rule that denies a tool by its Claude Code name, and a crash
// mid-turn that the session reports, then resumes with session/load.
func TestACPFakeAgentEndToEnd(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	state := t.TempDir()
	agent := testenv.StartAgent(t, testenv.AgentOptions{
		Args: []string{"--acp-agent", "fake=" + exe, "--deny", "Bash(rm *)"},
		Env:  []string{fakeacp.EnvRun + "=1", fakeacp.EnvState + "=" + state},
	})
	ctx := ctxT(t)
	s := startConv(t, ctx, agent.API, &pb.StartConversation{
		WorkingDirectory: agent.ProjectDir(t), Provider: pb.SessionProvider_SESSION_PROVIDER_ACP,
	})
	var all []*pb.AgentEvent
	say(t, s, "hello")
	evs := until(t, s, isTurnComplete)
	all = append(all, evs...)
	id := sessionID(t, evs)
	if got := text(evs); got != "Hello from the fake ACP agent (turn 1)." {
		t.Errorf("text = %q", got)
	}

	// A rule for Claude Code's Bash denies the ACP agent's command.
	say(t, s, "RUN rm -rf build")
	evs = until(t, s, isTurnComplete)
	all = append(all, evs...)
	for _, ev := range evs {
		if ev.GetPermissionRequest() != nil {
			t.Fatalf("asked for a command the rule denies: %v", ev)
		}
	}
	if got := text(evs); got != "permission: reject" {
		t.Errorf("text = %q, want the agent told of the rejection", got)
	}
	log, err := agent.API.ListPermissionLog(ctx, &pb.PermissionLogRequest{SessionId: id})
	if err != nil {
		t.Fatal(err)
	}
	if len(log.Entries) != 1 || log.Entries[0].Decision != "deny" || log.Entries[0].Source != "rule" || log.Entries[0].ToolName != "Bash" {
		t.Errorf("permission log = %v, want one Bash deny by rule", log.Entries)
	}

	// A crash mid-turn ends the turn as crashed, with the agent's stderr.
	say(t, s, "CRASH")
	evs = until(t, s, isTurnComplete)
	all = append(all, evs...)
	if tc := last(evs).GetTurnComplete(); tc.StopReason != "crashed" {
		t.Errorf("stop reason %q, want crashed", tc.StopReason)
	}
	var crash *pb.ErrorEvent
	for _, ev := range evs {
		if e := ev.GetError(); e != nil {
			crash = e
		}
	}
	if crash == nil || !strings.Contains(crash.Message, "exit status 3") || !strings.Contains(crash.Message, "crashing on purpose") {
		t.Errorf("crash event %v, want the exit status and the stderr line", crash)
	}

	// The next message restarts the agent, which loads its session: the
	// fake saved two turns (the crashed one never finished), so this is
	// its third; a new session would say turn 1.
	say(t, s, "hello")
	evs = until(t, s, isTurnComplete)
	all = append(all, evs...)
	if got := text(evs); got != "Hello from the fake ACP agent (turn 3)." {
		t.Errorf("text after the crash = %q, want the loaded session's second turn", got)
	}
	checkSequences(t, all, 0)
}
