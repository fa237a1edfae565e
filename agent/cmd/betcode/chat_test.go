package main

import (
	"errors"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/betcode-dev/betcode/agent/client"
	"github.com/betcode-dev/betcode/agent/internal/testenv"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func TestParseDecision(t *testing.T) {
	tests := []struct {
		in     string
		want   pb.PermissionDecision
		reason string
		ok     bool
	}{
		{"y", pb.PermissionDecision_ALLOW_ONCE, "", true},
		{" Yes ", pb.PermissionDecision_ALLOW_ONCE, "", true},
		{"a", pb.PermissionDecision_ALLOW_SESSION, "", true},
		{"always", pb.PermissionDecision_ALLOW_SESSION, "", true},
		{"n", pb.PermissionDecision_DENY, "", true},
		{"NO", pb.PermissionDecision_DENY, "", true},
		{"n use the Makefile", pb.PermissionDecision_DENY, "use the Makefile", true},
		{"n: too risky", pb.PermissionDecision_DENY, "too risky", true},
		{"no, not now", pb.PermissionDecision_DENY, "not now", true},
		{"n:", pb.PermissionDecision_DENY, "", true},
		{"", 0, "", false},
		{"maybe", 0, "", false},
		{"nope", 0, "", false},
		{"y please", 0, "", false},
		{"a b", 0, "", false},
		{"yy", 0, "", false},
	}
	for _, tt := range tests {
		d, reason, ok := parseDecision(tt.in)
		if d != tt.want || reason != tt.reason || ok != tt.ok {
			t.Errorf("parseDecision(%q) = %v, %q, %v; want %v, %q, %v", tt.in, d, reason, ok, tt.want, tt.reason, tt.ok)
		}
	}
}

func question(text string, multi bool, labels ...string) *pb.UserQuestion {
	q := &pb.UserQuestion{QuestionId: "q1", Question: text, MultiSelect: multi}
	for _, l := range labels {
		q.Options = append(q.Options, &pb.QuestionOption{Value: l, Label: l, Description: "about " + l})
	}
	return q
}

func TestParseAnswer(t *testing.T) {
	single := question("Which database?", false, "Postgres", "SQLite")
	multi := question("Which features?", true, "Auth", "Search", "Billing")
	open := question("Name?", false)
	tests := []struct {
		name string
		q    *pb.UserQuestion
		in   string
		want string
		err  string
	}{
		{"number", single, "2", "SQLite", ""},
		{"number with spaces", single, " 1 ", "Postgres", ""},
		{"free text", single, "MySQL please", "MySQL please", ""},
		{"free text with a number", single, "2 of them", "2 of them", ""},
		{"out of range", single, "3", "", "no option 3"},
		{"zero", single, "0", "", "no option 0"},
		{"several on single", single, "1,2", "", "pick one option"},
		{"same twice on single", single, "1,1", "Postgres", ""},
		{"empty", single, "", "", "type a number from 1 to 2"},
		{"multi", multi, "1,2", "Auth, Search", ""},
		{"multi spaces", multi, "3, 1", "Billing, Auth", ""},
		{"multi blanks", multi, "1 3", "Auth, Billing", ""},
		{"multi duplicates", multi, "2,2,1", "Search, Auth", ""},
		{"multi one", multi, "2", "Search", ""},
		{"multi out of range", multi, "1,4", "", "no option 4"},
		{"multi free text", multi, "all of them", "all of them", ""},
		{"no options", open, "Ada", "Ada", ""},
		{"no options number", open, "42", "42", ""},
		{"no options empty", open, "", "", "type an answer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseAnswer(tt.q, tt.in)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("parseAnswer(%q) = %q, %v; want error %q", tt.in, got, err, tt.err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("parseAnswer(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
			}
		})
	}
}

func permRequest(t testing.TB, tool string, input map[string]any) *pb.PermissionRequest {
	t.Helper()
	s, err := structpb.NewStruct(input)
	if err != nil {
		t.Fatal(err)
	}
	return &pb.PermissionRequest{RequestId: "r1", ToolName: tool, Input: s, ToolUseId: "toolu_1"}
}

