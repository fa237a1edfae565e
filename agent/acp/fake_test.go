package acp

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/betcode-dev/betcode/agent/provider"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/fakeacp"
)

// fakeRun is a conversation with the fake agent (the test binary).
type fakeRun struct {
	c     *conversation
	r     *reader
	dir   string
	state string
}

type fakeOpts struct {
	mode     string // Options.PermissionMode
	noLoad   bool
	stubborn bool
	state    string
	resumeID string
	dir      string
}

func startFake(t *testing.T, o fakeOpts) *fakeRun {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if o.dir == "" {
		o.dir = t.TempDir()
	}
	if o.state == "" {
		o.state = t.TempDir()
	}
	env := []string{fakeacp.EnvRun + "=1", fakeacp.EnvState + "=" + o.state}
	if o.noLoad {
		env = append(env, fakeacp.EnvNoLoad+"=1")
	}
	if o.stubborn {
		env = append(env, fakeacp.EnvStubborn+"=1")
	}
	p := &Provider{Agents: []Agent{{Name: "fake", Command: []string{exe, "-test.run=^$"}}}}
	conv, err := p.Start(ctxT(t), provider.Options{SessionID: "s1", Dir: o.dir, Env: env, ResumeID: o.resumeID, PermissionMode: o.mode, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	c := conv.(*conversation)
	t.Cleanup(func() { c.Stop(5 * time.Second) })
	return &fakeRun{c: c, r: newReader(t, c), dir: o.dir, state: o.state}
}

// say sends a turn and reads it to its end.
func (f *fakeRun) say(t *testing.T, text string, answer func(*provider.PermissionAsk) provider.Answer) []provider.Output {
	t.Helper()
	if err := f.c.SendTurn(provider.Turn{ID: "t", Text: text}); err != nil {
		t.Fatal(err)
	}
	return f.r.turn(f.c, answer)
}

func decide(d provider.Decision) func(*provider.PermissionAsk) provider.Answer {
	return func(*provider.PermissionAsk) provider.Answer { return provider.Answer{Decision: d} }
}

func TestFakeTurns(t *testing.T) {
	f := startFake(t, fakeOpts{})
	tests := []struct {
		name   string
		prompt string
		check  func(t *testing.T, evs []*pb.AgentEvent)
	}{
		{"text", "hi", func(t *testing.T, evs []*pb.AgentEvent) {
			if got := textOf(evs); got != "Hello from the fake ACP agent (turn 1)." {
				t.Errorf("text %q", got)
			}
			var deltas, complete int
			for _, e := range evs {
				if d := e.GetTextDelta(); d != nil {
					deltas++
					if d.IsComplete {
						complete++
					}
				}
			}
			if deltas != 3 || complete != 1 || !evs[len(evs)-3].GetTextDelta().GetIsComplete() {
				t.Errorf("want 2 streamed deltas then one complete; got %v", evs)
			}
			if tc := lastTurnComplete(evs); tc.GetStopReason() != "end_turn" {
				t.Errorf("turn complete %v", tc)
			}
			if s := evs[len(evs)-1].GetStatusChange(); s.GetStatus() != pb.AgentStatus_IDLE {
				t.Errorf("last event %v, want IDLE", evs[len(evs)-1])
			}
		}},
		{"thought", "THINK", func(t *testing.T, evs []*pb.AgentEvent) {
			found := false
			for _, e := range evs {
				if s := e.GetStatusChange(); s.GetStatus() == pb.AgentStatus_THINKING && s.GetMessage() == "pondering" {
					found = true
				}
			}
			if !found {
				t.Errorf("no THINKING pondering in %v", evs)
			}
		}},
		{"plan", "PLAN", func(t *testing.T, evs []*pb.AgentEvent) {
			var todo *pb.TodoUpdate
			for _, e := range evs {
				if x := e.GetTodoUpdate(); x != nil {
					todo = x
				}
			}
			if len(todo.GetItems()) != 2 || todo.Items[0].Subject != "read the code" || todo.Items[0].Status != pb.TodoStatus_PENDING || todo.Items[1].Status != pb.TodoStatus_IN_PROGRESS {
				t.Errorf("todo %v", todo)
			}
		}},
		{"usage", "USAGE", func(t *testing.T, evs []*pb.AgentEvent) {
			var u *pb.UsageReport
			for i, e := range evs {
				if x := e.GetUsage(); x != nil {
					u = x
					if evs[i+1].GetTurnComplete() == nil {
						t.Errorf("usage not right before TurnComplete: %v", evs)
					}
				}
			}
			if u.GetInputTokens() != 10 || u.GetOutputTokens() != 5 || u.GetCacheReadTokens() != 7 || u.GetCostUsd() != 0.25 {
				t.Errorf("usage %v", u)
			}
		}},
		{"max tokens", "STOP MAX_TOKENS", func(t *testing.T, evs []*pb.AgentEvent) {
			if tc := lastTurnComplete(evs); tc.GetStopReason() != "max_tokens" {
				t.Errorf("turn complete %v", tc)
			}
		}},
		{"refusal", "STOP REFUSAL", func(t *testing.T, evs []*pb.AgentEvent) {
			if tc := lastTurnComplete(evs); tc.GetStopReason() != "refusal" {
				t.Errorf("turn complete %v", tc)
			}
		}},
		{"prompt error", "FAIL", func(t *testing.T, evs []*pb.AgentEvent) {
			if tc := lastTurnComplete(evs); tc.GetStopReason() != StopError {
				t.Errorf("turn complete %v", tc)
			}
			var e *pb.ErrorEvent
			for _, ev := range evs {
				if x := ev.GetError(); x != nil {
					e = x
				}
			}
			if e == nil || e.Code != CodeAgentError || !strings.Contains(e.Message, "failed on purpose") || e.IsFatal {
				t.Errorf("error event %v, want a non-fatal AGENT_ERROR", e)
			}
		}},
		{"garbage lines", "GARBAGE", func(t *testing.T, evs []*pb.AgentEvent) {
			if got := textOf(evs); !strings.HasPrefix(got, "Hello from the fake ACP agent") {
				t.Errorf("text %q", got)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			outs := f.say(t, tc.prompt, nil)
			if !outs[len(outs)-1].TurnEnded {
				t.Fatal("last output does not end the turn")
			}
			tc.check(t, events(outs))
		})
	}
}

func TestFakePermissions(t *testing.T) {
	f := startFake(t, fakeOpts{})
	tests := []struct {
		name     string
		prompt   string
		decision provider.Decision
		tool     string
		input    map[string]string
		reply    string
		isError  bool
		file     string // a file the turn must have written
		stop     string // the turn's stop reason; "" is end_turn
	}{
		{"command allowed", "RUN echo hi", provider.Allow, "Bash", map[string]string{"command": "echo hi"},
			"permission: allow; exit 0; output: hi\n", false, "", ""},
		{"command allowed for the session", "RUN echo again", provider.AllowForSession, "Bash", map[string]string{"command": "echo again"},
			"permission: always; exit 0; output: again\n", false, "", ""},
		{"command denied", "RUN rm -rf x", provider.Deny, "Bash", map[string]string{"command": "rm -rf x"},
			"permission: reject", true, "", ""},
		// Cancel also cancels the turn: the fake ends it at once.
		{"command cancelled", "RUN echo no", provider.Cancel, "Bash", map[string]string{"command": "echo no"},
			"", true, "", "cancelled"},
		{"write allowed", "WRITE notes.txt hello there", provider.Allow, "Write",
			map[string]string{"file_path": "notes.txt", "content": "hello there"}, "permission: allow; wrote ", false, "notes.txt", ""},
		{"write denied", "WRITE denied.txt no", provider.Deny, "Write",
			map[string]string{"file_path": "denied.txt"}, "permission: reject", true, "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var ask *provider.PermissionAsk
			var askEvents []*pb.AgentEvent
			outs := f.say(t, tc.prompt, func(a *provider.PermissionAsk) provider.Answer {
				ask = a
				return provider.Answer{Decision: tc.decision}
			})
			for _, o := range outs {
				if o.Permission != nil {
					askEvents = o.Events
				}
			}
			if ask == nil {
				t.Fatal("no permission ask")
			}
			if ask.Tool != tc.tool || ask.ReadOnly {
				t.Errorf("ask tool %q read-only %v, want %q", ask.Tool, ask.ReadOnly, tc.tool)
			}
			for k, v := range tc.input {
				if k == "file_path" {
					v = filepath.Join(f.dir, v)
				}
				if !strings.Contains(string(ask.Input), `"`+k+`":"`+v+`"`) {
					t.Errorf("ask input %s lacks %s=%q", ask.Input, k, v)
				}
			}
			var pr *pb.PermissionRequest
			for _, e := range askEvents {
				if x := e.GetPermissionRequest(); x != nil {
					pr = x
				}
			}
			if pr.GetRequestId() != ask.ID || pr.GetToolName() != tc.tool || pr.GetToolUseId() != ask.ToolUseID || ask.ToolUseID == "" {
				t.Errorf("permission request event %v for ask %+v", pr, ask)
			}
			if s := askEvents[len(askEvents)-1].GetStatusChange(); s.GetStatus() != pb.AgentStatus_WAITING_FOR_USER {
				t.Errorf("ask events end with %v, want WAITING_FOR_USER", askEvents[len(askEvents)-1])
			}
			evs := events(outs)
			if got := textOf(evs); !strings.HasPrefix(got, tc.reply) {
				t.Errorf("reply %q, want prefix %q", got, tc.reply)
			}
			var start *pb.ToolCallStart
			var result *pb.ToolCallResult
			for _, e := range evs {
				if x := e.GetToolCallStart(); x != nil {
					start = x
				}
				if x := e.GetToolCallResult(); x != nil {
					result = x
				}
			}
			if start.GetToolId() != ask.ToolUseID || start.GetToolName() != tc.tool {
				t.Errorf("tool call start %v", start)
			}
			if tc.stop == "" {
				tc.stop = "end_turn"
				if result.GetToolId() != ask.ToolUseID || result.GetIsError() != tc.isError {
					t.Errorf("tool call result %v, want is_error %v", result, tc.isError)
				}
			}
			if got := lastTurnComplete(evs).GetStopReason(); got != tc.stop {
				t.Errorf("stop reason %q, want %q", got, tc.stop)
			}
			if tc.file != "" {
				b, err := os.ReadFile(filepath.Join(f.dir, tc.file))
				if err != nil || string(b) != tc.input["content"] {
					t.Errorf("file %s = %q, %v", tc.file, b, err)
				}
			}
		})
	}
}

// TestFakeConfinement: fs/* and terminal requests outside the working
// directory are refused, with ../ and with symlinks.
func TestFakeConfinement(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "project")
	outside := filepath.Join(root, "outside")
	for _, d := range []string{filepath.Join(dir, "sub"), outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(dir, "inside.txt"), []byte("inside\nline 2\n"), 0o644))
	must(os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("secret"), 0o644))
	must(os.Symlink(outside, filepath.Join(dir, "escape")))
	must(os.Symlink(filepath.Join(outside, "secret.txt"), filepath.Join(dir, "secret-link.txt")))
	must(os.Symlink("inside.txt", filepath.Join(dir, "ok-link.txt")))
	f := startFake(t, fakeOpts{dir: dir})

	tests := []struct {
		name   string
		prompt string
		reply  string // prefix
	}{
		{"read inside", "READ inside.txt", "read: inside\nline 2\n"},
		{"read a symlink inside", "READ ok-link.txt", "read: inside\n"},
		{"read ../", "READ ../outside/secret.txt", "read error: "},
		{"read absolute outside", "READ " + filepath.Join(outside, "secret.txt"), "read error: "},
		{"read a symlinked file outside", "READ secret-link.txt", "read error: "},
		{"read through a symlinked dir", "READ escape/secret.txt", "read error: "},
		{"write ../", "WRITE ../outside/new.txt x", "write error: "},
		{"write through a symlinked dir", "WRITE escape/new.txt x", "write error: "},
		{"write over a symlink outside", "WRITE secret-link.txt pwned", "write error: "},
		{"write a new subdir", "WRITE sub/deeper/new.txt fine", "permission: allow; wrote "},
		{"terminal in a subdir", "TERMIN sub", "terminal created"},
		{"terminal in ../", "TERMIN ..", "terminal error: "},
		{"terminal through a symlink", "TERMIN escape", "terminal error: "},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			outs := f.say(t, tc.prompt, decide(provider.Allow))
			if got := textOf(events(outs)); !strings.HasPrefix(got, tc.reply) {
				t.Errorf("reply %q, want prefix %q", got, tc.reply)
			}
		})
	}
	if b, err := os.ReadFile(filepath.Join(outside, "secret.txt")); err != nil || string(b) != "secret" {
		t.Errorf("outside file changed: %q, %v", b, err)
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 1 {
		t.Errorf("files created outside: %v", entries)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "sub", "deeper", "new.txt")); err != nil || string(b) != "fine" {
		t.Errorf("sub/deeper/new.txt = %q, %v", b, err)
	}
}

