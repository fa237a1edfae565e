package e2e

import (
	"encoding/base64"
	"fmt"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/betcode-dev/betcode/agent/codex"
	"github.com/betcode-dev/betcode/agent/internal/testenv"
	"github.com/betcode-dev/betcode/agent/session"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/fakeopenai"
)

// deniedCommand is what the fake model runs for a DENYME prompt; the
// agent's --deny rule refuses it without asking anyone.
const deniedCommand = "touch denied-by-rule.txt"

// requireCodex returns the pinned Codex binary or fails with what to
// install (never skips).
func requireCodex(t *testing.T) string {
	t.Helper()
	p, err := codex.FindBinary()
	if err == nil {
		return p
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%v\nCI must install the pinned Codex before the tests: run make codex", err)
	}
	t.Fatalf("%v\ninstall it once with `make codex` (scripts/install-codex.sh), or point %s at a codex %s binary", err, codex.BinaryEnv, codex.PinnedVersion)
	return ""
}

// startCodexAgent runs the real agent with the real Codex against a fake
// Responses API.
func startCodexAgent(t *testing.T) (*testenv.Agent, *fakeopenai.Server) {
	t.Helper()
	return startCodexAgentWith(t, func(r *fakeopenai.Request) fakeopenai.Reply {
		if r.LastToolOutput() == nil && strings.Contains(r.Prompt(), "DENYME") {
			return fakeopenai.Reply{Call: fakeopenai.ShellCall(deniedCommand, false, "")}
		}
		return fakeopenai.KeywordReply(r)
	})
}

// startCodexAgentWith is startCodexAgent with the fake model answering
// with responder.
func startCodexAgentWith(t *testing.T, responder func(*fakeopenai.Request) fakeopenai.Reply) (*testenv.Agent, *fakeopenai.Server) {
	t.Helper()
	bin := requireCodex(t)
	api, err := fakeopenai.Start(fakeopenai.Config{Responder: responder})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = api.Close() })
	agent := testenv.StartAgent(t, testenv.AgentOptions{Args: []string{
		"--codex-bin", bin, "--codex-base-url", api.BaseURL(),
		// No sandbox: bubblewrap cannot create namespaces in containers;
		// approvals work the same.
		"--codex-sandbox", codex.SandboxFullAccess,
		"--deny", "Bash(touch *)",
	}, Env: []string{"OPENAI_API_KEY=sk-fake-test"}})
	return agent, api
}

