package openaiapi

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/betcode-dev/betcode/agent/provider"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/fakeopenai"
)

func TestCheck(t *testing.T) {
	var nc *provider.NotConfiguredError
	if err := (&Provider{}).Check(context.Background()); !errors.As(err, &nc) {
		t.Errorf("Check without a base URL = %v, want a NotConfiguredError", err)
	}
	if err := (&Provider{BaseURL: "http://127.0.0.1:1/v1"}).Check(context.Background()); err != nil {
		t.Errorf("Check = %v", err)
	}
}

func TestTextTurn(t *testing.T) {
	api := startFake(t, nil)
	d := start(t, &Provider{BaseURL: api.BaseURL(), APIKey: "sk-test", Model: "gpt-test"}, "", "")
	evs, _ := d.turn("STREAM 3", nil)

	if got, want := texts(evs), "w0 w1 w2 "; got != want {
		t.Errorf("text = %q, want %q", got, want)
	}
	if got := stopReason(t, evs); got != stopEndTurn {
		t.Errorf("stop reason %q, want %q", got, stopEndTurn)
	}
	if s := evs[0].GetStatusChange(); s.GetStatus() != pb.AgentStatus_THINKING {
		t.Errorf("first event %v, want THINKING", evs[0])
	}
	if s := evs[len(evs)-1].GetStatusChange(); s.GetStatus() != pb.AgentStatus_IDLE {
		t.Errorf("last event %v, want IDLE", evs[len(evs)-1])
	}
	var usage *pb.UsageReport
	complete := false
	for i, ev := range evs {
		if u := ev.GetUsage(); u != nil {
			usage = u
			if evs[i+1].GetTurnComplete() == nil {
				t.Errorf("UsageReport not followed by TurnComplete")
			}
		}
		if ev.GetTextDelta().GetIsComplete() {
			complete = true
		}
	}
	if !complete {
		t.Error("no complete TextDelta")
	}
	u := fakeopenai.DefaultUsage
	if usage == nil || usage.Model != "gpt-test" || usage.OutputTokens != uint32(u.OutputTokens) ||
		usage.InputTokens != uint32(u.InputTokens-u.CachedTokens) || usage.CacheReadTokens != uint32(u.CachedTokens) {
		t.Errorf("usage = %v, want %+v of gpt-test", usage, u)
	}

	reqs := api.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests, want 1", len(reqs))
	}
	r := reqs[0]
	if r.Model != "gpt-test" || !r.Stream || r.Header.Get("Authorization") != "Bearer sk-test" {
		t.Errorf("request model %q stream %v auth %q", r.Model, r.Stream, r.Header.Get("Authorization"))
	}
	if want := []string{ToolBash, ToolRead, ToolWrite, ToolEdit, ToolLS, ToolGrep}; !slices.Equal(r.Tools, want) {
		t.Errorf("tools %v, want %v", r.Tools, want)
	}
	if r.Prompt() != "STREAM 3" {
		t.Errorf("prompt %q", r.Prompt())
	}
}

// scripted answers a prompt naming a call in calls with it, and a tool
// output with KeywordReply's text.
func scripted(calls map[string]*fakeopenai.Call) func(*fakeopenai.Request) fakeopenai.Reply {
	return func(r *fakeopenai.Request) fakeopenai.Reply {
		if c, ok := calls[r.Prompt()]; ok && r.LastToolOutput() == nil {
			return fakeopenai.Reply{Text: "Let me do that.", Call: c}
		}
		return fakeopenai.KeywordReply(r)
	}
}