func TestFakeCancel(t *testing.T) {
	f := startFake(t, fakeOpts{})
	t.Run("slow turn", func(t *testing.T) {
		if err := f.c.SendTurn(provider.Turn{Text: "SLOW"}); err != nil {
			t.Fatal(err)
		}
		var outs []provider.Output
		for textOf(events(outs)) != "working" {
			o, _ := f.r.next()
			outs = append(outs, o)
		}
		if err := f.c.InterruptTurn(); err != nil {
			t.Fatal(err)
		}
		outs = f.r.turn(f.c, nil)
		if tc := lastTurnComplete(events(outs)); tc.GetStopReason() != "cancelled" {
			t.Errorf("turn complete %v", tc)
		}
	})
	t.Run("open permission request", func(t *testing.T) {
		if err := f.c.SendTurn(provider.Turn{Text: "ASKSLOW"}); err != nil {
			t.Fatal(err)
		}
		var ask *provider.PermissionAsk
		for ask == nil {
			o, _ := f.r.next()
			ask = o.Permission
		}
		if err := f.c.InterruptTurn(); err != nil {
			t.Fatal(err)
		}
		var outs []provider.Output
		withdrawn := false
		for {
			o, _ := f.r.next()
			outs = append(outs, o)
			withdrawn = withdrawn || o.Withdrawn == ask.ID
			if o.TurnEnded {
				break
			}
		}
		if !withdrawn {
			t.Errorf("ask %s not withdrawn: %v", ask.ID, outs)
		}
		if tc := lastTurnComplete(events(outs)); tc.GetStopReason() != "cancelled" {
			t.Errorf("turn complete %v", tc)
		}
		if err := f.c.Answer(ask.ID, provider.Answer{Decision: provider.Allow}); err == nil {
			t.Error("answering a withdrawn request succeeded")
		}
	})
	t.Run("request withdrawn by the agent", func(t *testing.T) {
		// The agent sends the request and withdraws it at once. The SDK
		// runs the request's handler on a goroutine of its own, so the
		// withdrawal may come first: then the request is never shown.
		// Either way no ask is left open, and none appears after the
		// turn's end (the next subtest fails on any ask).
		if err := f.c.SendTurn(provider.Turn{Text: "WITHDRAW"}); err != nil {
			t.Fatal(err)
		}
		var ask *provider.PermissionAsk
		withdrawn := false
		var outs []provider.Output
		for {
			o, _ := f.r.next()
			outs = append(outs, o)
			if o.Permission != nil {
				ask = o.Permission
			}
			withdrawn = withdrawn || (ask != nil && o.Withdrawn == ask.ID)
			if o.TurnEnded {
				break
			}
		}
		if ask != nil && !withdrawn {
			t.Errorf("ask %+v shown and never withdrawn: %v", ask, outs)
		}
		if ask != nil {
			if err := f.c.Answer(ask.ID, provider.Answer{Decision: provider.Allow}); err == nil {
				t.Error("answering a withdrawn request succeeded")
			}
		}
		if got := textOf(events(outs)); got != "withdrawn" {
			t.Errorf("text %q: %v", got, outs)
		}
	})
	t.Run("next turn works", func(t *testing.T) {
		if got := textOf(events(f.say(t, "hi", nil))); !strings.HasPrefix(got, "Hello from") {
			t.Errorf("text %q", got)
		}
	})
}

