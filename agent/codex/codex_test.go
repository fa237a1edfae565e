package codex

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/betcode-dev/betcode/shared/fakeopenai"
)

// The tests below drive the real pinned Codex app-server against
// shared/fakeopenai, whose keyword replies (see its package doc) script the
// model.

func TestText(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	h.startThread()
	r := h.runTurn("say hello", nil, nil)

	if r.turn.Status != TurnStatusCompleted {
		t.Fatalf("turn status %q, want completed; events: %s", r.turn.Status, describe(r.events))
	}
	if got := r.agentText(); got != fakeopenai.HelloText {
		t.Errorf("streamed text %q, want %q", got, fakeopenai.HelloText)
	}
	if msgs := r.items(ItemAgentMessage); len(msgs) != 1 || msgs[0].Text != fakeopenai.HelloText {
		t.Errorf("agentMessage items %+v", msgs)
	}
	if got := r.pbText(); got != fakeopenai.HelloText {
		t.Errorf("TextDeltas join to %q, want %q", got, fakeopenai.HelloText)
	}
	if d := r.last("text_delta").GetTextDelta(); !d.GetIsComplete() {
		t.Errorf("last TextDelta %v is not complete", d)
	}
	u := r.last("usage").GetUsage()
	du := fakeopenai.DefaultUsage
	if u.GetInputTokens() != uint32(du.InputTokens-du.CachedTokens) || u.GetCacheReadTokens() != uint32(du.CachedTokens) ||
		u.GetOutputTokens() != uint32(du.OutputTokens) || u.GetModel() != DefaultModel {
		t.Errorf("usage %v, want the fake's %+v for %s", u, du, DefaultModel)
	}
	if tc := r.last("turn_complete").GetTurnComplete(); tc.GetStopReason() != StopEndTurn {
		t.Errorf("TurnComplete %v", tc)
	}
	wantOrder := []string{"status_change", "text_delta", "usage", "turn_complete", "status_change"}
	if got := compact(r.kinds()); !slices.Equal(got, wantOrder) {
		t.Errorf("event kinds %v, want %v", got, wantOrder)
	}

	reqs := h.api.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d model requests, want 1", len(reqs))
	}
	hd := reqs[0].Header
	if hd.Get("Authorization") != "Bearer sk-fake-test" || hd.Get("Originator") != "betcode-test" || hd.Get("Thread-Id") != h.thread {
		t.Errorf("request headers %v", hd)
	}
	if reqs[0].Model != DefaultModel || reqs[0].Prompt() != "say hello" || !slices.Contains(reqs[0].Tools, "apply_patch") {
		t.Errorf("request model %q prompt %q tools %v", reqs[0].Model, reqs[0].Prompt(), reqs[0].Tools)
	}
	if o := h.api.OtherRequests(); len(o) != 0 {
		t.Errorf("Codex made other requests: %v", o)
	}
}

// compact drops repeats of the same kind in a row.
func compact(kinds []string) []string { return slices.Compact(slices.Clone(kinds)) }

func TestReasoning(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	h.startThread()
	r := h.runTurn("THINK first", nil, nil)

	var reasoning strings.Builder
	for _, ev := range r.events {
		if d, ok := ev.(*ReasoningDelta); ok && !d.Raw {
			reasoning.WriteString(d.Delta)
		}
	}
	if reasoning.String() != fakeopenai.ReasoningText {
		t.Errorf("reasoning deltas %q, want %q", reasoning.String(), fakeopenai.ReasoningText)
	}
	if rs := r.items(ItemReasoning); len(rs) != 1 || strings.Join(rs[0].Summary, "") != fakeopenai.ReasoningText {
		t.Errorf("reasoning items %+v", rs)
	}
	var thought bool
	for _, ev := range r.all("status_change") {
		if ev.GetStatusChange().GetMessage() == fakeopenai.ReasoningText {
			thought = true
		}
	}
	if !thought {
		t.Errorf("no StatusChange carries the reasoning; kinds %v", r.kinds())
	}
	if r.pbText() != fakeopenai.ThoughtText || r.turn.Status != TurnStatusCompleted {
		t.Errorf("text %q status %q", r.pbText(), r.turn.Status)
	}
}