func TestToolCalls(t *testing.T) {
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	fc := fakeopenai.FunctionCall
	type args = map[string]any
	deny := func(*provider.PermissionAsk) provider.Answer {
		return provider.Answer{Decision: provider.Deny, Message: "not today"}
	}
	cancel := func(*provider.PermissionAsk) provider.Answer { return provider.Answer{Decision: provider.Cancel} }
	tests := []struct {
		name   string
		call   *fakeopenai.Call
		decide decideFunc
		// setup prepares the working directory.
		setup func(t *testing.T, dir string)
		// ask is the tool asked about ("" = nobody is asked).
		ask      string
		readOnly bool
		isErr    bool
		result   string // in the ToolCallResult
		stop     string
		check    func(t *testing.T, dir string)
	}{
		{name: "bash allowed", call: fc(ToolBash, args{"command": "echo made > made.txt; echo out-$((6*7))"}), decide: allow,
			ask: ToolBash, result: "out-42", stop: stopEndTurn,
			check: func(t *testing.T, dir string) { wantFile(t, filepath.Join(dir, "made.txt"), "made\n") }},
		{name: "bash denied", call: fc(ToolBash, args{"command": "touch denied.txt"}), decide: deny,
			ask: ToolBash, isErr: true, result: "not today", stop: stopEndTurn,
			check: func(t *testing.T, dir string) { wantNoFile(t, filepath.Join(dir, "denied.txt")) }},
		{name: "bash fails", call: fc(ToolBash, args{"command": "echo oops >&2; exit 3"}), decide: allow,
			ask: ToolBash, isErr: true, result: "oops\n\n(exit code 3)", stop: stopEndTurn},
		{name: "cancel ends the turn", call: fc(ToolBash, args{"command": "touch c.txt"}), decide: cancel,
			ask: ToolBash, isErr: true, result: "denied", stop: stopCancelled,
			check: func(t *testing.T, dir string) { wantNoFile(t, filepath.Join(dir, "c.txt")) }},
		{name: "write", call: fc(ToolWrite, args{"file_path": "sub/new.txt", "content": "new\n"}), decide: allow,
			ask: ToolWrite, result: "Wrote 4 bytes", stop: stopEndTurn,
			check: func(t *testing.T, dir string) { wantFile(t, filepath.Join(dir, "sub", "new.txt"), "new\n") }},
		{name: "edit", call: fc(ToolEdit, args{"file_path": "a.txt", "old_string": "two", "new_string": "2"}), decide: allow,
			setup: writeA, ask: ToolEdit, result: "Replaced 1", stop: stopEndTurn,
			check: func(t *testing.T, dir string) { wantFile(t, filepath.Join(dir, "a.txt"), "one\n2\nthree\n") }},
		{name: "edit not found", call: fc(ToolEdit, args{"file_path": "a.txt", "old_string": "four", "new_string": "4"}), decide: allow,
			setup: writeA, ask: ToolEdit, isErr: true, result: "old_string not found", stop: stopEndTurn},
		{name: "read", call: fc(ToolRead, args{"file_path": "a.txt", "offset": 2, "limit": 1}), decide: allow,
			setup: writeA, ask: ToolRead, readOnly: true, result: "     2\ttwo\n", stop: stopEndTurn},
		{name: "ls", call: fc(ToolLS, args{}), decide: allow,
			setup: writeA, ask: ToolLS, readOnly: true, result: "a.txt\nd/", stop: stopEndTurn},
		{name: "grep", call: fc(ToolGrep, args{"pattern": "^t"}), decide: allow,
			setup: writeA, ask: ToolGrep, readOnly: true, result: "a.txt:2:two\na.txt:3:three", stop: stopEndTurn},
		{name: "read outside with ../", call: fc(ToolRead, args{"file_path": "../../secret.txt"}),
			isErr: true, result: "outside the working directory", stop: stopEndTurn},
		{name: "read an absolute path outside", call: fc(ToolRead, args{"file_path": filepath.Join(outside, "secret.txt")}),
			isErr: true, result: "outside the working directory", stop: stopEndTurn},
		{name: "write through a symlinked dir", call: fc(ToolWrite, args{"file_path": "out/evil.txt", "content": "x"}),
			setup: linkOut(outside), isErr: true, result: "outside the working directory", stop: stopEndTurn,
			check: func(t *testing.T, _ string) { wantNoFile(t, filepath.Join(outside, "evil.txt")) }},
		{name: "read through a symlinked file", call: fc(ToolRead, args{"file_path": "out/secret.txt"}),
			setup: linkOut(outside), isErr: true, result: "outside the working directory", stop: stopEndTurn},
		{name: "grep outside", call: fc(ToolGrep, args{"pattern": "secret", "path": outside}),
			isErr: true, result: "outside the working directory", stop: stopEndTurn},
		{name: "unknown tool", call: fc("Delete", args{"path": "x"}),
			isErr: true, result: `unknown tool "Delete"`, stop: stopEndTurn},
		{name: "arguments not JSON", call: fc(ToolBash, "{not json"),
			isErr: true, result: "not a JSON object", stop: stopEndTurn},
	}
	calls := map[string]*fakeopenai.Call{}
	for _, tc := range tests {
		calls[tc.name] = tc.call
	}
	api := startFake(t, scripted(calls))
	p := &Provider{BaseURL: api.BaseURL()}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if tc.setup != nil {
				tc.setup(t, dir)
			}
			d := start(t, p, dir, "")
			evs, asks := d.turn(tc.name, tc.decide)
			switch {
			case tc.ask == "" && len(asks) > 0:
				t.Errorf("asked %+v, want nobody asked", asks[0])
			case tc.ask != "" && len(asks) != 1:
				t.Fatalf("%d asks, want 1", len(asks))
			case tc.ask != "":
				a := asks[0]
				if a.Tool != tc.ask || a.ReadOnly != tc.readOnly || a.ToolUseID == "" {
					t.Errorf("ask %+v, want tool %s read-only %v", a, tc.ask, tc.readOnly)
				}
				checkAskEvents(t, evs, a)
			}
			res := toolResults(evs)
			if len(res) != 1 {
				t.Fatalf("%d tool results, want 1: %v", len(res), evs)
			}
			if res[0].IsError != tc.isErr || !strings.Contains(res[0].Output, tc.result) {
				t.Errorf("result %q (error %v), want %q (error %v)", res[0].Output, res[0].IsError, tc.result, tc.isErr)
			}
			if got := stopReason(t, evs); got != tc.stop {
				t.Errorf("stop reason %q, want %q", got, tc.stop)
			}
			if tc.stop == stopEndTurn && !strings.Contains(texts(evs), fakeopenai.ToolResultPrefix) {
				t.Errorf("the model did not get the tool's output: %q", texts(evs))
			}
			if tc.check != nil {
				tc.check(t, dir)
			}
		})
	}
}