func TestFakeCrashMidTurn(t *testing.T) {
	f := startFake(t, fakeOpts{})
	if err := f.c.SendTurn(provider.Turn{Text: "CRASH"}); err != nil {
		t.Fatal(err)
	}
	outs := f.r.waitEnd()
	if got := textOf(events(outs)); got != "about to crash" {
		t.Errorf("text before the crash %q", got)
	}
	for _, o := range outs {
		if o.TurnEnded {
			t.Errorf("a crashed turn was ended by the provider: %v (the session settles it)", o)
		}
	}
	err := f.c.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Errorf("Wait() = %v, want exit status 3", err)
	}
	if !strings.Contains(f.c.Stderr(), "crashing on purpose") {
		t.Errorf("stderr %q", f.c.Stderr())
	}
	select {
	case <-f.c.Done():
	default:
		t.Error("Done not closed after Wait")
	}
	if err := f.c.SendTurn(provider.Turn{Text: "hi"}); err == nil {
		t.Error("SendTurn after the end succeeded")
	}
}

// TestFakeOverlongLine: a line the SDK cannot read breaks the connection;
// the agent is killed and the conversation ends with an error, never the
// daemon.
func TestFakeOverlongLine(t *testing.T) {
	f := startFake(t, fakeOpts{})
	if err := f.c.SendTurn(provider.Turn{Text: "HUGE"}); err != nil {
		t.Fatal(err)
	}
	f.r.waitEnd()
	if err := f.c.Wait(); err == nil || !strings.Contains(err.Error(), "connection lost") {
		t.Errorf("Wait() = %v, want the connection lost", err)
	}
}