// TestShellApproval runs a command under the untrusted policy, which asks
// for it, with each answer.
func TestShellApproval(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		decision   Decision
		wantStatus string // the commandExecution item's
		wantRan    bool
		wantTurn   string
		wantStop   string
	}{
		{name: "allowed", decision: Accept, wantStatus: ItemStatusCompleted, wantRan: true, wantTurn: TurnStatusCompleted, wantStop: StopEndTurn},
		{name: "denied", decision: Decline, wantStatus: ItemStatusDeclined, wantTurn: TurnStatusCompleted, wantStop: StopEndTurn},
		{name: "cancelled", decision: Cancel, wantStatus: ItemStatusDeclined, wantTurn: TurnStatusInterrupted, wantStop: StopCancelled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, harnessOpts{})
			h.startThread()
			r := h.runTurn("SHELL now", always(tt.decision), nil)

			if len(r.approvals) != 1 {
				t.Fatalf("%d approvals, want 1; events: %s", len(r.approvals), describe(r.events))
			}
			a := r.approvals[0]
			if a.Kind != ApprovalCommand || UnwrapShell(a.Command) != fakeopenai.ShellCommand || a.Cwd != h.dir || a.ItemID == "" {
				t.Errorf("approval %+v", a)
			}
			cmds := r.items(ItemCommandExecution)
			if len(cmds) != 1 || cmds[0].Status != tt.wantStatus || cmds[0].ID != a.ItemID {
				t.Fatalf("commandExecution items %+v, want one %s", cmds, tt.wantStatus)
			}
			_, err := os.Stat(filepath.Join(h.dir, fakeopenai.ShellFile))
			if ran := err == nil; ran != tt.wantRan {
				t.Errorf("command ran = %v, want %v", ran, tt.wantRan)
			}
			if tt.wantRan && (cmds[0].AggregatedOutput == nil || *cmds[0].AggregatedOutput != fakeopenai.ShellOutput || *cmds[0].ExitCode != 0) {
				t.Errorf("output %v exit %v", cmds[0].AggregatedOutput, cmds[0].ExitCode)
			}
			if r.turn.Status != tt.wantTurn {
				t.Errorf("turn %q, want %q", r.turn.Status, tt.wantTurn)
			}

			// The mapping: tool start, permission request, result, end.
			start := r.last("tool_call_start").GetToolCallStart()
			if start.GetToolName() != ToolShell || start.GetToolId() != a.ItemID ||
				start.GetInput().GetFields()["command"].GetStringValue() != fakeopenai.ShellCommand {
				t.Errorf("ToolCallStart %v", start)
			}
			pr := r.last("permission_request").GetPermissionRequest()
			if pr.GetRequestId() != a.ID() || pr.GetToolName() != ToolShell || pr.GetToolUseId() != a.ItemID ||
				pr.GetInput().GetFields()["command"].GetStringValue() != fakeopenai.ShellCommand {
				t.Errorf("PermissionRequest %v", pr)
			}
			res := r.last("tool_call_result").GetToolCallResult()
			if res.GetToolId() != a.ItemID || res.GetIsError() == tt.wantRan {
				t.Errorf("ToolCallResult %v", res)
			}
			if tt.wantRan && res.GetOutput() != fakeopenai.ShellOutput {
				t.Errorf("ToolCallResult output %q", res.GetOutput())
			}
			if tc := r.last("turn_complete").GetTurnComplete(); tc.GetStopReason() != tt.wantStop {
				t.Errorf("TurnComplete %v, want %s", tc, tt.wantStop)
			}
			order := compact(r.kinds())
			iStart, iPerm, iRes := slices.Index(order, "tool_call_start"), slices.Index(order, "permission_request"), slices.Index(order, "tool_call_result")
			if iStart < 0 || iPerm < iStart || iRes < iPerm {
				t.Errorf("event order %v", order)
			}

			// What the model was told.
			if tt.decision == Decline {
				reqs := h.api.Requests()
				out := reqs[len(reqs)-1].LastToolOutput()
				if out == nil || !strings.Contains(out.Output, "rejected") {
					t.Errorf("model got %+v after a decline", out)
				}
			}
		})
	}
}