// checkAskEvents checks the order ToolCallStart, PermissionRequest, result.
func checkAskEvents(t *testing.T, evs []*pb.AgentEvent, a *provider.PermissionAsk) {
	t.Helper()
	start, req, res := -1, -1, -1
	for i, ev := range evs {
		switch {
		case ev.GetToolCallStart() != nil:
			start = i
			if ev.GetToolCallStart().ToolId != a.ToolUseID {
				t.Errorf("ToolCallStart id %q, ask's %q", ev.GetToolCallStart().ToolId, a.ToolUseID)
			}
		case ev.GetPermissionRequest() != nil:
			req = i
			if pr := ev.GetPermissionRequest(); pr.RequestId != a.ID || pr.ToolName != a.Tool {
				t.Errorf("PermissionRequest %v, ask %+v", pr, a)
			}
		case ev.GetToolCallResult() != nil:
			res = i
		}
	}
	if !(start >= 0 && start < req && req < res) {
		t.Errorf("ToolCallStart at %d, PermissionRequest at %d, ToolCallResult at %d", start, req, res)
	}
}

func writeA(t *testing.T, dir string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "a.txt"), []byte("one\ntwo\nthree\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
}

func linkOut(outside string) func(t *testing.T, dir string) {
	return func(t *testing.T, dir string) {
		t.Helper()
		if err := os.Symlink(outside, filepath.Join(dir, "out")); err != nil {
			t.Fatal(err)
		}
	}
}

func wantFile(t *testing.T, path, content string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil || string(b) != content {
		t.Errorf("%s = %q, %v; want %q", path, b, err, content)
	}
}

func wantNoFile(t *testing.T, path string) {
	t.Helper()
	if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s exists (%v)", path, err)
	}
}

func TestEditedInputRuns(t *testing.T) {
	api := startFake(t, scripted(map[string]*fakeopenai.Call{
		"go": fakeopenai.FunctionCall(ToolBash, map[string]any{"command": "echo original"}),
	}))
	d := start(t, &Provider{BaseURL: api.BaseURL()}, "", "")
	evs, _ := d.turn("go", func(a *provider.PermissionAsk) provider.Answer {
		return provider.Answer{Decision: provider.Allow, Input: []byte(`{"command":"echo edited"}`)}
	})
	if res := toolResults(evs); len(res) != 1 || res[0].Output != "edited\n" {
		t.Errorf("results %v, want the edited command's output", res)
	}
}