func TestFakeResume(t *testing.T) {
	state := t.TempDir()
	dir := t.TempDir()
	f := startFake(t, fakeOpts{state: state, dir: dir})
	f.say(t, "first", nil)
	id := f.c.ResumeID()
	if id == "" {
		t.Fatal("no resume id from an agent that loads sessions")
	}
	f.c.Stop(5 * time.Second)
	if err := f.c.Wait(); err != nil {
		t.Errorf("Wait after Stop = %v", err)
	}
	f.r.waitEnd()

	g := startFake(t, fakeOpts{state: state, dir: dir, resumeID: id})
	if g.c.ResumeID() != id {
		t.Errorf("resumed id %q, want %q", g.c.ResumeID(), id)
	}
	outs := g.say(t, "second", nil)
	if got := textOf(events(outs)); got != "Hello from the fake ACP agent (turn 2)." {
		t.Errorf("text after resume %q (history replayed, or not loaded)", got)
	}

	t.Run("unknown id starts anew", func(t *testing.T) {
		h := startFake(t, fakeOpts{state: state, dir: dir, resumeID: "no-such-session"})
		o, _ := h.r.next()
		if e := o.Events[0].GetError(); e == nil || !strings.Contains(e.Message, "could not resume") {
			t.Errorf("first output %v, want an error saying it could not resume", o)
		}
		if got := textOf(events(h.say(t, "hi", nil))); got != "Hello from the fake ACP agent (turn 1)." {
			t.Errorf("text %q", got)
		}
	})
	t.Run("agent without session/load", func(t *testing.T) {
		h := startFake(t, fakeOpts{state: state, dir: dir, noLoad: true, resumeID: id})
		if h.c.ResumeID() != "" {
			t.Errorf("resume id %q from an agent that cannot load sessions", h.c.ResumeID())
		}
		if got := textOf(events(h.say(t, "hi", nil))); got != "Hello from the fake ACP agent (turn 1)." {
			t.Errorf("text %q", got)
		}
	})
}