// TestShellAllowedForSession answers acceptForSession once: the same command
// later in the thread runs without asking.
func TestShellAllowedForSession(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	h.startThread()
	first := h.runTurn("SHELL once", always(AcceptForSession), nil)
	if len(first.approvals) != 1 || first.turn.Status != TurnStatusCompleted {
		t.Fatalf("first turn: %d approvals, status %s", len(first.approvals), first.turn.Status)
	}
	second := h.runTurn("SHELL again", nil, nil) // fails on any approval request
	cmds := second.items(ItemCommandExecution)
	if len(cmds) != 1 || cmds[0].Status != ItemStatusCompleted {
		t.Fatalf("second turn commands %+v", cmds)
	}
	if second.last("permission_request") != nil {
		t.Error("a PermissionRequest in the second turn")
	}
}

func TestPatch(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	h.startThread()
	r := h.runTurn("PATCH please", always(Accept), nil)

	path := filepath.Join(h.dir, fakeopenai.PatchFile)
	b, err := os.ReadFile(path)
	if err != nil || string(b) != fakeopenai.PatchLine+"\n" {
		t.Fatalf("patched file: %q, %v", b, err)
	}
	if len(r.approvals) != 1 || r.approvals[0].Kind != ApprovalFileChange {
		t.Fatalf("approvals %+v", r.approvals)
	}
	fc := r.items(ItemFileChange)
	if len(fc) != 1 || fc[0].Status != ItemStatusCompleted || len(fc[0].Changes) != 1 ||
		fc[0].Changes[0].Path != path || fc[0].Changes[0].Kind.Type != "add" {
		t.Fatalf("fileChange items %+v", fc)
	}
	start := r.last("tool_call_start").GetToolCallStart()
	if start.GetToolName() != ToolPatch || start.GetInput().GetFields()["file_path"].GetStringValue() != path {
		t.Errorf("ToolCallStart %v", start)
	}
	pr := r.last("permission_request").GetPermissionRequest()
	if pr.GetToolName() != ToolPatch || pr.GetRequestId() != r.approvals[0].ID() ||
		pr.GetInput().GetFields()["file_path"].GetStringValue() != path {
		t.Errorf("PermissionRequest %v", pr)
	}
	if res := r.last("tool_call_result").GetToolCallResult(); res.GetIsError() || res.GetOutput() != "A "+path {
		t.Errorf("ToolCallResult %v", res)
	}
	if r.turn.Status != TurnStatusCompleted || !strings.HasPrefix(r.pbText(), fakeopenai.ToolResultPrefix) {
		t.Errorf("turn %s text %q", r.turn.Status, r.pbText())
	}
}

// TestInterruptSlowStream interrupts a slow stream after its first delta:
// the turn ends cancelled and every delta seen is mapped.
func TestInterruptSlowStream(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	h.startThread()
	var interrupted bool
	r := h.runTurn("SLOW please", nil, func(ev Event) {
		if d, ok := ev.(*AgentMessageDelta); ok && !interrupted {
			interrupted = true
			ctx, cancel := context.WithTimeout(context.Background(), turnTimeout)
			defer cancel()
			if err := h.c.Interrupt(ctx, h.thread, d.TurnID); err != nil {
				t.Errorf("interrupt: %v", err)
			}
		}
	})
	if !interrupted || r.turn.Status != TurnStatusInterrupted {
		t.Fatalf("interrupted %v, turn %q", interrupted, r.turn.Status)
	}
	if tc := r.last("turn_complete").GetTurnComplete(); tc.GetStopReason() != StopCancelled {
		t.Errorf("TurnComplete %v", tc)
	}
	text := r.agentText()
	if !strings.HasPrefix(text, "w0 ") || len(text) >= len(strings.Join(fakeopenai.NumberedDeltas(50), "")) {
		t.Errorf("streamed %q: want the start of the slow stream only", text)
	}
	if r.pbText() != text {
		t.Errorf("mapped text %q, streamed %q", r.pbText(), text)
	}
	// The thread takes another turn.
	if again := h.runTurn("say hello", nil, nil); again.turn.Status != TurnStatusCompleted {
		t.Errorf("turn after interrupt: %s", again.turn.Status)
	}
}

