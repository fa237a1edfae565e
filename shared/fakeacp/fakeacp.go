// Package fakeacp is a small scriptable ACP agent built on the SDK's
// agent side, for the edge cases a real agent cannot be made to show on
// demand. Tests run it by re-executing their own binary (see Main);
// demos run shared/cmd/fakeacp.
//
// A prompt's keywords (whole upper-case words) decide what a turn does:
//
//	(none)           text "Hello from the fake ACP agent (turn N)." in two chunks
//	THINK            a thought chunk, then the text
//	PLAN             a plan of two entries (pending, in progress)
//	USAGE            a usage_update, and usage in the prompt response
//	RUN CMD...       an execute tool call asking permission for "CMD..."; run
//	                 in a terminal when allowed; the reply names the option
//	WRITE PATH TEXT  an edit tool call asking permission, then fs/write_text_file
//	READ PATH        fs/read_text_file without asking; the reply is the content
//	                 or the error
//	TERMIN DIR       terminal/create with cwd DIR (to be refused outside)
//	SLOW             one chunk, then waits for session/cancel: stopReason cancelled
//	ASKSLOW          asks permission and waits; cancelled when the client cancels
//	WITHDRAW         asks permission and withdraws the request at once
//	                 ($/cancel_request); the reply is "withdrawn"
//	CRASH            one chunk, a line on stderr, then exit status 3 mid-turn
//	GARBAGE          lines that are not JSON-RPC, then the normal text
//	HUGE             one 11 MiB line (over the SDK's 10 MiB line limit), then
//	                 the normal text
//	STOP REASON      ends the turn with stopReason REASON (max_tokens, refusal)
//	FAIL             answers session/prompt with a JSON-RPC error
//	MODE             the reply is "mode: M", the session's mode (auto at
//	                 first, default, acceptEdits or plan: session/set_mode)
//
// Relative paths are relative to the session's cwd, joined without
// cleaning ("../x" stays in the path the client sees). Sessions are kept
// in a state directory so that session/load (advertised unless NoLoad)
// works across processes; loading replays the history as
// user_message_chunk and agent_message_chunk updates.
package fakeacp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	acpsdk "github.com/coder/acp-go-sdk"
)

// Config configures the agent.
type Config struct {
	// StateDir keeps sessions for session/load.
	StateDir string
	// NoLoad hides the loadSession capability.
	NoLoad bool
	// Stderr receives diagnostics.
	Stderr io.Writer
	// Exit ends the process (CRASH); os.Exit by default.
	Exit func(code int)
}

// Env names of Main's configuration. EnvStubborn makes the agent ignore
// SIGTERM and stay after its stdin closes, as a hung agent would.
const (
	EnvRun      = "BETCODE_FAKE_ACP"
	EnvState    = "BETCODE_FAKE_ACP_STATE"
	EnvNoLoad   = "BETCODE_FAKE_ACP_NOLOAD"
	EnvStubborn = "BETCODE_FAKE_ACP_STUBBORN"
)

// Main runs the agent on stdio when EnvRun is set, and exits; tests call
// it first thing in TestMain so that their binary doubles as the agent.
func Main() {
	if os.Getenv(EnvRun) != "1" {
		return
	}
	stubborn := os.Getenv(EnvStubborn) == "1"
	if stubborn {
		signal.Ignore(syscall.SIGTERM)
	}
	err := Serve(context.Background(), os.Stdin, os.Stdout, Config{
		StateDir: os.Getenv(EnvState), NoLoad: os.Getenv(EnvNoLoad) == "1", Stderr: os.Stderr,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "fakeacp:", err)
		os.Exit(1)
	}
	if stubborn {
		time.Sleep(time.Hour) // until SIGKILL
	}
	os.Exit(0)
}

// Serve runs the agent until in ends.
func Serve(ctx context.Context, in io.Reader, out io.Writer, cfg Config) error {
	if cfg.Stderr == nil {
		cfg.Stderr = io.Discard
	}
	if cfg.Exit == nil {
		cfg.Exit = os.Exit
	}
	w := &lockedWriter{w: out}
	a := &agent{cfg: cfg, out: w, sessions: map[acpsdk.SessionId]*session{}}
	a.conn = acpsdk.NewAgentSideConnection(a, w, in)
	select {
	case <-a.conn.Done():
	case <-ctx.Done():
	}
	return nil
}

// lockedWriter keeps whole lines whole: the SDK's messages and GARBAGE's.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

