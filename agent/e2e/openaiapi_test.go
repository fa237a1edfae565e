package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/betcode-dev/betcode/agent/internal/testenv"
	"github.com/betcode-dev/betcode/agent/openaiapi"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/fakeopenai"
)

// Prompts of the openai-api end-to-end test: the fake model answers them
// with a Bash call of its own.
const (
	openaiMakeFile   = "MAKEFILE"
	openaiMadeFile   = "made-by-openai.txt"
	openaiDenyMe     = "DENYME"
	openaiDeniedFile = "denied-by-rule.txt"
	openaiModel      = "gpt-e2e"
	openaiReadIt     = "READIT"
	openaiEscape     = "ESCAPE"
)

// startOpenAIAgent runs the real agent with provider openai-api pointed at
// the fake Responses API, and a --deny rule for touch.
func startOpenAIAgent(t *testing.T) (*testenv.Agent, *fakeopenai.Server) {
	t.Helper()
	api, err := fakeopenai.Start(fakeopenai.Config{Responder: func(r *fakeopenai.Request) fakeopenai.Reply {
		if r.LastToolOutput() == nil {
			switch r.Prompt() {
			case openaiMakeFile:
				return fakeopenai.Reply{Call: fakeopenai.FunctionCall(openaiapi.ToolBash, map[string]any{
					"command": "echo made > " + openaiMadeFile + "; echo done-making"})}
			case openaiReadIt:
				return fakeopenai.Reply{Call: fakeopenai.FunctionCall(openaiapi.ToolRead, map[string]any{"file_path": openaiMadeFile})}
			case openaiEscape:
				return fakeopenai.Reply{Call: fakeopenai.FunctionCall(openaiapi.ToolRead, map[string]any{"file_path": "../../../etc/passwd"})}
			case openaiDenyMe:
				return fakeopenai.Reply{Call: fakeopenai.FunctionCall(openaiapi.ToolBash, map[string]any{
					"command": "touch " + openaiDeniedFile})}
			}
		}
		return fakeopenai.KeywordReply(r)
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = api.Close() })
	agent := testenv.StartAgent(t, testenv.AgentOptions{
		// No Claude session runs: the fake CLI only satisfies the daemon's
		// --claude-bin.
		ClaudeBin: testenv.Binaries(t).FakeClaude,
		Args: []string{
			"--openai-base-url", api.BaseURL(), "--openai-model", openaiModel,
			"--deny", "Bash(touch *)",
		},
		Env: []string{"OPENAI_API_KEY=sk-fake-test"},
	})
	return agent, api
}

func TestOpenAIAPISessionEndToEnd(t *testing.T) {
	agent, api := startOpenAIAgent(t)
	ctx := ctxT(t)
	dir := agent.ProjectDir(t)
	s := startConv(t, ctx, agent.API, &pb.StartConversation{
		WorkingDirectory: dir, Provider: pb.SessionProvider_SESSION_PROVIDER_OPENAI_API,
	})
	var all []*pb.AgentEvent

	// Streamed text, usage of the configured model.
	say(t, s, "STREAM 5")
	evs := until(t, s, isTurnComplete)
	all = append(all, evs...)
	checkSequences(t, evs, 0)
	id := sessionID(t, evs)
	if got, want := text(evs), strings.Join(fakeopenai.NumberedDeltas(5), ""); got != want {
		t.Errorf("text = %q, want %q", got, want)
	}
	if tc := last(evs).GetTurnComplete(); tc.StopReason != "end_turn" {
		t.Errorf("stop reason %q, want end_turn", tc.StopReason)
	}
	usage := false
	for _, ev := range evs {
		if u := ev.GetUsage(); u != nil && u.OutputTokens > 0 && u.Model == openaiModel {
			usage = true
		}
	}
	if !usage {
		t.Errorf("no UsageReport of %s with output tokens", openaiModel)
	}
	if r := api.Requests()[0]; r.Model != openaiModel || r.Header.Get("Authorization") != "Bearer sk-fake-test" {
		t.Errorf("request model %q, authorization %q", r.Model, r.Header.Get("Authorization"))
	}

	// A command a client allows: it runs in the working directory.
	say(t, s, openaiMakeFile)
	evs = until(t, s, func(ev *pb.AgentEvent) bool { return ev.GetPermissionRequest() != nil })
	all = append(all, evs...)
	req := last(evs).GetPermissionRequest()
	if req.ToolName != openaiapi.ToolBash || !strings.Contains(req.GetInput().GetFields()["command"].GetStringValue(), openaiMadeFile) {
		t.Fatalf("permission request = %v", req)
	}
	if err := s.Send(&pb.AgentRequest{Request: &pb.AgentRequest_Permission{Permission: &pb.PermissionResponse{
		RequestId: req.RequestId, Decision: pb.PermissionDecision_ALLOW_ONCE}}}); err != nil {
		t.Fatal(err)
	}
	evs = until(t, s, isTurnComplete)
	all = append(all, evs...)
	if !hasToolResult(evs, "done-making", false) {
		t.Errorf("no successful tool result in %v", evs)
	}
	if b, err := os.ReadFile(filepath.Join(dir, openaiMadeFile)); err != nil || string(b) != "made\n" {
		t.Errorf("%s = %q, %v", openaiMadeFile, b, err)
	}
	if !strings.Contains(text(evs), fakeopenai.ToolResultPrefix+"done-making") {
		t.Errorf("the model did not get the output: %q", text(evs))
	}

	// A command the --deny rule refuses: nobody is asked, it does not run.
	say(t, s, openaiDenyMe)
	evs = until(t, s, isTurnComplete)
	all = append(all, evs...)
	for _, ev := range evs {
		if ev.GetPermissionRequest() != nil {
			t.Fatalf("asked for a command the rule denies: %v", ev)
		}
	}
	if !hasToolResult(evs, "Denied by the BetCode permission rule", true) {
		t.Errorf("no denied tool result in %v", evs)
	}
	if _, err := os.Stat(filepath.Join(dir, openaiDeniedFile)); !os.IsNotExist(err) {
		t.Errorf("%s exists (%v): the denied command ran", openaiDeniedFile, err)
	}

	// A read inside the directory runs without asking (no rule matches a
	// read-only tool); one outside is refused before anyone is asked.
	for _, step := range []struct {
		prompt, result string
		isErr          bool
	}{
		{openaiReadIt, "made", false},
		{openaiEscape, "outside the working directory", true},
	} {
		say(t, s, step.prompt)
		evs = until(t, s, isTurnComplete)
		all = append(all, evs...)
		for _, ev := range evs {
			if ev.GetPermissionRequest() != nil {
				t.Fatalf("%s: asked %v", step.prompt, ev)
			}
		}
		if !hasToolResult(evs, step.result, step.isErr) {
			t.Errorf("%s: no tool result with %q (error %v) in %v", step.prompt, step.result, step.isErr, evs)
		}
	}

	log, err := agent.API.ListPermissionLog(ctx, &pb.PermissionLogRequest{SessionId: id})
	if err != nil {
		t.Fatal(err)
	}
	var sources []string
	for _, e := range log.Entries {
		sources = append(sources, e.ToolName+":"+e.Decision+"/"+e.Source)
	}
	if got, want := strings.Join(sources, ","), "Bash:allow/user,Bash:deny/rule,Read:allow/mode"; got != want {
		t.Errorf("permission log = %s, want %s", got, want)
	}

	// Cancel of a slow stream.
	say(t, s, "SLOW")
	evs = until(t, s, func(ev *pb.AgentEvent) bool { return ev.GetTextDelta() != nil })
	all = append(all, evs...)
	if err := s.Send(&pb.AgentRequest{Request: &pb.AgentRequest_Cancel{Cancel: &pb.CancelRequest{Reason: "test"}}}); err != nil {
		t.Fatal(err)
	}
	evs = until(t, s, isTurnComplete)
	all = append(all, evs...)
	if tc := last(evs).GetTurnComplete(); tc.StopReason != "cancelled" {
		t.Errorf("stop reason after cancel %q, want cancelled", tc.StopReason)
	}
	checkSequences(t, all, 0)
	if err := s.CloseSend(); err != nil {
		t.Fatal(err)
	}

	// ListSessions names the provider; ResumeSession replays every event.
	checkListedAs(t, ctx, agent.API, id, pb.SessionProvider_SESSION_PROVIDER_OPENAI_API)
	checkReplay(t, ctx, agent.API, id, all)

	// After a restart of the agent the conversation goes on with its
	// history (kept under the data dir).
	agent = agent.Restart(t)
	ctx = ctxT(t)
	s = startConv(t, ctx, agent.API, &pb.StartConversation{SessionId: id})
	say(t, s, "STREAM 2")
	evs = until(t, s, isTurnComplete)
	if evs[0].Sequence <= last(all).Sequence {
		t.Fatalf("first event after the restart has sequence %d, not above %d", evs[0].Sequence, last(all).Sequence)
	}
	checkSequences(t, evs, evs[0].Sequence-1)
	if got, want := text(evs), strings.Join(fakeopenai.NumberedDeltas(2), ""); got != want {
		t.Errorf("text after the restart = %q, want %q", got, want)
	}
	reqs := api.Requests()
	prompts := strings.Join(reqs[len(reqs)-1].Prompts(), "|")
	if want := strings.Join([]string{"STREAM 5", openaiMakeFile, openaiDenyMe, openaiReadIt, openaiEscape, "SLOW", "STREAM 2"}, "|"); prompts != want {
		t.Errorf("the resumed conversation sent prompts %q, want %q", prompts, want)
	}
	if err := s.CloseSend(); err != nil {
		t.Fatal(err)
	}
}