// TestModelErrors covers failing model requests (retries are off): each
// turn fails with an ErrorEvent and the thread takes the next turn.
func TestModelErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		prompt   string
		wantCode string
		wantInfo string // in the ErrorEvent's codex_error_info
		wantText string // text streamed before the failure
	}{
		{name: "500", prompt: "ERR500", wantCode: CodeAgentError, wantInfo: "internalServerError"},
		{name: "429", prompt: "ERR429", wantCode: CodeRateLimited, wantInfo: "429"},
		{name: "malformed SSE", prompt: "MALFORMED", wantCode: CodeAgentError, wantText: "This"},
		{name: "cut stream", prompt: "CUT", wantCode: CodeAgentError, wantText: "This"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, harnessOpts{})
			h.startThread()
			r := h.runTurn(tt.prompt, nil, nil)
			if r.turn.Status != TurnStatusFailed || r.turn.Error == nil {
				t.Fatalf("turn %q error %v; events %s", r.turn.Status, r.turn.Error, describe(r.events))
			}
			errs := r.all("error")
			if len(errs) != 1 {
				t.Fatalf("%d ErrorEvents, want 1: %v", len(errs), errs)
			}
			e := errs[0].GetError()
			if e.GetCode() != tt.wantCode || e.GetIsFatal() || !strings.Contains(e.GetDetails()["codex_error_info"], tt.wantInfo) {
				t.Errorf("ErrorEvent %v, want code %s info ~%q", e, tt.wantCode, tt.wantInfo)
			}
			if tc := r.last("turn_complete").GetTurnComplete(); tc.GetStopReason() != StopError {
				t.Errorf("TurnComplete %v", tc)
			}
			if r.last("usage") == nil {
				t.Error("no UsageReport for the failed turn")
			}
			if !strings.HasPrefix(r.pbText(), tt.wantText) {
				t.Errorf("text %q, want it to start with %q", r.pbText(), tt.wantText)
			}
			if n := len(h.api.Requests()); n != 1 {
				t.Errorf("%d model requests, want 1 (retries are off)", n)
			}
			if again := h.runTurn("say hello", nil, nil); again.turn.Status != TurnStatusCompleted || again.pbText() != fakeopenai.HelloText {
				t.Errorf("turn after the failure: %s %q", again.turn.Status, again.pbText())
			}
		})
	}
}

// TestResume resumes a thread in a new app-server process: the model gets
// the earlier turn as history.
func TestResume(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	h.startThread()
	if r := h.runTurn("first prompt", nil, nil); r.turn.Status != TurnStatusCompleted {
		t.Fatalf("first turn %s", r.turn.Status)
	}
	h.close()

	h.start()
	ctx, cancel := context.WithTimeout(context.Background(), turnTimeout)
	defer cancel()
	res, err := h.c.ResumeThread(ctx, ThreadResumeParams{ThreadID: h.thread, Cwd: h.dir})
	if err != nil {
		t.Fatal(err)
	}
	if res.Thread.ID != h.thread {
		t.Fatalf("resumed thread %s, want %s", res.Thread.ID, h.thread)
	}
	h.tr = NewTranslator(res.Model, nil)
	if r := h.runTurn("second prompt", nil, nil); r.turn.Status != TurnStatusCompleted {
		t.Fatalf("resumed turn %s", r.turn.Status)
	}
	reqs := h.api.Requests()
	last := reqs[len(reqs)-1]
	if got := last.Prompts(); !slices.Equal(got, []string{"first prompt", "second prompt"}) {
		t.Errorf("resumed request's prompts %q", got)
	}
	if _, err := h.c.ResumeThread(ctx, ThreadResumeParams{ThreadID: "00000000-0000-0000-0000-000000000000"}); err == nil {
		t.Error("resuming an unknown thread succeeded")
	}
}