func TestAutoApprover(t *testing.T) {
	a, err := newAutoApprover([]string{"Bash(go test *)", "Read", "Edit(src/**)", "WebFetch(domain:go.dev)", "mcp__github", "Write(~/notes/**)"}, "/home/me")
	if err != nil {
		t.Fatal(err)
	}
	const cwd = "/work/proj"
	tests := []struct {
		tool  string
		input map[string]any
		rule  string
		ok    bool
	}{
		{"Bash", map[string]any{"command": "go test ./..."}, "Bash(go test *)", true},
		{"Bash", map[string]any{"command": "go test ./... && rm -rf /"}, "", false},
		{"Bash", map[string]any{"command": "go build ./..."}, "", false},
		{"Read", map[string]any{"file_path": "/etc/passwd"}, "Read", true},
		{"Edit", map[string]any{"file_path": "/work/proj/src/main.go"}, "Edit(src/**)", true},
		{"Write", map[string]any{"file_path": "/work/proj/src/new.go"}, "Edit(src/**)", true},
		{"Edit", map[string]any{"file_path": "/work/proj/README.md"}, "", false},
		{"Edit", map[string]any{"file_path": "/elsewhere/src/main.go"}, "", false},
		{"WebFetch", map[string]any{"url": "https://go.dev/doc"}, "WebFetch(domain:go.dev)", true},
		{"WebFetch", map[string]any{"url": "https://example.com/"}, "", false},
		{"Grep", map[string]any{"pattern": "TODO"}, "Read", true},
		{"mcp__github__create_issue", map[string]any{"title": "x"}, "mcp__github", true},
		{"mcp__gitlab__create_issue", map[string]any{}, "", false},
		{"Write", map[string]any{"file_path": "/home/me/notes/a.md"}, "Write(~/notes/**)", true},
		{"Write", map[string]any{"file_path": "/home/you/notes/a.md"}, "", false},
		{"AskUserQuestion", map[string]any{}, "", false},
	}
	for _, tt := range tests {
		rule, ok := a.match(permRequest(t, tt.tool, tt.input), cwd)
		if ok != tt.ok || rule != tt.rule {
			t.Errorf("match(%s %v) = %q, %v; want %q, %v", tt.tool, tt.input, rule, ok, tt.rule, tt.ok)
		}
	}

	var none *autoApprover
	if _, ok := none.match(permRequest(t, "Read", map[string]any{"file_path": "/x"}), cwd); ok {
		t.Error("no --yes-to must match nothing")
	}
	if _, err := newAutoApprover([]string{"Bash(go test *"}, ""); err == nil {
		t.Error("a bad --yes-to pattern must be rejected")
	}
}

// lockedBuffer is a bytes.Buffer safe for a writer and a reader goroutine.
type lockedBuffer struct {
	mu      sync.Mutex
	b       strings.Builder
	changed chan struct{} // closed and replaced on every write
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.changed != nil {
		close(l.changed)
		l.changed = nil
	}
	return l.b.Write(p)
}