// TestFakeStopKillsTerminals: a terminal still running when the session
// stops is killed with its process group.
func TestFakeStopKillsTerminals(t *testing.T) {
	f := startFake(t, fakeOpts{})
	pids := make(chan int, 1)
	f.c.terms.mu.Lock()
	f.c.terms.started = func(pid int) { pids <- pid }
	f.c.terms.mu.Unlock()
	if err := f.c.SendTurn(provider.Turn{Text: "RUN sleep 1000"}); err != nil {
		t.Fatal(err)
	}
	for {
		o, _ := f.r.next()
		if o.Permission != nil {
			if err := f.c.Answer(o.Permission.ID, provider.Answer{Decision: provider.Allow}); err != nil {
				t.Fatal(err)
			}
			break
		}
	}
	var pid int
	select {
	case pid = <-pids:
	case <-time.After(stepTimeout):
		t.Fatal("no terminal started")
	}
	f.c.Stop(5 * time.Second)
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("terminal process %d still there after Stop (kill 0: %v)", pid, err)
	}
}

// TestFakePermissionMode: a session's permission mode is the agent's
// session mode when the agent offers one of that name.
func TestFakePermissionMode(t *testing.T) {
	for _, mode := range []string{"", "acceptEdits", "plan", "bypassPermissions"} {
		t.Run(mode, func(t *testing.T) {
			f := startFake(t, fakeOpts{mode: mode})
			want := mode
			switch mode {
			case "": // the agent's asking mode
				want = "default"
			case "bypassPermissions": // not offered: left alone
				want = "auto"
			}
			if got := textOf(events(f.say(t, "MODE", nil))); got != "mode: "+want {
				t.Errorf("reply %q, want mode %s", got, want)
			}
		})
	}
}