func TestInterruptSlowStream(t *testing.T) {
	api := startFake(t, nil)
	d := start(t, &Provider{BaseURL: api.BaseURL()}, "", "")
	if err := d.c.SendTurn(provider.Turn{Text: "SLOW"}); err != nil {
		t.Fatal(err)
	}
	evs, _ := d.until(nil, func(o provider.Output) bool { return len(o.Events) > 0 && o.Events[0].GetTextDelta() != nil })
	began := time.Now()
	if err := d.c.InterruptTurn(); err != nil {
		t.Fatal(err)
	}
	more, _ := d.until(nil, func(o provider.Output) bool { return o.TurnEnded })
	evs = append(evs, more...)
	if got := stopReason(t, evs); got != stopCancelled {
		t.Errorf("stop reason %q, want cancelled", got)
	}
	if n := len(strings.Fields(texts(evs))); n >= 50 {
		t.Errorf("all %d deltas streamed: the request was not cancelled", n)
	}
	if took := time.Since(began); took > 5*time.Second {
		t.Errorf("the turn ended %s after the interrupt", took)
	}
	if len(errorEvents(evs)) != 0 {
		t.Errorf("errors after an interrupt: %v", errorEvents(evs))
	}
	// The conversation goes on.
	evs, _ = d.turn("hello", nil)
	if texts(evs) != fakeopenai.HelloText {
		t.Errorf("after the interrupt: %q", texts(evs))
	}
}

func TestInterruptCommand(t *testing.T) {
	api := startFake(t, scripted(map[string]*fakeopenai.Call{
		"sleep": fakeopenai.FunctionCall(ToolBash, map[string]any{"command": "sleep 60 & sleep 60; wait"}),
	}))
	d := start(t, &Provider{BaseURL: api.BaseURL()}, "", "")
	if err := d.c.SendTurn(provider.Turn{Text: "sleep"}); err != nil {
		t.Fatal(err)
	}
	// Interrupt once the command was allowed (it is starting or running).
	evs, _ := d.until(allow, func(o provider.Output) bool { return o.Permission != nil })
	began := time.Now()
	if err := d.c.InterruptTurn(); err != nil {
		t.Fatal(err)
	}
	more, _ := d.until(nil, func(o provider.Output) bool { return o.TurnEnded })
	evs = append(evs, more...)
	if got := stopReason(t, evs); got != stopCancelled {
		t.Errorf("stop reason %q, want cancelled", got)
	}
	if took := time.Since(began); took > 10*time.Second {
		t.Errorf("the turn ended %s after the interrupt", took)
	}
	if res := toolResults(evs); len(res) != 1 || !res[0].IsError {
		t.Errorf("results %v, want one error", res)
	}
}

func TestInterruptPendingAsk(t *testing.T) {
	api := startFake(t, scripted(map[string]*fakeopenai.Call{
		"ask": fakeopenai.FunctionCall(ToolBash, map[string]any{"command": "true"}),
	}))
	d := start(t, &Provider{BaseURL: api.BaseURL()}, "", "")
	if err := d.c.SendTurn(provider.Turn{Text: "ask"}); err != nil {
		t.Fatal(err)
	}
	var ask *provider.PermissionAsk
	for ask == nil {
		ask = d.next().Permission // left unanswered
	}
	if err := d.c.InterruptTurn(); err != nil {
		t.Fatal(err)
	}
	withdrawn := false
	evs, _ := d.until(nil, func(o provider.Output) bool {
		withdrawn = withdrawn || o.Withdrawn == ask.ID
		return o.TurnEnded
	})
	if !withdrawn {
		t.Errorf("request %s not withdrawn", ask.ID)
	}
	if got := stopReason(t, evs); got != stopCancelled {
		t.Errorf("stop reason %q, want cancelled", got)
	}
	if err := d.c.Answer(ask.ID, provider.Answer{Decision: provider.Allow}); err == nil {
		t.Error("answering a withdrawn request succeeded")
	}
}