type agent struct {
	cfg  Config
	out  *lockedWriter
	conn *acpsdk.AgentSideConnection

	mu       sync.Mutex
	next     int
	sessions map[acpsdk.SessionId]*session
}

// session is what the agent remembers of one session (and saves).
type session struct {
	Mode    string   `json:"mode"`
	Cwd     string   `json:"cwd"`
	Turns   int      `json:"turns"`
	History []string `json:"history"` // prompt, reply, prompt, reply...
}

var (
	_ acpsdk.Agent       = (*agent)(nil)
	_ acpsdk.AgentLoader = (*agent)(nil)
)

func (a *agent) Initialize(context.Context, acpsdk.InitializeRequest) (acpsdk.InitializeResponse, error) {
	return acpsdk.InitializeResponse{
		ProtocolVersion:   acpsdk.ProtocolVersionNumber,
		AgentCapabilities: acpsdk.AgentCapabilities{LoadSession: !a.cfg.NoLoad},
		AgentInfo:         &acpsdk.Implementation{Name: "fakeacp", Version: "1"},
		AuthMethods:       []acpsdk.AuthMethod{},
	}, nil
}

func (a *agent) Authenticate(context.Context, acpsdk.AuthenticateRequest) (acpsdk.AuthenticateResponse, error) {
	return acpsdk.AuthenticateResponse{}, nil
}

func (a *agent) NewSession(_ context.Context, p acpsdk.NewSessionRequest) (acpsdk.NewSessionResponse, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.next++
	id := acpsdk.SessionId(fmt.Sprintf("fake-%d-%d", os.Getpid(), a.next))
	a.sessions[id] = &session{Cwd: p.Cwd, Mode: "auto"}
	return acpsdk.NewSessionResponse{SessionId: id, Modes: modes("auto")}, nil
}

// modes are the session modes the agent offers.
func modes(current string) *acpsdk.SessionModeState {
	st := &acpsdk.SessionModeState{CurrentModeId: acpsdk.SessionModeId(current)}
	for _, m := range []string{"auto", "default", "acceptEdits", "plan"} {
		st.AvailableModes = append(st.AvailableModes, acpsdk.SessionMode{Id: acpsdk.SessionModeId(m), Name: m})
	}
	return st
}

func (a *agent) LoadSession(ctx context.Context, p acpsdk.LoadSessionRequest) (acpsdk.LoadSessionResponse, error) {
	if a.cfg.NoLoad || a.cfg.StateDir == "" {
		return acpsdk.LoadSessionResponse{}, acpsdk.NewMethodNotFound(acpsdk.AgentMethodSessionLoad)
	}
	b, err := os.ReadFile(a.statePath(p.SessionId))
	if err != nil {
		return acpsdk.LoadSessionResponse{}, acpsdk.NewInvalidParams(map[string]any{"error": "unknown session " + string(p.SessionId)})
	}
	var s session
	if err := json.Unmarshal(b, &s); err != nil {
		return acpsdk.LoadSessionResponse{}, err
	}
	s.Cwd = p.Cwd
	if s.Mode == "" {
		s.Mode = "auto"
	}
	for i, h := range s.History {
		u := acpsdk.UpdateUserMessageText(h)
		if i%2 == 1 {
			u = acpsdk.UpdateAgentMessageText(h)
		}
		if err := a.conn.SessionUpdate(ctx, acpsdk.SessionNotification{SessionId: p.SessionId, Update: u}); err != nil {
			return acpsdk.LoadSessionResponse{}, err
		}
	}
	a.mu.Lock()
	a.sessions[p.SessionId] = &s
	a.mu.Unlock()
	return acpsdk.LoadSessionResponse{Modes: modes(s.Mode)}, nil
}

func (a *agent) statePath(id acpsdk.SessionId) string {
	return filepath.Join(a.cfg.StateDir, filepath.Base(string(id))+".json")
}

func (a *agent) save(id acpsdk.SessionId, s *session) {
	if a.cfg.StateDir == "" {
		return
	}
	b, _ := json.Marshal(s)
	if err := os.WriteFile(a.statePath(id), b, 0o644); err != nil {
		fmt.Fprintln(a.cfg.Stderr, "fakeacp: save:", err)
	}
}

func (a *agent) Cancel(context.Context, acpsdk.CancelNotification) error { return nil }

func (a *agent) CloseSession(context.Context, acpsdk.CloseSessionRequest) (acpsdk.CloseSessionResponse, error) {
	return acpsdk.CloseSessionResponse{}, nil
}