// TestCrash kills the app-server in the middle of a turn: the stream ends
// with a fatal ErrorEvent and TurnComplete, nothing streamed before is
// lost, calls fail with ErrExited and Close returns.
func TestCrash(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	h.startThread()
	var killed bool
	r := h.runTurn("SLOW please", nil, func(ev Event) {
		if _, ok := ev.(*AgentMessageDelta); ok && !killed {
			killed = true
			if err := syscall.Kill(h.c.cmd.Process.Pid, syscall.SIGKILL); err != nil {
				t.Errorf("kill: %v", err)
			}
		}
	})
	if !killed || r.exited == nil || r.exited.Err == nil || !errors.Is(r.exited.Err, ErrExited) {
		t.Fatalf("killed %v, exited %+v; events %s", killed, r.exited, describe(r.events))
	}
	if _, ok := r.events[len(r.events)-1].(*Exited); !ok {
		t.Errorf("last event %T, want *Exited", r.events[len(r.events)-1])
	}
	e := r.last("error").GetError()
	if e.GetCode() != CodeSubprocessCrashed || !e.GetIsFatal() {
		t.Errorf("ErrorEvent %v", e)
	}
	if tc := r.last("turn_complete").GetTurnComplete(); tc.GetStopReason() != StopError {
		t.Errorf("TurnComplete %v", tc)
	}
	if r.pbText() != r.agentText() || !strings.HasPrefix(r.pbText(), "w0") {
		t.Errorf("mapped text %q, streamed %q", r.pbText(), r.agentText())
	}
	select {
	case <-h.c.Done():
	case <-time.After(turnTimeout):
		t.Fatal("Done not closed after the crash")
	}
	if err := h.c.Err(); !errors.Is(err, ErrExited) {
		t.Errorf("Err() = %v, want ErrExited", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), turnTimeout)
	defer cancel()
	if _, err := h.c.StartTurn(ctx, h.thread, "after"); !errors.Is(err, ErrExited) {
		t.Errorf("StartTurn after the crash: %v, want ErrExited", err)
	}
}

// TestEscalationInSandbox runs the daemon's other interactive setting, a
// workspace-write sandbox with the on-request policy: only a command asking
// to leave the sandbox needs approval. (Where bubblewrap cannot create
// namespaces the approved command still runs: it runs unsandboxed.)
func TestEscalationInSandbox(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{policy: PolicyOnRequest, sandbox: SandboxWorkspaceWrite})
	h.startThread()
	r := h.runTurn("ESCALATE please", always(Accept), nil)
	if len(r.approvals) != 1 || r.approvals[0].Reason != fakeopenai.EscalateReason || UnwrapShell(r.approvals[0].Command) != fakeopenai.EscalateCommand {
		t.Fatalf("approvals %+v; events %s", r.approvals, describe(r.events))
	}
	if pr := r.last("permission_request").GetPermissionRequest(); pr.GetDescription() != fakeopenai.EscalateReason {
		t.Errorf("PermissionRequest %v", pr)
	}
	cmds := r.items(ItemCommandExecution)
	if len(cmds) != 1 || cmds[0].Status != ItemStatusCompleted || cmds[0].AggregatedOutput == nil || *cmds[0].AggregatedOutput != "escalated\n" {
		t.Fatalf("commands %+v", cmds)
	}
	if r.turn.Status != TurnStatusCompleted {
		t.Errorf("turn %s", r.turn.Status)
	}
}