func TestAPIErrors(t *testing.T) {
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + closed.Addr().String() + "/v1"
	closed.Close()

	tests := []struct {
		name    string
		prompt  string
		queue   []fakeopenai.Reply
		retries int
		base    string // default the fake
		code    string // "" = no error
		msg     string
		stop    string
		reqs    int // requests made (0 = unchecked)
	}{
		{name: "HTTP 500 after retries", prompt: "ERR500", retries: 1, code: CodeAPIError, msg: "HTTP 500: fake internal server error", stop: stopError, reqs: 2},
		{name: "HTTP 429 retried after retry-after", prompt: "hello", queue: []fakeopenai.Reply{{Status: 429}}, retries: 1, stop: stopEndTurn, reqs: 2},
		{name: "HTTP 429 left", prompt: "ERR429", retries: -1, code: CodeRateLimited, msg: "fake rate limit", stop: stopError, reqs: 1},
		{name: "HTTP 401", prompt: "ERR401", retries: -1, code: CodeAPIError, msg: "HTTP 401: fake invalid api key", stop: stopError, reqs: 1},
		{name: "malformed SSE", prompt: "MALFORMED", retries: -1, code: CodeAPIError, msg: "malformed", stop: stopError},
		{name: "cut stream", prompt: "CUT", retries: -1, code: CodeAPIError, msg: "OpenAI API", stop: stopError},
		{name: "stalled stream", prompt: "STALL", retries: -1, code: CodeAPIError, msg: "sent nothing for", stop: stopError},
		{name: "connection refused", prompt: "hello", retries: -1, base: refused, code: CodeConnection, msg: "connection refused", stop: stopError},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			api := startFake(t, nil)
			api.Enqueue(tc.queue...)
			base := api.BaseURL()
			if tc.base != "" {
				base = tc.base
			}
			d := start(t, &Provider{BaseURL: base, maxRetries: tc.retries, idleTimeout: 500 * time.Millisecond}, "", "")
			evs, _ := d.turn(tc.prompt, nil)
			errs := errorEvents(evs)
			switch {
			case tc.code == "" && len(errs) > 0:
				t.Errorf("errors %v, want none", errs)
			case tc.code != "" && len(errs) != 1:
				t.Errorf("errors %v, want one %s", errs, tc.code)
			case tc.code != "":
				if errs[0].Code != tc.code || !strings.Contains(errs[0].Message, tc.msg) || errs[0].IsFatal {
					t.Errorf("error %v, want %s with %q, not fatal", errs[0], tc.code, tc.msg)
				}
			}
			if got := stopReason(t, evs); got != tc.stop {
				t.Errorf("stop reason %q, want %q", got, tc.stop)
			}
			if n := len(api.Requests()); tc.reqs > 0 && n != tc.reqs {
				t.Errorf("%d requests, want %d", n, tc.reqs)
			}
			retried := 0
			for _, ev := range evs {
				if strings.HasPrefix(ev.GetStatusChange().GetMessage(), "retrying: HTTP") {
					retried++
				}
			}
			if tc.reqs > 0 && retried != tc.reqs-1 {
				t.Errorf("%d retrying statuses, want %d", retried, tc.reqs-1)
			}
			// The conversation survives the error.
			if tc.base == "" {
				evs, _ = d.turn("hello", nil)
				if texts(evs) != fakeopenai.HelloText {
					t.Errorf("the next turn: %q", texts(evs))
				}
			}
		})
	}
}