func (a *agent) ListSessions(context.Context, acpsdk.ListSessionsRequest) (acpsdk.ListSessionsResponse, error) {
	return acpsdk.ListSessionsResponse{}, nil
}

func (a *agent) ResumeSession(context.Context, acpsdk.ResumeSessionRequest) (acpsdk.ResumeSessionResponse, error) {
	return acpsdk.ResumeSessionResponse{}, acpsdk.NewMethodNotFound(acpsdk.AgentMethodSessionResume)
}

func (a *agent) SetSessionConfigOption(context.Context, acpsdk.SetSessionConfigOptionRequest) (acpsdk.SetSessionConfigOptionResponse, error) {
	return acpsdk.SetSessionConfigOptionResponse{}, nil
}

func (a *agent) SetSessionMode(_ context.Context, p acpsdk.SetSessionModeRequest) (acpsdk.SetSessionModeResponse, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := a.sessions[p.SessionId]
	if s == nil {
		return acpsdk.SetSessionModeResponse{}, acpsdk.NewInvalidParams(map[string]any{"error": "unknown session"})
	}
	s.Mode = string(p.ModeId)
	return acpsdk.SetSessionModeResponse{}, nil
}

// turn is one prompt being answered.
type turn struct {
	a     *agent
	ctx   context.Context
	id    acpsdk.SessionId
	s     *session
	reply strings.Builder
}

func (t *turn) update(u acpsdk.SessionUpdate) error {
	return t.a.conn.SessionUpdate(t.ctx, acpsdk.SessionNotification{SessionId: t.id, Update: u})
}

func (t *turn) say(text string) error {
	t.reply.WriteString(text)
	return t.update(acpsdk.UpdateAgentMessageText(text))
}

func (a *agent) Prompt(ctx context.Context, p acpsdk.PromptRequest) (acpsdk.PromptResponse, error) {
	a.mu.Lock()
	s := a.sessions[p.SessionId]
	a.mu.Unlock()
	if s == nil {
		return acpsdk.PromptResponse{}, acpsdk.NewInvalidParams(map[string]any{"error": "unknown session"})
	}
	var text strings.Builder
	for _, b := range p.Prompt {
		if b.Text != nil {
			text.WriteString(b.Text.Text)
		}
	}
	t := &turn{a: a, ctx: ctx, id: p.SessionId, s: s}
	a.mu.Lock()
	s.Turns++
	a.mu.Unlock()
	resp, err := t.run(strings.Fields(text.String()))
	if ctx.Err() != nil {
		// Cancelled: ACP wants stopReason cancelled, not an error.
		resp, err = acpsdk.PromptResponse{StopReason: acpsdk.StopReasonCancelled}, nil
	}
	a.mu.Lock()
	s.History = append(s.History, text.String(), t.reply.String())
	a.save(p.SessionId, s)
	a.mu.Unlock()
	return resp, err
}