// TestFakeStopEscalates: an agent that outlives its stdin and ignores
// SIGTERM is killed.
func TestFakeStopEscalates(t *testing.T) {
	f := startFake(t, fakeOpts{stubborn: true})
	f.say(t, "hi", nil)
	pid := f.c.Pid()
	f.c.Stop(100 * time.Millisecond)
	if err := f.c.Wait(); err != nil {
		t.Errorf("Wait after Stop = %v, want nil", err)
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("agent %d still there after Stop (kill 0: %v)", pid, err)
	}
	if ws, ok := f.c.cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
		t.Errorf("agent ended with %v, want SIGKILL", f.c.cmd.ProcessState)
	}
}

func TestStartFailures(t *testing.T) {
	tests := []struct {
		name    string
		command []string
		want    string
	}{
		{"missing program", []string{"/nonexistent/acp-agent"}, "start acp agent"},
		{"exits at once", []string{"/bin/sh", "-c", "echo no such thing >&2; exit 7"}, "no such thing"},
		{"speaks no ACP", []string{"/bin/sh", "-c", "echo hello; echo '{\"jsonrpc\":'; while read x; do :; done"}, "initialize: no answer: context deadline exceeded"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := &Provider{Agents: []Agent{{Name: "bad", Command: tc.command}}, StartTimeout: 2 * time.Second}
			_, err := p.Start(ctxT(t), provider.Options{Dir: t.TempDir(), Logger: testLogger(t)})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Start() = %v, want an error with %q", err, tc.want)
			}
		})
	}
}