func TestResume(t *testing.T) {
	api := startFake(t, nil)
	home := filepath.Join(t.TempDir(), "openai-api")
	dir := t.TempDir()
	p := &Provider{BaseURL: api.BaseURL(), Home: home}
	d := start(t, p, dir, "")
	d.turn("first question", nil)
	id := d.c.ResumeID()
	if id == "" {
		t.Fatal("no resume id")
	}
	d.c.Stop(time.Second)
	if _, err := os.Stat(filepath.Join(home, id+".json")); err != nil {
		t.Fatal(err)
	}

	// A new Provider, as after a restart of the agent.
	p2 := &Provider{BaseURL: api.BaseURL(), Home: home}
	d2 := start(t, p2, dir, id)
	if d2.c.ResumeID() != id {
		t.Errorf("resumed id %q, want %q", d2.c.ResumeID(), id)
	}
	d2.turn("second question", nil)
	reqs := api.Requests()
	last := reqs[len(reqs)-1]
	if got, want := last.Prompts(), []string{"first question", "second question"}; !slices.Equal(got, want) {
		t.Errorf("prompts of the resumed request %q, want %q", got, want)
	}
	found := false
	for _, it := range last.Input {
		if it.Type == "message" && it.Role == "assistant" && it.Text == fakeopenai.HelloText {
			found = true
		}
	}
	if !found {
		t.Errorf("the first answer is not in the resumed request: %+v", last.Input)
	}

	t.Run("corrupt history", func(t *testing.T) {
		if err := os.WriteFile(filepath.Join(home, "oai-bad.json"), []byte("{"), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := p2.Start(context.Background(), provider.Options{Dir: dir, ResumeID: "oai-bad"})
		if err == nil || !strings.Contains(err.Error(), "resume conversation") {
			t.Errorf("Start = %v, want a resume error", err)
		}
	})
	t.Run("id that is a path", func(t *testing.T) {
		_, err := p2.Start(context.Background(), provider.Options{Dir: dir, ResumeID: "../x"})
		if err == nil {
			t.Error("Start resumed ../x")
		}
	})
	t.Run("missing history starts afresh", func(t *testing.T) {
		d := start(t, p2, dir, "oai-gone")
		if d.c.ResumeID() != "oai-gone" {
			t.Errorf("id %q", d.c.ResumeID())
		}
	})
}

func TestQueuedTurnsAndStop(t *testing.T) {
	api := startFake(t, nil)
	d := start(t, &Provider{BaseURL: api.BaseURL()}, "", "")
	for _, text := range []string{"STREAM 1", "STREAM 2"} {
		if err := d.c.SendTurn(provider.Turn{Text: text}); err != nil {
			t.Fatal(err)
		}
	}
	first, _ := d.until(nil, func(o provider.Output) bool { return o.TurnEnded })
	second, _ := d.until(nil, func(o provider.Output) bool { return o.TurnEnded })
	if texts(first) != "w0 " || texts(second) != "w0 w1 " {
		t.Errorf("turns %q and %q", texts(first), texts(second))
	}
	// Stop mid-turn: the turn ends as cancelled, then the output ends.
	if err := d.c.SendTurn(provider.Turn{Text: "STALL"}); err != nil {
		t.Fatal(err)
	}
	if _, err := api.WaitRequests(ctxT(t), 3); err != nil {
		t.Fatal(err)
	}
	d.c.Stop(time.Second)
	evs, _ := d.until(nil, func(o provider.Output) bool { return o.TurnEnded })
	if got := stopReason(t, evs); got != stopCancelled {
		t.Errorf("stop reason %q, want cancelled", got)
	}
	if _, ok := <-d.outs; ok {
		t.Error("output after Stop")
	}
	if err := d.c.SendTurn(provider.Turn{Text: "late"}); err == nil {
		t.Error("SendTurn after Stop succeeded")
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

func TestParallelCalls(t *testing.T) {
	api := startFake(t, func(r *fakeopenai.Request) fakeopenai.Reply {
		if r.LastToolOutput() == nil {
			return fakeopenai.Reply{
				Call:  fakeopenai.FunctionCall(ToolWrite, map[string]any{"file_path": "w.txt", "content": "w"}),
				Calls: []*fakeopenai.Call{fakeopenai.FunctionCall(ToolBash, map[string]any{"command": "touch b.txt"})},
			}
		}
		return fakeopenai.KeywordReply(r)
	})
	dir := t.TempDir()
	d := start(t, &Provider{BaseURL: api.BaseURL()}, dir, "")
	evs, asks := d.turn("both", func(a *provider.PermissionAsk) provider.Answer {
		if a.Tool == ToolBash {
			return provider.Answer{Decision: provider.Deny, Message: "no commands"}
		}
		return allow(a)
	})
	if len(asks) != 2 || asks[0].Tool != ToolWrite || asks[1].Tool != ToolBash {
		t.Fatalf("asks %+v, want Write then Bash", asks)
	}
	res := toolResults(evs)
	if len(res) != 2 || res[0].IsError || !res[1].IsError {
		t.Fatalf("results %v, want Write ok and Bash denied", res)
	}
	wantFile(t, filepath.Join(dir, "w.txt"), "w")
	wantNoFile(t, filepath.Join(dir, "b.txt"))
	reqs := api.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	var outputs []string
	for _, it := range reqs[1].Input {
		if it.Type == "function_call_output" {
			outputs = append(outputs, it.CallID+"="+it.Output)
		}
	}
	if len(outputs) != 2 || !strings.HasPrefix(outputs[0], "call_fake_001=Wrote") || !strings.Contains(outputs[1], "no commands") {
		t.Errorf("tool outputs sent back: %q", outputs)
	}
}

func TestImageTurn(t *testing.T) {
	api := startFake(t, nil)
	d := start(t, &Provider{BaseURL: api.BaseURL()}, "", "")
	if err := d.c.SendTurn(provider.Turn{Blocks: []map[string]any{
		{"type": "text", "text": "what is this?"},
		{"type": "image", "source": map[string]any{"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
		{"type": "document", "source": map[string]any{"type": "base64"}},
	}}); err != nil {
		t.Fatal(err)
	}
	d.until(nil, func(o provider.Output) bool { return o.TurnEnded })
	r := api.Requests()[0]
	if !strings.Contains(r.Prompt(), "what is this?") || !strings.Contains(r.Prompt(), "document attachment was left out") {
		t.Errorf("prompt %q", r.Prompt())
	}
	if body := string(r.Body); !strings.Contains(body, `"type":"input_image"`) || !strings.Contains(body, "data:image/png;base64,iVBORw0KGgo=") {
		t.Errorf("no input_image in %s", body)
	}
}