// run does what the prompt's words ask.
func (t *turn) run(words []string) (acpsdk.PromptResponse, error) {
	end := acpsdk.PromptResponse{StopReason: acpsdk.StopReasonEndTurn}
	arg := func(k string) []string {
		for i, w := range words {
			if w == k {
				return words[i+1:]
			}
		}
		return nil
	}
	has := func(k string) bool {
		for _, w := range words {
			if w == k {
				return true
			}
		}
		return false
	}
	var err error
	switch {
	case has("CRASH"):
		_ = t.say("about to crash")
		fmt.Fprintln(t.a.cfg.Stderr, "fakeacp: crashing on purpose")
		t.a.cfg.Exit(3)
		return end, nil
	case has("MODE"):
		t.a.mu.Lock()
		m := t.s.Mode
		t.a.mu.Unlock()
		return end, t.say("mode: " + m)
	case has("FAIL"):
		return acpsdk.PromptResponse{}, acpsdk.NewInternalError(map[string]any{"error": "the fake agent failed on purpose"})
	case has("GARBAGE"):
		_, _ = t.a.out.Write([]byte("this is not json\n{\"jsonrpc\":\"2.0\",\"method\":\n[1,2,3]\n{\"jsonrpc\":\"2.0\",\"id\":999999,\"result\":{}}\n"))
	case has("HUGE"):
		line := append(make([]byte, 0, 11<<20+1), `{"jsonrpc":"2.0","method":"_x","params":"`...)
		for len(line) < 11<<20 {
			line = append(line, 'x')
		}
		_, _ = t.a.out.Write(append(line, "\"}\n"...))
	case has("SLOW"):
		if err := t.say("working"); err != nil {
			return end, err
		}
		<-t.ctx.Done()
		return acpsdk.PromptResponse{StopReason: acpsdk.StopReasonCancelled}, nil
	case has("ASKSLOW"):
		out, err := t.ask("call_askslow", acpsdk.ToolKindExecute, "sleep forever", map[string]any{"command": "sleep 1000"})
		if err != nil || out.Cancelled != nil {
			// A client answers "cancelled" when it cancels the turn, and its
			// session/cancel may still be on its way (notifications are
			// handled apart from responses): wait for it, as an agent that
			// honours session/cancel ends the turn on it. Returning first
			// would leave the cancel to hit the client's next turn.
			wait := time.NewTimer(10 * time.Second)
			defer wait.Stop()
			select {
			case <-t.ctx.Done():
			case <-wait.C:
			}
			return acpsdk.PromptResponse{StopReason: acpsdk.StopReasonCancelled}, nil
		}
		return end, t.say("permission: " + string(out.Selected.OptionId))
	case has("WITHDRAW"):
		// A request whose context is already done is sent, then
		// withdrawn with $/cancel_request.
		ctx, cancel := context.WithCancel(t.ctx)
		cancel()
		_, err := t.a.conn.RequestPermission(ctx, acpsdk.RequestPermissionRequest{
			SessionId: t.id,
			ToolCall:  acpsdk.ToolCallUpdate{ToolCallId: "call_withdraw", Title: acpsdk.Ptr("rm -rf /"), Kind: acpsdk.Ptr(acpsdk.ToolKindExecute), RawInput: map[string]any{"command": "rm -rf /"}},
			Options:   []acpsdk.PermissionOption{{Kind: acpsdk.PermissionOptionKindAllowOnce, Name: "Allow", OptionId: "allow"}},
		})
		if err == nil {
			return end, t.say("not withdrawn")
		}
		return end, t.say("withdrawn")
	case has("THINK"):
		err = t.update(acpsdk.UpdateAgentThoughtText("pondering"))
	case has("PLAN"):
		err = t.update(acpsdk.UpdatePlan(
			acpsdk.PlanEntry{Content: "read the code", Priority: acpsdk.PlanEntryPriorityHigh, Status: acpsdk.PlanEntryStatusPending},
			acpsdk.PlanEntry{Content: "write the fix", Priority: acpsdk.PlanEntryPriorityMedium, Status: acpsdk.PlanEntryStatusInProgress},
		))
	case has("USAGE"):
		err = t.update(acpsdk.SessionUpdate{UsageUpdate: &acpsdk.SessionUsageUpdate{Used: 1234, Size: 200000, Cost: &acpsdk.Cost{Amount: 0.25, Currency: "USD"}}})
		cached := 7
		end.Usage = &acpsdk.Usage{InputTokens: 10, OutputTokens: 5, TotalTokens: 15, CachedReadTokens: &cached}
	case arg("RUN") != nil:
		return end, t.runCommand(strings.Join(arg("RUN"), " "))
	case len(arg("WRITE")) >= 1:
		w := arg("WRITE")
		return end, t.write(t.path(w[0]), strings.Join(w[1:], " "))
	case len(arg("READ")) >= 1:
		r, err := t.a.conn.ReadTextFile(t.ctx, acpsdk.ReadTextFileRequest{SessionId: t.id, Path: t.path(arg("READ")[0])})
		if err != nil {
			return end, t.say("read error: " + err.Error())
		}
		return end, t.say("read: " + r.Content)
	case len(arg("TERMIN")) >= 1:
		dir := t.path(arg("TERMIN")[0])
		_, err := t.a.conn.CreateTerminal(t.ctx, acpsdk.CreateTerminalRequest{SessionId: t.id, Command: "pwd", Cwd: &dir})
		if err != nil {
			return end, t.say("terminal error: " + err.Error())
		}
		return end, t.say("terminal created")
	case len(arg("STOP")) >= 1:
		end.StopReason = acpsdk.StopReason(strings.ToLower(arg("STOP")[0]))
	}
	if err != nil {
		return end, err
	}
	if err := t.say("Hello from "); err != nil {
		return end, err
	}
	t.a.mu.Lock()
	n := t.s.Turns
	t.a.mu.Unlock()
	return end, t.say(fmt.Sprintf("the fake ACP agent (turn %d).", n))
}

// path makes p absolute in the session's cwd without cleaning it.
func (t *turn) path(p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return strings.TrimSuffix(t.s.Cwd, "/") + "/" + p
}