func TestCodexSessionEndToEnd(t *testing.T) {
	agent, api := startCodexAgent(t)
	ctx := ctxT(t)
	s := startConv(t, ctx, agent.API, &pb.StartConversation{
		WorkingDirectory: agent.ProjectDir(t), Provider: pb.SessionProvider_SESSION_PROVIDER_CODEX,
	})
	var all []*pb.AgentEvent

	// Streamed text, gapless sequences, usage.
	say(t, s, "STREAM 5")
	evs := until(t, s, isTurnComplete)
	all = append(all, evs...)
	checkSequences(t, evs, 0)
	id := sessionID(t, evs)
	if got, want := text(evs), strings.Join(fakeopenai.NumberedDeltas(5), ""); got != want {
		t.Errorf("text = %q, want %q", got, want)
	}
	if tc := last(evs).GetTurnComplete(); tc.StopReason != codex.StopEndTurn {
		t.Errorf("stop reason %q, want %q", tc.StopReason, codex.StopEndTurn)
	}
	usage := false
	for _, ev := range evs {
		if u := ev.GetUsage(); u != nil && u.OutputTokens > 0 {
			usage = true
		}
	}
	if !usage {
		t.Error("no UsageReport with output tokens")
	}

	// A command that needs approval, allowed by the client.
	say(t, s, "SHELL")
	evs = until(t, s, func(ev *pb.AgentEvent) bool { return ev.GetPermissionRequest() != nil })
	all = append(all, evs...)
	req := last(evs).GetPermissionRequest()
	if req.ToolName != codex.ToolShell || !strings.Contains(req.GetInput().GetFields()["command"].GetStringValue(), "hi-from-shell") {
		t.Fatalf("permission request = %v", req)
	}
	if err := s.Send(&pb.AgentRequest{Request: &pb.AgentRequest_Permission{Permission: &pb.PermissionResponse{
		RequestId: req.RequestId, Decision: pb.PermissionDecision_ALLOW_ONCE}}}); err != nil {
		t.Fatal(err)
	}
	evs = until(t, s, isTurnComplete)
	all = append(all, evs...)
	if !hasToolResult(evs, fakeopenai.ShellOutput, false) {
		t.Errorf("no successful tool result with %q in %v", fakeopenai.ShellOutput, evs)
	}

	// A command a rule denies: nobody is asked, the command does not run.
	say(t, s, "DENYME")
	evs = until(t, s, isTurnComplete)
	all = append(all, evs...)
	for _, ev := range evs {
		if ev.GetPermissionRequest() != nil {
			t.Fatalf("asked for a command the rule denies: %v", ev)
		}
	}
	if !hasToolResult(evs, "declined", true) {
		t.Errorf("no declined tool result in %v", evs)
	}
	log, err := agent.API.ListPermissionLog(ctx, &pb.PermissionLogRequest{SessionId: id})
	if err != nil {
		t.Fatal(err)
	}
	var sources []string
	for _, e := range log.Entries {
		sources = append(sources, e.Decision+"/"+e.Source)
	}
	if got := strings.Join(sources, ","); got != "allow/user,deny/rule" {
		t.Errorf("permission log = %s, want allow/user,deny/rule", got)
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

	// ListSessions names the provider; ResumeSession replays the same
	// events from the log.
	checkListedAs(t, ctx, agent.API, id, pb.SessionProvider_SESSION_PROVIDER_CODEX)
	checkReplay(t, ctx, agent.API, id, all)

	// After a restart of the agent the next message resumes the thread.
	resumeAfterRestart(t, agent, api, id, last(all).Sequence)
}

// The restart that resumes the thread is in the same test: one agent and
// one app-server start cost seconds on a loaded machine.
func resumeAfterRestart(t *testing.T, agent *testenv.Agent, api *fakeopenai.Server, id string, lastSeq uint64) {
	t.Helper()
	ctx := ctxT(t)
	agent = agent.Restart(t)
	s := startConv(t, ctx, agent.API, &pb.StartConversation{SessionId: id})
	say(t, s, "STREAM 2")
	evs := until(t, s, isTurnComplete)
	if evs[0].Sequence <= lastSeq {
		t.Fatalf("first event after the restart has sequence %d, not above %d", evs[0].Sequence, lastSeq)
	}
	checkSequences(t, evs, evs[0].Sequence-1)
	if info := evs[1].GetSessionInfo(); info == nil || !info.IsResumed {
		t.Errorf("no resumed SessionInfo after the UserInput: %v", evs[:2])
	}
	if got, want := text(evs), strings.Join(fakeopenai.NumberedDeltas(2), ""); got != want {
		t.Errorf("text after resume = %q, want %q", got, want)
	}
	reqs := api.Requests()
	prompts := strings.Join(reqs[len(reqs)-1].Prompts(), "|")
	if !strings.Contains(prompts, "STREAM 5") || !strings.HasSuffix(prompts, "STREAM 2") {
		t.Errorf("the resumed thread sent prompts %q; want the earlier ones, then STREAM 2", prompts)
	}
	if err := s.CloseSend(); err != nil {
		t.Fatal(err)
	}
}

// hasToolResult reports whether evs hold a ToolCallResult whose output
// contains out, with is_error as given.
func hasToolResult(evs []*pb.AgentEvent, out string, isErr bool) bool {
	for _, ev := range evs {
		if r := ev.GetToolCallResult(); r != nil && r.IsError == isErr && strings.Contains(r.Output, out) {
			return true
		}
	}
	return false
}

// TestCodexNotConfigured: an installed Codex without a model endpoint is
// refused with BETCODE-2030 saying what to set.
func TestCodexNotConfigured(t *testing.T) {
	agent := testenv.StartAgent(t, testenv.AgentOptions{Args: []string{"--codex-bin", requireCodex(t)}})
	svc := pb.NewSessionServiceClient(agent.Conn)
	_, err := svc.CreateSession(ctxT(t), &pb.CreateSessionRequest{WorkingDirectory: agent.ProjectDir(t), Provider: pb.SessionProvider_SESSION_PROVIDER_CODEX})
	wantStatus(t, "CreateSession", err, codes.Unavailable, "BETCODE-2030")
	if !strings.Contains(err.Error(), "--codex-base-url") {
		t.Fatalf("error %q does not say to set --codex-base-url", err)
	}
}

// TestCodexChatCLI: `betcode chat --provider codex` runs a turn on Codex.
func TestCodexChatCLI(t *testing.T) {
	agent, _ := startCodexAgent(t)
	out, errOut, code := runCLI(t, agent.Opts.Socket, "chat", "--provider", "codex", "--cwd", agent.ProjectDir(t), "hello")
	if code != 0 || !strings.Contains(out, fakeopenai.HelloText) {
		t.Fatalf("chat --provider codex: code %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
}

// onePixelPNG is a 1x1 PNG, base64.
const onePixelPNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="

// TestCodexMessageDuringTurn: a message sent while a Codex turn runs is
// answered after it, as a turn of its own: two TurnCompletes, the answers
// in order, gapless sequences, and the event log replays all of it. The
// second carries an image, which reaches the model.
func TestCodexMessageDuringTurn(t *testing.T) {
	agent, api := startCodexAgentWith(t, func(r *fakeopenai.Request) fakeopenai.Reply {
		reply := fakeopenai.Reply{Text: "answer to " + r.Prompt()}
		if strings.HasPrefix(r.Prompt(), "first") {
			// Slow enough that the second message arrives mid-turn.
			reply.Delay = 300 * time.Millisecond
		}
		return reply
	})
	ctx := ctxT(t)
	s := startConv(t, ctx, agent.API, &pb.StartConversation{
		WorkingDirectory: agent.ProjectDir(t), Provider: pb.SessionProvider_SESSION_PROVIDER_CODEX,
	})
	say(t, s, "first message please take your time")
	evs := until(t, s, func(ev *pb.AgentEvent) bool { return ev.GetTextDelta().GetText() != "" })
	// The second message carries an image: it goes to Codex with it.
	png, _ := base64.StdEncoding.DecodeString(onePixelPNG)
	if err := s.Send(&pb.AgentRequest{Request: &pb.AgentRequest_Message{Message: &pb.UserMessage{Content: "second message", Attachments: []*pb.Attachment{
		{Filename: "pixel.png", MimeType: "image/png", Data: png},
	}}}}); err != nil {
		t.Fatal(err)
	}
	evs = append(evs, until(t, s, isTurnComplete)...)
	first := len(evs)
	evs = append(evs, until(t, s, isTurnComplete)...)
	checkSequences(t, evs, 0)
	id := sessionID(t, evs)

	if got, want := text(evs[:first]), "answer to first message please take your time"; got != want {
		t.Errorf("first turn's text %q, want %q", got, want)
	}
	if got, want := text(evs[first:]), "answer to second message"; got != want {
		t.Errorf("second turn's text %q, want %q", got, want)
	}
	var inputs []string
	for _, ev := range evs {
		if ui := ev.GetUserInput(); ui != nil {
			inputs = append(inputs, ui.GetContent())
		}
	}
	if want := []string{"first message please take your time", "second message"}; !slices.Equal(inputs, want) {
		t.Errorf("UserInput events %q, want %q", inputs, want)
	}
	if !slices.ContainsFunc(evs[:first], func(ev *pb.AgentEvent) bool { return ev.GetUserInput().GetContent() == "second message" }) {
		t.Errorf("the second message was not sent during the first turn (the first turn is ~2.4s long)")
	}
	for i, tc := range []*pb.AgentEvent{evs[first-1], last(evs)} {
		if r := tc.GetTurnComplete().GetStopReason(); r != codex.StopEndTurn {
			t.Errorf("turn %d stop reason %q, want %q", i+1, r, codex.StopEndTurn)
		}
	}
	reqs := api.Requests()
	if len(reqs) != 2 || reqs[0].Prompt() != "first message please take your time" || reqs[1].Prompt() != "second message" {
		t.Fatalf("%d model requests, want the two messages in order", len(reqs))
	}
	if got, want := reqs[1].Images(), []string{"data:image/png;base64," + onePixelPNG}; !slices.Equal(got, want) {
		t.Errorf("images reaching the model %q, want %q", got, want)
	}
	if err := s.CloseSend(); err != nil {
		t.Fatal(err)
	}
	checkReplay(t, ctx, agent.API, id, evs)
}

// TestCodexCrashAndRestart: the app-server SIGKILLed mid-turn ends the turn
// as crashed with SUBPROCESS_CRASHED; the next message starts Codex again
// with the thread resumed (the model gets the earlier prompts), and the
// session's sequences stay gapless in the event log.
func TestCodexCrashAndRestart(t *testing.T) {
	agent, api := startCodexAgent(t)
	ctx := ctxT(t)
	s := startConv(t, ctx, agent.API, &pb.StartConversation{
		WorkingDirectory: agent.ProjectDir(t), Provider: pb.SessionProvider_SESSION_PROVIDER_CODEX,
	})
	say(t, s, "STREAM 3")
	all := until(t, s, isTurnComplete)
	id := sessionID(t, all)

	say(t, s, "SLOW")
	all = append(all, until(t, s, func(ev *pb.AgentEvent) bool { return ev.GetTextDelta().GetText() != "" })...)
	ms, err := pb.NewSessionServiceClient(agent.Conn).GetSession(ctx, &pb.GetSessionRequest{SessionId: id})
	if err != nil {
		t.Fatal(err)
	}
	pid := int(ms.GetPid())
	if comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); err != nil || !strings.HasPrefix(string(comm), "codex") {
		t.Fatalf("session pid %d is not the app-server: %q, %v", pid, comm, err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	evs := until(t, s, isTurnComplete)
	all = append(all, evs...)
	var crash *pb.ErrorEvent
	for _, ev := range evs {
		if e := ev.GetError(); e != nil && e.Code == session.CodeSubprocessCrashed {
			crash = e
		}
	}
	if crash == nil || last(evs).GetTurnComplete().GetStopReason() != "crashed" {
		t.Fatalf("the kill was reported as %v; events %v", crash, evs)
	}

	say(t, s, "STREAM 2")
	evs = until(t, s, isTurnComplete)
	all = append(all, evs...)
	checkSequences(t, all, 0)
	if got, want := text(evs), strings.Join(fakeopenai.NumberedDeltas(2), ""); got != want {
		t.Errorf("text after the restart %q, want %q", got, want)
	}
	if r := last(evs).GetTurnComplete().GetStopReason(); r != codex.StopEndTurn {
		t.Errorf("stop reason after the restart %q", r)
	}
	resumed := false
	for _, ev := range evs {
		if ev.GetSessionInfo().GetIsResumed() {
			resumed = true
		}
	}
	if !resumed {
		t.Errorf("no resumed SessionInfo after the restart: %v", evs)
	}
	reqs := api.Requests()
	prompts := strings.Join(reqs[len(reqs)-1].Prompts(), "|")
	if !strings.HasPrefix(prompts, "STREAM 3|") || !strings.HasSuffix(prompts, "|STREAM 2") {
		t.Errorf("the restarted app-server sent prompts %q; want STREAM 3 first (the thread resumed), STREAM 2 last", prompts)
	}
	ms, err = pb.NewSessionServiceClient(agent.Conn).GetSession(ctx, &pb.GetSessionRequest{SessionId: id})
	if err != nil {
		t.Fatal(err)
	}
	if p := int(ms.GetPid()); p == pid || p == 0 {
		t.Errorf("pid after the restart %d (was %d)", p, pid)
	}
	if err := s.CloseSend(); err != nil {
		t.Fatal(err)
	}

	checkReplay(t, ctx, agent.API, id, all)
}
