package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/spf13/cobra"

	"github.com/betcode-dev/betcode/agent/client"
	"github.com/betcode-dev/betcode/agent/permission"
	"github.com/betcode-dev/betcode/agent/provider"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

type chatOpts struct {
	session, model, cwd string
	worktree            string
	provider            string
	providerConfig      map[string]string
	allow, yesTo        []string
	from                uint64
}

// noTerminalReason is the reason sent with a permission nobody can answer.
const noTerminalReason = "no terminal to answer; use --yes-to or --allow"

func newChatCmd(g *globals) *cobra.Command {
	var o chatOpts
	cmd := &cobra.Command{
		Use:   "chat [PROMPT...]",
		Short: "Chat with Claude Code (one prompt from the arguments, or interactively from stdin)",
		Long: `Chat with Claude Code. With a PROMPT, send it, print the answer and exit.
Without one, read prompts line by line from stdin. Text streams as it arrives,
tool calls show on one line each, usage is printed at the end of every turn,
and the todo list is printed whenever it changes.

When Claude asks for permission, the tool and its input are shown; answer
y (allow once), a (allow for the rest of the session) or n (deny), or
"n REASON" to deny and tell Claude why. When Claude asks questions, answer
each with an option's number, several numbers separated by commas where
several are allowed, or your own text.

--yes-to PATTERN answers yes (once) to every permission request that matches
a Claude Code rule such as 'Bash(go test *)', Read or 'Edit(src/**)', and
prints a line for each. Unlike --allow, which the agent applies so Claude
never asks, --yes-to is applied by this client, which sees every request.

Without a terminal to answer on (a PROMPT and stdin not a terminal, or stdin
ended), permission requests no --yes-to matches are denied and questions are
answered with their first option.

Ctrl-C cancels the running turn; a second Ctrl-C, or Ctrl-C with no turn
running, exits. Ctrl-D ends the input: the client exits after the turn.
A dropped connection is resumed from the last event received.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runChat(cmd.Context(), g, o, strings.Join(args, " "), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.session, "session", "", "attach to an existing session instead of starting one")
	f.StringVar(&o.model, "model", "", "model for a new session")
	f.StringVar(&o.cwd, "cwd", "", "working directory for a new session (default: the current directory)")
	f.StringVar(&o.worktree, "worktree", "", "start the new session in this worktree (an id from betcode worktree list); wins over --cwd")
	f.StringVar(&o.provider, "provider", "", "provider of a new session: claude-code (default), codex, openai-api, acp")
	f.StringToStringVar(&o.providerConfig, "provider-config", nil, "provider setting of a new session, KEY=VALUE (repeatable), e.g. agent=gemini to pick an ACP agent")
	f.StringSliceVar(&o.allow, "allow", nil, "tools the agent lets Claude use without asking, e.g. Bash or 'Bash(git *)' (repeatable)")
	f.StringArrayVar(&o.yesTo, "yes-to", nil, "answer yes once, in this client, to permission requests matching this rule, e.g. 'Bash(go test *)' (repeatable)")
	f.Uint64Var(&o.from, "from", 0, "with --session: replay events after this sequence first")
	return cmd
}

func runChat(ctx context.Context, g *globals, o chatOpts, prompt string, stdout, stderr io.Writer) error {
	home, _ := os.UserHomeDir()
	yes, err := newAutoApprover(o.yesTo, home)
	if err != nil {
		return &client.ExitError{Code: client.ExitInvalidArgs, Err: err}
	}
	if o.cwd == "" && o.session == "" {
		wd, err := os.Getwd()
		if err != nil {
			return err
		}
		o.cwd = wd
	}
	if o.cwd != "" {
		abs, err := filepath.Abs(o.cwd)
		if err != nil {
			return &client.ExitError{Code: client.ExitInvalidArgs, Err: err}
		}
		o.cwd = abs
	}
	kind, err := provider.Parse(o.provider)
	if err != nil {
		return &client.ExitError{Code: client.ExitInvalidArgs, Err: err}
	}
	conn, err := g.dial()
	if err != nil {
		return err
	}
	defer conn.Close()
	api := pb.NewAgentServiceClient(conn)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	// Attaching to a session without --from streams live events only (the
	// agent's default); with --from it replays first.
	start := &pb.StartConversation{SessionId: o.session, WorkingDirectory: o.cwd, Model: o.model, AllowedTools: o.allow, WorktreeId: o.worktree, Provider: kind, ProviderConfig: o.providerConfig}
	if o.session != "" && o.from > 0 {
		start.Metadata = map[string]string{"from_sequence": fmt.Sprint(o.from)}
	}
	conv, err := client.Start(ctx, api, start, o.from)
	if err != nil {
		return err
	}
	defer conv.Close()
	if g.negotiation != nil {
		for _, w := range g.negotiation.Response().GetWarnings() {
			fmt.Fprintln(stderr, "warning:", w)
		}
	}
	r := &client.Renderer{Out: stdout, Err: stderr, QuestionsByCaller: true}
	// resuming quiets the notices of a relay drain's reconnection after
	// its one line, until the stream is back (OnReconnect runs in Recv,
	// on the goroutine below).
	resuming := false
	conv.OnReconnect = func(err error, wait time.Duration) {
		switch {
		case resuming:
		case client.RelayDraining(err):
			resuming = true
			fmt.Fprintln(stderr, "\n[relay restarting; resuming the session]")
		default:
			fmt.Fprintf(stderr, "\n[connection lost: %v; reconnecting in %s]\n", shortErr(err), wait.Round(time.Millisecond))
		}
	}

	events := make(chan *pb.AgentEvent, 64)
	recvErr := make(chan error, 1)
	go func() {
		for {
			ev, err := conv.Recv(ctx)
			if err != nil {
				recvErr <- err
				return
			}
			resuming = false
			select {
			case events <- ev:
			case <-ctx.Done():
				return
			}
		}
	}()

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt)
	defer signal.Stop(sigs)

	tty := stdinIsTerminal()
	c := &chat{
		r: r, stderr: stderr, yes: yes, cwd: o.cwd,
		events: events, recvErr: recvErr, sigs: sigs,
		startInput: func() <-chan string { return readLines(ctx, os.Stdin) },
		send: func(req *pb.AgentRequest) error {
			err := conv.Send(req)
			if errors.Is(err, io.EOF) {
				// The agent ended the stream; Recv reports why.
				return nil
			}
			if err != nil {
				return fmt.Errorf("send: %w", err)
			}
			return nil
		},
		closeSend: func() { _ = conv.CloseSend() },
	}
	c.setMode(prompt != "", tty)
	return c.run(prompt)
}

// setMode sets how input is used. Without a PROMPT the input carries the
// messages, and the answers to prompts; with one, it is read only to answer
// prompts, and only when it is a terminal.
func (c *chat) setMode(hasPrompt, tty bool) {
	c.interactive = tty && !hasPrompt
	c.holdInput = !tty && !hasPrompt
	c.moreMessages = !hasPrompt
	c.canAnswer = !hasPrompt || tty
}

// stdinIsTerminal reports whether stdin is a terminal someone can type
// answers on. isTerminal alone also takes /dev/null (a character device),
// which is what stdin is under CI, cron, systemd and exec without input.
func stdinIsTerminal() bool {
	if !isTerminal(os.Stdin) {
		return false
	}
	in, err1 := os.Stdin.Stat()
	null, err2 := os.Stat(os.DevNull)
	return err1 != nil || err2 != nil || !os.SameFile(in, null)
}

// readLines reads lines from in until EOF, then closes the channel.
func readLines(ctx context.Context, in io.Reader) <-chan string {
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(in)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			case <-ctx.Done():
				return
			}
		}
		close(lines)
	}()
	return lines
}

// pendingPrompt is something only the user can answer: a permission
// request, or the questions of one AskUserQuestion call.
type pendingPrompt struct {
	perm      *pb.PermissionRequest
	qid       string
	questions []*pb.UserQuestion
	answers   map[string]string
	next      int  // the question being asked
	shown     bool // its prompt line has been printed
}

// chat is the event loop of `betcode chat`: it renders events, answers
// prompts from input lines (or automatically), sends messages and handles
// Ctrl-C. It talks to the agent only through send and closeSend, so tests
// can drive it with channels.
type chat struct {
	r      *client.Renderer
	stderr io.Writer
	yes    *autoApprover
	cwd    string

	events  <-chan *pb.AgentEvent
	recvErr <-chan error
	sigs    <-chan os.Signal
	lines   <-chan string // nil until startInput is called
	// startInput starts reading input lines; called at most once, at the
	// start when messages come from the input, else at the first prompt
	// (so that a backgrounded `betcode chat PROMPT &` does not stop on a
	// terminal read it does not need).
	startInput func() <-chan string
	send       func(*pb.AgentRequest) error
	closeSend  func()

	interactive  bool // print "> " before reading a message
	holdInput    bool // piped input: read the next line only when it can be used at once
	moreMessages bool // messages may still come from the input
	canAnswer    bool // a person can answer prompts from the input

	inputStarted bool
	turns        int // turns this client started that have not completed
	cancelSent   bool
	closing      bool
	exit         int
	queue        []*pendingPrompt
	collecting   *pendingPrompt // questions of one id still arriving
	// sent: messages this client sent whose UserInput event has not come
	// back yet. The user typed them, so their echo is not printed; a
	// message from another client (or a replayed one) is.
	sent []string
}

func (c *chat) run(prompt string) error {
	if c.moreMessages {
		c.input()
	}
	if prompt != "" {
		if err := c.sendMessage(prompt); err != nil {
			return err
		}
	} else {
		c.promptMessage()
	}
	for {
		if !c.moreMessages && c.turns == 0 && len(c.queue) == 0 && c.collecting == nil && !c.closing {
			c.closing = true
			c.closeSend()
		}
		lines := c.lines
		if c.holdInput && c.turns > 0 && len(c.queue) == 0 {
			// A script's next line is either the answer to a prompt that
			// has not arrived yet or the next message: wait to know.
			lines = nil
		}
		select {
		case ev := <-c.events:
			if err := c.event(ev); err != nil {
				return err
			}
		case err := <-c.recvErr:
			if errors.Is(err, io.EOF) {
				if c.exit != 0 {
					return &client.ExitError{Code: c.exit, Err: errors.New("the turn ended with an error")}
				}
				return nil
			}
			return err
		case line, ok := <-lines:
			if !ok {
				c.lines = nil
				c.moreMessages = false
				c.canAnswer = false
				if err := c.advance(); err != nil {
					return err
				}
				continue
			}
			if err := c.line(strings.TrimSpace(line)); err != nil {
				return err
			}
		case <-c.sigs:
			if c.turns == 0 || c.cancelSent {
				return &client.ExitError{Code: client.ExitOK, Err: errors.New("interrupted")}
			}
			if !c.r.EndLine() {
				fmt.Fprintln(c.stderr) // after the terminal's "^C"
			}
			fmt.Fprintln(c.stderr, "[cancelling the turn; Ctrl-C again to quit]")
			c.cancelSent = true
			if err := c.send(&pb.AgentRequest{Request: &pb.AgentRequest_Cancel{Cancel: &pb.CancelRequest{Reason: "user pressed Ctrl-C"}}}); err != nil {
				return err
			}
		}
	}
}

func (c *chat) input() {
	if !c.inputStarted {
		c.inputStarted = true
		c.lines = c.startInput()
	}
}

// promptMessage prints "> " when the user may type the next message.
func (c *chat) promptMessage() {
	if c.interactive && c.moreMessages && c.turns == 0 && len(c.queue) == 0 {
		fmt.Fprint(c.stderr, "> ")
	}
}

func (c *chat) event(ev *pb.AgentEvent) error {
	// The questions of one request arrive back to back: anything else
	// (normally StatusChange WAITING_FOR_USER) ends the batch.
	if c.collecting != nil {
		if uq := ev.GetUserQuestion(); uq == nil || uq.QuestionId != c.collecting.qid {
			c.queue = append(c.queue, c.collecting)
			c.collecting = nil
		}
	}
	if in := ev.GetUserInput(); in != nil && c.ownEcho(in) {
		return nil
	}
	c.r.Event(ev)
	switch e := ev.Event.(type) {
	case *pb.AgentEvent_SessionInfo:
		if e.SessionInfo.WorkingDirectory != "" {
			c.cwd = e.SessionInfo.WorkingDirectory
		}
	case *pb.AgentEvent_PermissionRequest:
		p := e.PermissionRequest
		if rule, ok := c.yes.match(p, c.cwd); ok {
			fmt.Fprintf(c.stderr, "  yes (once), by --yes-to %s\n", rule)
			if err := c.send(permissionResponse(p.RequestId, pb.PermissionDecision_ALLOW_ONCE, "")); err != nil {
				return err
			}
			break
		}
		c.queue = append(c.queue, &pendingPrompt{perm: p})
	case *pb.AgentEvent_UserQuestion:
		if c.collecting == nil {
			c.collecting = &pendingPrompt{qid: e.UserQuestion.QuestionId, answers: map[string]string{}}
		}
		c.collecting.questions = append(c.collecting.questions, e.UserQuestion)
	case *pb.AgentEvent_ToolCallResult:
		// A permission answered elsewhere (another client) or withdrawn:
		// the tool ran or failed without us.
		for i, p := range c.queue {
			if p.perm != nil && p.perm.ToolUseId != "" && p.perm.ToolUseId == e.ToolCallResult.ToolId {
				if i == 0 && p.shown {
					fmt.Fprintln(c.stderr, "\n  (answered elsewhere)")
				}
				c.queue = append(c.queue[:i], c.queue[i+1:]...)
				break
			}
		}
	case *pb.AgentEvent_Error:
		if e.Error.IsFatal || c.turns > 0 {
			c.exit = client.CodeForEvent(e.Error.Code)
		}
	case *pb.AgentEvent_TurnComplete:
		if len(c.queue) > 0 && c.queue[0].shown {
			fmt.Fprintln(c.stderr, "\n  (the turn ended; nothing left to answer)")
		}
		c.queue, c.collecting = nil, nil
		c.turns, c.cancelSent = max(c.turns-1, 0), false
		if c.turns == 0 {
			// Every message sent was taken or refused: an echo still
			// awaited will not come (a refused message has none).
			c.sent = nil
		}
		if e.TurnComplete.StopReason == "cancelled" {
			c.exit = 0 // the user asked for it
		}
		c.promptMessage()
		return nil
	}
	return c.advance()
}

// advance shows the first pending prompt, or answers the pending prompts
// automatically when nobody can.
func (c *chat) advance() error {
	for len(c.queue) > 0 {
		p := c.queue[0]
		if c.canAnswer {
			c.input()
			if !p.shown {
				p.shown = true
				c.show(p)
			}
			return nil
		}
		c.queue = c.queue[1:]
		if err := c.send(c.autoAnswer(p)); err != nil {
			return err
		}
	}
	return nil
}

func (c *chat) show(p *pendingPrompt) {
	if p.perm != nil {
		fmt.Fprint(c.stderr, "  allow? [y]es once / [a]lways this session / [n]o (n: reason): ")
		return
	}
	q := p.questions[p.next]
	c.r.EndLine()
	fmt.Fprint(c.r.Out, client.Question(q))
	fmt.Fprint(c.stderr, answerHint(q))
}

func answerHint(q *pb.UserQuestion) string {
	switch {
	case len(q.Options) == 0:
		return "  your answer: "
	case q.MultiSelect:
		return "  numbers separated by commas, or your own answer: "
	}
	return "  number, or your own answer: "
}

// autoAnswer answers a prompt nobody can answer: a permission is denied,
// each question gets its first option.
func (c *chat) autoAnswer(p *pendingPrompt) *pb.AgentRequest {
	if p.perm != nil {
		if p.shown {
			fmt.Fprintln(c.stderr)
		}
		fmt.Fprintf(c.stderr, "  denied: %s\n", noTerminalReason)
		return permissionResponse(p.perm.RequestId, pb.PermissionDecision_DENY, noTerminalReason)
	}
	if p.shown {
		fmt.Fprintln(c.stderr)
	}
	for i := p.next; i < len(p.questions); i++ {
		q := p.questions[i]
		if i > p.next || !p.shown {
			fmt.Fprint(c.r.Out, client.Question(q))
		}
		a := firstOption(q)
		fmt.Fprintf(c.stderr, "  no terminal to answer: chose %q\n", a)
		p.answers[q.Question] = a
	}
	return questionResponse(p.qid, p.answers)
}

func firstOption(q *pb.UserQuestion) string {
	if len(q.Options) == 0 {
		return ""
	}
	return optionLabel(q.Options[0])
}

func optionLabel(o *pb.QuestionOption) string {
	if o.Label != "" {
		return o.Label
	}
	return o.Value
}

// line handles one input line: the answer to the first pending prompt, or
// else the next message.
func (c *chat) line(line string) error {
	if len(c.queue) > 0 {
		p := c.queue[0]
		if p.perm != nil {
			d, reason, ok := parseDecision(line)
			if !ok {
				fmt.Fprint(c.stderr, "  please answer y, a, n, or n followed by a reason: ")
				return nil
			}
			c.queue = c.queue[1:]
			if err := c.send(permissionResponse(p.perm.RequestId, d, reason)); err != nil {
				return err
			}
			return c.advance()
		}
		q := p.questions[p.next]
		a, err := parseAnswer(q, line)
		if err != nil {
			fmt.Fprintf(c.stderr, "  %v; %s", err, strings.TrimLeft(answerHint(q), " "))
			return nil
		}
		p.answers[q.Question] = a
		p.next++
		if p.next < len(p.questions) {
			c.show(p)
			return nil
		}
		c.queue = c.queue[1:]
		if err := c.send(questionResponse(p.qid, p.answers)); err != nil {
			return err
		}
		return c.advance()
	}
	if !c.moreMessages {
		return nil // one-prompt mode: input only answers prompts
	}
	if line == "" {
		c.promptMessage()
		return nil
	}
	return c.sendMessage(line)
}

// sendMessage sends a user message that starts (or queues) a turn.
func (c *chat) sendMessage(text string) error {
	if err := c.send(userMessage(text)); err != nil {
		return err
	}
	c.turns++
	c.sent = append(c.sent, text)
	return nil
}

// ownEcho reports whether in is the echo of the oldest message this client
// sent and not yet seen back, and if so forgets that message.
func (c *chat) ownEcho(in *pb.UserInputEvent) bool {
	if len(c.sent) == 0 || c.sent[0] != in.Content {
		return false
	}
	c.sent = c.sent[1:]
	return true
}

func userMessage(text string) *pb.AgentRequest {
	return &pb.AgentRequest{Request: &pb.AgentRequest_Message{Message: &pb.UserMessage{Content: text}}}
}

func permissionResponse(id string, d pb.PermissionDecision, reason string) *pb.AgentRequest {
	return &pb.AgentRequest{Request: &pb.AgentRequest_Permission{Permission: &pb.PermissionResponse{RequestId: id, Decision: d, Reason: reason}}}
}

func questionResponse(id string, answers map[string]string) *pb.AgentRequest {
	return &pb.AgentRequest{Request: &pb.AgentRequest_QuestionResponse{QuestionResponse: &pb.UserQuestionResponse{QuestionId: id, Answers: answers}}}
}

// parseDecision parses the answer to a permission prompt: y/yes (allow
// once), a/always (allow for the session), n/no (deny), optionally followed
// by a reason for Claude ("n use the Makefile", "no: too risky").
func parseDecision(s string) (d pb.PermissionDecision, reason string, ok bool) {
	s = strings.TrimSpace(s)
	word, rest := s, ""
	if i := strings.IndexFunc(s, func(r rune) bool { return unicode.IsSpace(r) || r == ':' || r == ',' }); i >= 0 {
		word, rest = s[:i], strings.TrimLeft(s[i:], " \t:,")
	}
	switch strings.ToLower(word) {
	case "y", "yes":
		if rest == "" {
			return pb.PermissionDecision_ALLOW_ONCE, "", true
		}
	case "a", "always":
		if rest == "" {
			return pb.PermissionDecision_ALLOW_SESSION, "", true
		}
	case "n", "no":
		return pb.PermissionDecision_DENY, strings.TrimSpace(rest), true
	}
	return 0, "", false
}

// parseAnswer turns what the user typed for a question into the answer
// sent to Claude: an option's number gives its label; several numbers
// (separated by commas or spaces, multi-select questions only) give their
// labels joined with ", "; anything else is the user's own answer.
func parseAnswer(q *pb.UserQuestion, s string) (string, error) {
	s = strings.TrimSpace(s)
	n := len(q.Options)
	if s == "" {
		if n == 0 {
			return "", errors.New("type an answer")
		}
		return "", fmt.Errorf("type a number from 1 to %d, or your own answer", n)
	}
	fields := strings.FieldsFunc(s, func(r rune) bool { return r == ',' || unicode.IsSpace(r) })
	var picks []int
	for _, f := range fields {
		i, err := strconv.Atoi(f)
		if err != nil {
			return s, nil // free text
		}
		picks = append(picks, i)
	}
	if n == 0 {
		return s, nil
	}
	var labels []string
	seen := map[int]bool{}
	for _, i := range picks {
		if i < 1 || i > n {
			return "", fmt.Errorf("there is no option %d (1 to %d)", i, n)
		}
		if !seen[i] {
			seen[i] = true
			labels = append(labels, optionLabel(q.Options[i-1]))
		}
	}
	if len(labels) > 1 && !q.MultiSelect {
		return "", errors.New("pick one option")
	}
	return strings.Join(labels, ", "), nil
}

// autoApprover answers yes to the permission requests that match one of
// the --yes-to rules, using the agent's permission engine.
type autoApprover struct {
	eng *permission.Engine
}

func newAutoApprover(patterns []string, home string) (*autoApprover, error) {
	if len(patterns) == 0 {
		return nil, nil
	}
	rules := make([]permission.Rule, 0, len(patterns))
	for _, p := range patterns {
		r, err := permission.ParseRule(p, permission.Allow)
		if err != nil {
			return nil, fmt.Errorf("--yes-to: %w", err)
		}
		r.Source = "--yes-to"
		rules = append(rules, r)
	}
	if home != "" && !filepath.IsAbs(home) {
		home = ""
	}
	eng, err := permission.New(rules, permission.Options{Home: home})
	if err != nil {
		return nil, fmt.Errorf("--yes-to: %w", err)
	}
	return &autoApprover{eng: eng}, nil
}

// match reports whether the request is pre-approved, and by which rule.
func (a *autoApprover) match(p *pb.PermissionRequest, cwd string) (string, bool) {
	if a == nil {
		return "", false
	}
	var input map[string]any
	if p.Input != nil {
		input = p.Input.AsMap()
	}
	d := a.eng.Decide(permission.Request{Tool: p.ToolName, Input: input, Cwd: cwd})
	if d.Behavior != permission.Allow {
		return "", false
	}
	if d.Rule == nil {
		return "", true
	}
	return d.Rule.String(), true
}

func shortErr(err error) string {
	s := err.Error()
	if i := strings.Index(s, "desc = "); i >= 0 {
		s = s[i+7:]
	}
	return s
}