// ask announces a tool call and asks permission to run it.
func (t *turn) ask(id acpsdk.ToolCallId, kind acpsdk.ToolKind, title string, input map[string]any) (acpsdk.RequestPermissionOutcome, error) {
	if err := t.update(acpsdk.StartToolCall(id, title, acpsdk.WithStartKind(kind),
		acpsdk.WithStartStatus(acpsdk.ToolCallStatusPending), acpsdk.WithStartRawInput(input))); err != nil {
		return acpsdk.RequestPermissionOutcome{}, err
	}
	resp, err := t.a.conn.RequestPermission(t.ctx, acpsdk.RequestPermissionRequest{
		SessionId: t.id,
		ToolCall:  acpsdk.ToolCallUpdate{ToolCallId: id, Title: acpsdk.Ptr(title), Kind: acpsdk.Ptr(kind), RawInput: input},
		Options: []acpsdk.PermissionOption{
			{Kind: acpsdk.PermissionOptionKindAllowOnce, Name: "Allow", OptionId: "allow"},
			{Kind: acpsdk.PermissionOptionKindAllowAlways, Name: "Always allow", OptionId: "always"},
			{Kind: acpsdk.PermissionOptionKindRejectOnce, Name: "Reject", OptionId: "reject"},
		},
	})
	if err != nil {
		return acpsdk.RequestPermissionOutcome{}, err
	}
	return resp.Outcome, nil
}

// finish reports a tool call's end.
func (t *turn) finish(id acpsdk.ToolCallId, ok bool, output string) error {
	st := acpsdk.ToolCallStatusCompleted
	if !ok {
		st = acpsdk.ToolCallStatusFailed
	}
	return t.update(acpsdk.UpdateToolCall(id, acpsdk.WithUpdateStatus(st),
		acpsdk.WithUpdateContent([]acpsdk.ToolCallContent{acpsdk.ToolContent(acpsdk.TextBlock(output))})))
}

func decision(o acpsdk.RequestPermissionOutcome) string {
	if o.Selected != nil {
		return string(o.Selected.OptionId)
	}
	return "cancelled"
}

func (t *turn) runCommand(cmd string) error {
	const id = "call_run"
	out, err := t.ask(id, acpsdk.ToolKindExecute, "Run "+cmd, map[string]any{"command": cmd})
	if err != nil {
		return err
	}
	d := decision(out)
	if d != "allow" && d != "always" {
		if err := t.finish(id, false, "denied"); err != nil {
			return err
		}
		return t.say("permission: " + d)
	}
	term, err := t.a.conn.CreateTerminal(t.ctx, acpsdk.CreateTerminalRequest{SessionId: t.id, Command: cmd})
	if err != nil {
		return t.say("terminal error: " + err.Error())
	}
	exit, err := t.a.conn.WaitForTerminalExit(t.ctx, acpsdk.WaitForTerminalExitRequest{SessionId: t.id, TerminalId: term.TerminalId})
	if err != nil {
		return err
	}
	o, err := t.a.conn.TerminalOutput(t.ctx, acpsdk.TerminalOutputRequest{SessionId: t.id, TerminalId: term.TerminalId})
	if err != nil {
		return err
	}
	if _, err := t.a.conn.ReleaseTerminal(t.ctx, acpsdk.ReleaseTerminalRequest{SessionId: t.id, TerminalId: term.TerminalId}); err != nil {
		return err
	}
	code := -1
	if exit.ExitCode != nil {
		code = *exit.ExitCode
	}
	if err := t.finish(id, code == 0, o.Output); err != nil {
		return err
	}
	return t.say(fmt.Sprintf("permission: %s; exit %d; output: %s", d, code, o.Output))
}

func (t *turn) write(path, content string) error {
	const id = "call_write"
	out, err := t.ask(id, acpsdk.ToolKindEdit, "Write "+path, map[string]any{"file_path": path, "content": content})
	if err != nil {
		return err
	}
	d := decision(out)
	if d != "allow" && d != "always" {
		if err := t.finish(id, false, "denied"); err != nil {
			return err
		}
		return t.say("permission: " + d)
	}
	if _, err := t.a.conn.WriteTextFile(t.ctx, acpsdk.WriteTextFileRequest{SessionId: t.id, Path: path, Content: content}); err != nil {
		var re *acpsdk.RequestError
		if errors.As(err, &re) {
			_ = t.finish(id, false, re.Error())
		}
		return t.say("write error: " + err.Error())
	}
	if err := t.finish(id, true, "wrote "+path); err != nil {
		return err
	}
	return t.say("permission: " + d + "; wrote " + path)
}