// waitFor waits until the buffer contains s or d passes.
func (l *lockedBuffer) waitFor(s string, d time.Duration) bool {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for {
		l.mu.Lock()
		if strings.Contains(l.b.String(), s) {
			l.mu.Unlock()
			return true
		}
		if l.changed == nil {
			l.changed = make(chan struct{})
		}
		ch := l.changed
		l.mu.Unlock()
		select {
		case <-ch:
		case <-deadline.C:
			return false
		}
	}
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// harness runs the chat loop against channels instead of an agent.
type harness struct {
	t *testing.T
	// events is unbuffered: once a send returns, the loop has taken the
	// event and handles it before it can read the next input line.
	events   chan *pb.AgentEvent
	recvErr  chan error
	sigs     chan os.Signal
	lines    chan string
	sent     chan *pb.AgentRequest
	closed   chan struct{}
	out, err lockedBuffer
	done     chan error
}

type mode int

const (
	terminalMode mode = iota // interactive, messages from a terminal
	pipedMode                // messages from a pipe
	oneShotMode              // a PROMPT, stdin not a terminal
	oneShotTTY               // a PROMPT, stdin a terminal
)

func newHarness(t *testing.T, m mode, prompt string, yesTo ...string) *harness {
	h := &harness{
		t: t, events: make(chan *pb.AgentEvent), recvErr: make(chan error, 1), sigs: make(chan os.Signal, 1),
		lines: make(chan string), sent: make(chan *pb.AgentRequest, 16), closed: make(chan struct{}), done: make(chan error, 1),
	}
	yes, err := newAutoApprover(yesTo, "")
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	c := &chat{
		r: &client.Renderer{Out: &h.out, Err: &h.err, QuestionsByCaller: true}, stderr: &h.err, yes: yes, cwd: "/proj",
		events: h.events, recvErr: h.recvErr, sigs: h.sigs,
		startInput: func() <-chan string { return h.lines },
		send:       func(r *pb.AgentRequest) error { h.sent <- r; return nil },
		closeSend:  func() { once.Do(func() { close(h.closed) }) },
	}
	c.setMode(m == oneShotMode || m == oneShotTTY, m == terminalMode || m == oneShotTTY)
	go func() { h.done <- c.run(prompt) }()
	return h
}

func (h *harness) next() *pb.AgentRequest {
	h.t.Helper()
	select {
	case r := <-h.sent:
		return r
	case err := <-h.done:
		h.t.Fatalf("chat ended (%v) before sending\nstdout: %s\nstderr: %s", err, h.out.String(), h.err.String())
	case <-time.After(5 * time.Second):
		h.t.Fatalf("nothing sent\nstdout: %s\nstderr: %s", h.out.String(), h.err.String())
	}
	return nil
}

func (h *harness) noSend() {
	h.t.Helper()
	select {
	case r := <-h.sent:
		h.t.Fatalf("unexpected request %v", r)
	case <-time.After(50 * time.Millisecond):
	}
}

func (h *harness) line(s string) {
	h.t.Helper()
	select {
	case h.lines <- s:
	case <-time.After(5 * time.Second):
		h.t.Fatalf("line %q not read\nstderr: %s", s, h.err.String())
	}
}

func (h *harness) waitErr(substr string) {
	h.t.Helper()
	if !h.err.waitFor(substr, 5*time.Second) {
		h.t.Fatalf("stderr lacks %q:\n%s", substr, h.err.String())
	}
}

func (h *harness) end() error {
	h.t.Helper()
	h.recvErr <- io.EOF
	select {
	case err := <-h.done:
		return err
	case <-time.After(5 * time.Second):
		h.t.Fatal("chat did not end")
	}
	return nil
}

func ev(e any) *pb.AgentEvent {
	switch e := e.(type) {
	case *pb.PermissionRequest:
		return &pb.AgentEvent{Event: &pb.AgentEvent_PermissionRequest{PermissionRequest: e}}
	case *pb.UserQuestion:
		return &pb.AgentEvent{Event: &pb.AgentEvent_UserQuestion{UserQuestion: e}}
	case *pb.StatusChange:
		return &pb.AgentEvent{Event: &pb.AgentEvent_StatusChange{StatusChange: e}}
	case *pb.TurnComplete:
		return &pb.AgentEvent{Event: &pb.AgentEvent_TurnComplete{TurnComplete: e}}
	case *pb.TodoUpdate:
		return &pb.AgentEvent{Event: &pb.AgentEvent_TodoUpdate{TodoUpdate: e}}
	case *pb.ToolCallResult:
		return &pb.AgentEvent{Event: &pb.AgentEvent_ToolCallResult{ToolCallResult: e}}
	}
	panic("unknown event")
}

var waiting = &pb.StatusChange{Status: pb.AgentStatus_WAITING_FOR_USER}

func askEvents() []*pb.AgentEvent {
	q1 := question("Which database should we use?", false, "Postgres", "SQLite")
	q2 := question("Which features do you want?", true, "Auth", "Search", "Billing")
	return []*pb.AgentEvent{ev(q1), ev(q2), ev(waiting)}
}

func userInput(content, sentBy string) *pb.AgentEvent {
	return &pb.AgentEvent{Event: &pb.AgentEvent_UserInput{UserInput: &pb.UserInputEvent{Content: content, SentBy: sentBy}}}
}

// The user typed their message, so its echo is not printed; a message from
// another client (a phone) is, as a "> " line.
func TestChatUserInputEcho(t *testing.T) {
	h := newHarness(t, terminalMode, "")
	h.line("fix the build")
	if m := h.next().GetMessage(); m.GetContent() != "fix the build" {
		t.Fatalf("sent %v", m)
	}
	h.events <- userInput("fix the build", "")
	h.events <- userInput("also run the tests\nplease", "alice")
	h.events <- ev(&pb.TurnComplete{StopReason: "end_turn"})
	h.events <- ev(&pb.TurnComplete{StopReason: "end_turn"})
	h.waitErr("> ")
	if out := h.out.String(); out != "> also run the tests\n> please\n" {
		t.Errorf("stdout %q, want only the other client's message", out)
	}
	close(h.lines)
	if err := h.end(); err != nil {
		t.Fatal(err)
	}
}

func TestChatPermissionPrompt(t *testing.T) {
	h := newHarness(t, terminalMode, "")
	h.line("please RUNTOOL")
	if m := h.next().GetMessage(); m.GetContent() != "please RUNTOOL" {
		t.Fatalf("sent %v", m)
	}
	h.events <- ev(permRequest(t, "Bash", map[string]any{"command": "rm -rf build", "description": "Clean"}))
	h.waitErr("allow? [y]es once / [a]lways this session / [n]o")
	h.line("what?")
	h.waitErr("please answer y, a, n")
	h.line("n use make clean")
	p := h.next().GetPermission()
	if p.GetRequestId() != "r1" || p.GetDecision() != pb.PermissionDecision_DENY || p.GetReason() != "use make clean" {
		t.Fatalf("sent %v", p)
	}
	if out := h.out.String(); !strings.Contains(out, "Claude wants to use Bash: rm -rf build") || !strings.Contains(out, "Clean") {
		t.Fatalf("prompt does not show the tool call:\n%s", out)
	}
	h.events <- ev(&pb.TurnComplete{StopReason: "end_turn"})
	h.waitErr("> ")
	close(h.lines) // Ctrl-D
	select {
	case <-h.closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Ctrl-D at the prompt did not half-close the stream")
	}
	if err := h.end(); err != nil {
		t.Fatal(err)
	}
}

func TestChatYesTo(t *testing.T) {
	h := newHarness(t, oneShotMode, "please RUNTOOL", "Bash(touch *)")
	h.next() // the prompt
	h.events <- ev(permRequest(t, "Bash", map[string]any{"command": "touch created-by-tool.txt"}))
	p := h.next().GetPermission()
	if p.GetDecision() != pb.PermissionDecision_ALLOW_ONCE {
		t.Fatalf("sent %v", p)
	}
	h.waitErr("by --yes-to Bash(touch *)")
	// Not matched, and nobody to ask: denied.
	h.events <- ev(permRequest(t, "Bash", map[string]any{"command": "touch a && rm b"}))
	p = h.next().GetPermission()
	if p.GetDecision() != pb.PermissionDecision_DENY || p.GetReason() != noTerminalReason {
		t.Fatalf("sent %v", p)
	}
	h.events <- ev(&pb.TurnComplete{StopReason: "end_turn"})
	<-h.closed
	if err := h.end(); err != nil {
		t.Fatal(err)
	}
}

func TestChatQuestions(t *testing.T) {
	h := newHarness(t, oneShotTTY, "ASK")
	h.next()
	for _, e := range askEvents() {
		h.events <- e
	}
	h.waitErr("number, or your own answer")
	if out := h.out.String(); !strings.Contains(out, "? Which database should we use?\n  1. Postgres — about Postgres\n  2. SQLite — about SQLite\n") {
		t.Fatalf("question not shown:\n%s", out)
	}
	h.line("3")
	h.waitErr("there is no option 3")
	h.line("1")
	h.waitErr("numbers separated by commas")
	if !strings.Contains(h.out.String(), "? Which features do you want? (several allowed)") {
		t.Fatalf("second question not shown:\n%s", h.out.String())
	}
	h.line("1,2")
	qr := h.next().GetQuestionResponse()
	want := map[string]string{"Which database should we use?": "Postgres", "Which features do you want?": "Auth, Search"}
	if qr.GetQuestionId() != "q1" || len(qr.GetAnswers()) != 2 || qr.GetAnswers()["Which database should we use?"] != want["Which database should we use?"] || qr.GetAnswers()["Which features do you want?"] != want["Which features do you want?"] {
		t.Fatalf("sent %v, want answers %v", qr, want)
	}
	h.events <- ev(&pb.TurnComplete{StopReason: "end_turn"})
	<-h.closed
	if err := h.end(); err != nil {
		t.Fatal(err)
	}
}

// A question batch ends with the first event that is not one of its
// questions, even without WAITING_FOR_USER.
func TestChatQuestionsBatchEndsOnOtherEvent(t *testing.T) {
	h := newHarness(t, oneShotMode, "ASK")
	h.next()
	evs := askEvents()
	h.events <- evs[0]
	h.events <- evs[1]
	h.noSend()
	h.events <- ev(&pb.TodoUpdate{})
	qr := h.next().GetQuestionResponse()
	if got := qr.GetAnswers(); got["Which database should we use?"] != "Postgres" || got["Which features do you want?"] != "Auth" {
		t.Fatalf("sent %v", qr)
	}
	h.waitErr(`no terminal to answer: chose "Auth"`)
	h.events <- ev(&pb.TurnComplete{})
	if err := h.end(); err != nil {
		t.Fatal(err)
	}
}

func TestChatPromptsQueue(t *testing.T) {
	h := newHarness(t, oneShotTTY, "go")
	h.next()
	p1 := permRequest(t, "Read", map[string]any{"file_path": "/a"})
	p2 := permRequest(t, "Read", map[string]any{"file_path": "/b"})
	p2.RequestId, p2.ToolUseId = "r2", "toolu_2"
	p3 := permRequest(t, "Read", map[string]any{"file_path": "/c"})
	p3.RequestId, p3.ToolUseId = "r3", "toolu_3"
	h.events <- ev(p1)
	h.events <- ev(p2)
	h.events <- ev(p3)
	// r2 is answered by another client: its tool result arrives.
	h.events <- ev(&pb.ToolCallResult{ToolId: "toolu_2", Output: "x"})
	h.line("a")
	if p := h.next().GetPermission(); p.GetRequestId() != "r1" || p.GetDecision() != pb.PermissionDecision_ALLOW_SESSION {
		t.Fatalf("sent %v", p)
	}
	h.line("y")
	if p := h.next().GetPermission(); p.GetRequestId() != "r3" || p.GetDecision() != pb.PermissionDecision_ALLOW_ONCE {
		t.Fatalf("sent %v", p)
	}
	// Lines with nothing to answer are ignored in one-prompt mode.
	h.line("hello?")
	h.noSend()
	h.events <- ev(&pb.TurnComplete{})
	<-h.closed
	if err := h.end(); err != nil {
		t.Fatal(err)
	}
}

func TestChatInputEndsWhilePrompting(t *testing.T) {
	h := newHarness(t, terminalMode, "")
	h.line("ASK")
	h.next()
	for _, e := range askEvents() {
		h.events <- e
	}
	h.waitErr("number, or your own answer")
	h.line("2")
	h.waitErr("numbers separated by commas")
	close(h.lines) // Ctrl-D
	qr := h.next().GetQuestionResponse()
	if got := qr.GetAnswers(); got["Which database should we use?"] != "SQLite" || got["Which features do you want?"] != "Auth" {
		t.Fatalf("sent %v", qr)
	}
	h.events <- ev(&pb.TurnComplete{})
	<-h.closed
	if err := h.end(); err != nil {
		t.Fatal(err)
	}
}

func TestChatCtrlC(t *testing.T) {
	h := newHarness(t, terminalMode, "")
	h.line("SLOW")
	h.next()
	h.sigs <- os.Interrupt
	if c := h.next().GetCancel(); c == nil {
		t.Fatal("first Ctrl-C did not cancel the turn")
	}
	h.waitErr("Ctrl-C again to quit")
	h.events <- ev(&pb.TurnComplete{StopReason: "cancelled"})
	h.waitErr("> ")
	h.line("SLOW")
	h.next()
	h.sigs <- os.Interrupt
	h.next()
	h.sigs <- os.Interrupt
	select {
	case err := <-h.done:
		var ee *client.ExitError
		if !errors.As(err, &ee) || ee.Code != client.ExitOK {
			t.Fatalf("second Ctrl-C: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("second Ctrl-C did not exit")
	}
}

func TestChatTurnCompleteWithdrawsPrompt(t *testing.T) {
	h := newHarness(t, oneShotTTY, "go")
	h.next()
	h.events <- ev(permRequest(t, "Read", map[string]any{"file_path": "/a"}))
	h.waitErr("allow?")
	h.events <- ev(&pb.TurnComplete{StopReason: "cancelled"})
	h.waitErr("nothing left to answer")
	<-h.closed
	if err := h.end(); err != nil {
		t.Fatal(err)
	}
}

// Piped input: the line after a message waits until it is known to be the
// answer to a prompt (or, after the turn, the next message).
func TestChatPipedInput(t *testing.T) {
	h := newHarness(t, pipedMode, "")
	h.line("please RUNTOOL")
	h.next()
	fed := make(chan struct{})
	go func() { h.lines <- "y"; close(fed) }()
	h.noSend()
	select {
	case <-fed:
		t.Fatal("the next line was read during the turn, before any prompt")
	default:
	}
	h.events <- ev(permRequest(t, "Bash", map[string]any{"command": "make"}))
	if p := h.next().GetPermission(); p.GetDecision() != pb.PermissionDecision_ALLOW_ONCE {
		t.Fatalf("sent %v", p)
	}
	<-fed
	fed = make(chan struct{})
	go func() { h.lines <- "second"; close(fed) }()
	h.noSend()
	h.events <- ev(&pb.TurnComplete{})
	if m := h.next().GetMessage(); m.GetContent() != "second" {
		t.Fatalf("sent %v", m)
	}
	<-fed
	h.events <- ev(&pb.TurnComplete{})
	close(h.lines)
	<-h.closed
	if err := h.end(); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(h.err.String(), "> ") {
		t.Errorf("piped input got terminal prompts:\n%s", h.err.String())
	}
}
