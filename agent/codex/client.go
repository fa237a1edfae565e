package codex

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/betcode-dev/betcode/agent/internal/procgroup"
)

// ErrExited is returned by calls made or pending when the app-server
// process is gone.
var ErrExited = errors.New("codex app-server exited")

// optOut are notifications the client never uses; the app-server does not
// send them.
var optOut = []string{"account/rateLimits/updated", "thread/status/changed"}

// Client drives one `codex app-server` child over its stdin and stdout.
// Many threads can share it. Its methods are safe for concurrent use.
type Client struct {
	cfg   Config
	log   *slog.Logger
	cmd   *exec.Cmd
	stdin io.WriteCloser
	wmu   sync.Mutex // one line at a time on stdin
	info  InitializeResponse

	mu        sync.Mutex
	nextID    int64
	pending   map[int64]chan callResult
	approvals map[string]string // JSON-RPC id of a pending approval -> Approval.ID
	queue     []Event           // decoded events not yet delivered
	readDone  bool              // the reader finished: queue ends with *Exited

	wake    chan struct{} // pokes the pump (capacity 1)
	events  chan Event
	exited  chan struct{} // closed once the process was waited for
	exitErr error         // set before exited is closed
	stop    chan struct{} // closed by Close: the pump stops delivering
	closing atomic.Bool
	closed  sync.Once
	stderr  tail
	wg      sync.WaitGroup
}

type callResult struct {
	raw json.RawMessage
	err error
}

// Start writes cfg.Home's config.toml, spawns `codex app-server` with
// CODEX_HOME set to it and completes the initialize handshake. Close the
// Client when done.
func Start(ctx context.Context, cfg Config) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	if err := cfg.writeHome(); err != nil {
		return nil, err
	}
	cmd := exec.Command(cfg.Binary, "app-server")
	cmd.Dir = cfg.Home
	cmd.Env = cfg.environ()
	// Its own process group, so that Close can end the shells it runs too.
	cmd.SysProcAttr = procgroup.Attr()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("codex stdin pipe: %w", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("codex stdout pipe: %w", err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, fmt.Errorf("codex stderr pipe: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s app-server: %w", cfg.Binary, err)
	}
	c := &Client{
		cfg: cfg, log: cfg.Logger.With("component", "codex", "pid", cmd.Process.Pid), cmd: cmd, stdin: stdin,
		pending: map[int64]chan callResult{}, approvals: map[string]string{},
		wake: make(chan struct{}, 1), events: make(chan Event), exited: make(chan struct{}), stop: make(chan struct{}),
	}
	stderrDone := make(chan struct{})
	c.wg.Add(3)
	go func() { defer c.wg.Done(); defer close(stderrDone); c.readStderr(stderr) }()
	go func() { defer c.wg.Done(); c.read(stdout, stderrDone) }()
	go func() { defer c.wg.Done(); c.pump() }()

	var info InitializeResponse
	err = c.call(ctx, MethodInitialize, InitializeParams{
		ClientInfo:   ClientInfo{Name: cfg.ClientName, Version: cfg.ClientVersion},
		Capabilities: &InitializeCapabilities{OptOutNotificationMethods: optOut},
	}, &info)
	if err == nil {
		err = c.notify(MethodInitialized, nil)
	}
	if err != nil {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = c.Close(cctx)
		return nil, fmt.Errorf("codex initialize: %w", err)
	}
	c.info = info
	c.log.Debug("codex app-server ready", "user_agent", info.UserAgent, "codex_home", info.CodexHome)
	return c, nil
}

// Info returns the initialize result (user agent, CODEX_HOME).
func (c *Client) Info() InitializeResponse { return c.info }

// Events returns the decoded notifications and approval requests, in
// order. It is closed after the *Exited event. Read it continuously: events
// queue up without bound in the meantime, so none is ever dropped before
// Close.
func (c *Client) Events() <-chan Event { return c.events }

// Done is closed when the process has exited.
func (c *Client) Done() <-chan struct{} { return c.exited }

// Err returns, once Done is closed, why the process exited: nil after
// Close, else an error wrapping ErrExited with the end of its stderr.
func (c *Client) Err() error {
	select {
	case <-c.exited:
		return c.exitErr
	default:
		return nil
	}
}

// StartThread starts a thread with the configured approval policy and
// sandbox unless p sets them, and returns it.
func (c *Client) StartThread(ctx context.Context, p ThreadStartParams) (ThreadResponse, error) {
	if p.ApprovalPolicy == "" {
		p.ApprovalPolicy = c.cfg.ApprovalPolicy
	}
	if p.Sandbox == "" {
		p.Sandbox = c.cfg.Sandbox
	}
	var r ThreadResponse
	if err := c.call(ctx, MethodThreadStart, p, &r); err != nil {
		return r, fmt.Errorf("codex thread/start: %w", err)
	}
	return r, nil
}

// ResumeThread loads a stored thread, also one started by another process
// with the same CODEX_HOME, with the configured approval policy and sandbox
// unless p sets them. Turns are left out of the answer.
func (c *Client) ResumeThread(ctx context.Context, p ThreadResumeParams) (ThreadResponse, error) {
	if p.ApprovalPolicy == "" {
		p.ApprovalPolicy = c.cfg.ApprovalPolicy
	}
	if p.Sandbox == "" {
		p.Sandbox = c.cfg.Sandbox
	}
	p.ExcludeTurns = true
	var r ThreadResponse
	if err := c.call(ctx, MethodThreadResume, p, &r); err != nil {
		return r, fmt.Errorf("codex thread/resume %s: %w", p.ThreadID, err)
	}
	return r, nil
}

// StartTurn sends a user message to a thread and returns the new turn; its
// progress arrives on Events until a *TurnEnded with its id.
func (c *Client) StartTurn(ctx context.Context, threadID, text string) (Turn, error) {
	return c.StartTurnInput(ctx, threadID, []UserInput{{Type: InputText, Text: text}})
}

// StartTurnInput is StartTurn with a message of several inputs (text and
// images).
func (c *Client) StartTurnInput(ctx context.Context, threadID string, input []UserInput) (Turn, error) {
	var r TurnStartResponse
	err := c.call(ctx, MethodTurnStart, TurnStartParams{ThreadID: threadID, Input: input}, &r)
	if err != nil {
		return Turn{}, fmt.Errorf("codex turn/start: %w", err)
	}
	return r.Turn, nil
}

// Interrupt ends a running turn: it completes with status interrupted and
// its pending approvals are withdrawn.
func (c *Client) Interrupt(ctx context.Context, threadID, turnID string) error {
	if err := c.call(ctx, MethodTurnInterrupt, TurnInterruptParams{ThreadID: threadID, TurnID: turnID}, nil); err != nil {
		return fmt.Errorf("codex turn/interrupt %s: %w", turnID, err)
	}
	return nil
}

// Close ends the app-server: it closes its stdin, which makes it exit at
// once (a running turn is stored as interrupted), kills its process group
// if it has not exited when ctx ends, and waits for the client's
// goroutines. Events not read by then are dropped.
func (c *Client) Close(ctx context.Context) error {
	var err error
	c.closed.Do(func() {
		c.closing.Store(true)
		// Not under wmu: closing the pipe also ends a write blocked on an
		// app-server that stopped reading.
		_ = c.stdin.Close()
		select {
		case <-c.exited:
		case <-ctx.Done():
			c.kill()
			<-c.exited
			err = fmt.Errorf("codex app-server did not exit after its stdin closed: %w", ctx.Err())
		}
		close(c.stop)
		c.wg.Wait()
	})
	return err
}

// kill ends the process group.
func (c *Client) kill() {
	if c.cmd.Process == nil {
		return
	}
	if err := procgroup.Signal(c.cmd.Process, syscall.SIGKILL); err != nil {
		_ = c.cmd.Process.Kill()
	}
}

// call sends a request and decodes its result into out (unless nil).
func (c *Client) call(ctx context.Context, method string, params, out any) error {
	ch := make(chan callResult, 1)
	c.mu.Lock()
	if c.readDone {
		c.mu.Unlock()
		return ErrExited
	}
	c.nextID++
	id := c.nextID
	c.pending[id] = ch
	c.mu.Unlock()
	forget := func() {
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
	}
	if err := c.write(ctx, map[string]any{"id": id, "method": method, "params": params}); err != nil {
		forget()
		return err
	}
	select {
	case r := <-ch:
		if r.err != nil {
			return r.err
		}
		if out == nil {
			return nil
		}
		if err := json.Unmarshal(r.raw, out); err != nil {
			return fmt.Errorf("decode %s result: %w", method, err)
		}
		return nil
	case <-ctx.Done():
		forget()
		return ctx.Err()
	}
}

// notify sends a notification.
func (c *Client) notify(method string, params any) error {
	m := map[string]any{"method": method}
	if params != nil {
		m["params"] = params
	}
	return c.write(context.Background(), m)
}

// respond answers a server request.
func (c *Client) respond(ctx context.Context, id json.RawMessage, result any) error {
	return c.write(ctx, map[string]any{"id": id, "result": result})
}

func (c *Client) write(ctx context.Context, v any) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode codex message: %w", err)
	}
	b = append(b, '\n')
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if _, err := c.stdin.Write(b); err != nil {
		select {
		case <-c.exited:
			return ErrExited
		default:
		}
		return fmt.Errorf("write to codex app-server: %w", err)
	}
	return nil
}

// read decodes stdout until EOF, then reaps the process and ends the event
// stream with *Exited.
func (c *Client) read(stdout io.Reader, stderrDone <-chan struct{}) {
	r := bufio.NewReaderSize(stdout, 64<<10)
	for {
		line, err := readLine(r, maxLine)
		if len(line) > 0 {
			c.handle(line)
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				c.log.Warn("read codex stdout", "err", err)
				_, _ = io.Copy(io.Discard, r)
			}
			break
		}
	}
	<-stderrDone
	werr := c.cmd.Wait()
	var exitErr error
	if !c.closing.Load() {
		exitErr = fmt.Errorf("%w unexpectedly (%v); stderr: %s", ErrExited, werr, c.stderr.String())
	}
	c.mu.Lock()
	c.readDone = true
	for id, ch := range c.pending {
		ch <- callResult{err: ErrExited}
		delete(c.pending, id)
	}
	c.queue = append(c.queue, &Exited{Err: exitErr})
	c.mu.Unlock()
	c.exitErr = exitErr
	close(c.exited)
	c.poke()
}

// readLine reads one line; a line longer than limit comes back empty.
func readLine(r *bufio.Reader, limit int) ([]byte, error) {
	var buf []byte
	tooLong := false
	for {
		chunk, err := r.ReadSlice('\n')
		if !tooLong && len(buf)+len(chunk) <= limit {
			buf = append(buf, chunk...)
		} else {
			tooLong, buf = true, nil
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return buf, err
	}
}

// handle dispatches one stdout line.
func (c *Client) handle(line []byte) {
	m, k, err := decodeLine(line)
	if err != nil {
		c.log.Warn("undecodable codex line", "err", err, "line", clip(string(line), 200))
		return
	}
	switch k {
	case kindResponse:
		id, _ := responseID(m.ID)
		c.mu.Lock()
		ch := c.pending[id]
		delete(c.pending, id)
		c.mu.Unlock()
		if ch == nil {
			c.log.Warn("codex response to no pending request", "id", id)
			return
		}
		if m.Error != nil {
			ch <- callResult{err: m.Error}
		} else {
			ch <- callResult{raw: m.Result}
		}
	case kindRequest:
		c.serverRequest(m)
	case kindNotification:
		if ev := c.notification(m); ev != nil {
			c.enqueue(ev)
		}
	}
}

// serverRequest turns approval requests into *Approval events and refuses
// the requests BetCode does not handle, so that Codex never waits on them.
func (c *Client) serverRequest(m message) {
	a, err := approvalFrom(m)
	if err != nil {
		c.log.Warn("undecodable codex approval request", "method", m.Method, "err", err)
	}
	if a == nil {
		c.log.Warn("refusing codex server request", "method", m.Method)
		err := c.write(context.Background(), map[string]any{"id": m.ID, "error": RPCError{Code: -32601, Message: "not supported by BetCode: " + m.Method}})
		if err != nil {
			c.log.Warn("refuse codex server request", "method", m.Method, "err", err)
		}
		return
	}
	a.client = c
	rid, _ := requestID(m.ID)
	c.mu.Lock()
	c.approvals[rid] = a.id
	c.mu.Unlock()
	c.enqueue(a)
}

// approvalFrom decodes an approval request; it returns nil for other
// requests and for undecodable ones (with the error).
func approvalFrom(m message) (*Approval, error) {
	rid, err := requestID(m.ID)
	if err != nil {
		return nil, err
	}
	var a *Approval
	switch m.Method {
	case MethodCommandApprovalRequest:
		var p CommandExecutionRequestApprovalParams
		if err := json.Unmarshal(m.Params, &p); err != nil {
			return nil, fmt.Errorf("decode %s: %w", m.Method, err)
		}
		a = &Approval{Kind: ApprovalCommand, ThreadID: p.ThreadID, TurnID: p.TurnID, ItemID: p.ItemID,
			Reason: deref(p.Reason), Command: deref(p.Command), Cwd: deref(p.Cwd)}
	case MethodFileChangeApproval:
		var p FileChangeRequestApprovalParams
		if err := json.Unmarshal(m.Params, &p); err != nil {
			return nil, fmt.Errorf("decode %s: %w", m.Method, err)
		}
		a = &Approval{Kind: ApprovalFileChange, ThreadID: p.ThreadID, TurnID: p.TurnID, ItemID: p.ItemID,
			Reason: deref(p.Reason), GrantRoot: deref(p.GrantRoot)}
	default:
		return nil, nil
	}
	a.id = a.TurnID + "/" + rid
	a.rawID = append(json.RawMessage(nil), m.ID...)
	return a, nil
}

// notification decodes the notifications BetCode maps; others become
// *Notification.
func (c *Client) notification(m message) Event {
	var ev Event
	var err error
	switch m.Method {
	case MethodTurnStarted, MethodTurnCompleted:
		var p TurnNotification
		if err = json.Unmarshal(m.Params, &p); err == nil {
			if m.Method == MethodTurnStarted {
				ev = &TurnStarted{ThreadID: p.ThreadID, Turn: p.Turn}
			} else {
				ev = &TurnEnded{ThreadID: p.ThreadID, Turn: p.Turn}
			}
		}
	case MethodItemStarted, MethodItemCompleted:
		var p ItemNotification
		if err = json.Unmarshal(m.Params, &p); err == nil {
			if m.Method == MethodItemStarted {
				ev = &ItemStarted{ThreadID: p.ThreadID, TurnID: p.TurnID, Item: p.Item}
			} else {
				ev = &ItemCompleted{ThreadID: p.ThreadID, TurnID: p.TurnID, Item: p.Item}
			}
		}
	case MethodAgentMessageDelta, MethodReasoningSummaryDelta, MethodReasoningTextDelta, MethodCommandOutputDelta:
		var p DeltaNotification
		if err = json.Unmarshal(m.Params, &p); err == nil {
			switch m.Method {
			case MethodAgentMessageDelta:
				ev = &AgentMessageDelta{p}
			case MethodCommandOutputDelta:
				ev = &CommandOutputDelta{p}
			default:
				ev = &ReasoningDelta{DeltaNotification: p, Raw: m.Method == MethodReasoningTextDelta}
			}
		}
	case MethodTokenUsageUpdated:
		var p TokenUsageNotification
		if err = json.Unmarshal(m.Params, &p); err == nil {
			ev = &TokenUsage{p}
		}
	case MethodError:
		var p ErrorNotification
		if err = json.Unmarshal(m.Params, &p); err == nil {
			ev = &Error{p}
		}
	case MethodServerRequestResolved:
		var p ServerRequestResolvedNotification
		if err = json.Unmarshal(m.Params, &p); err == nil {
			rid, _ := requestID(p.RequestID)
			c.mu.Lock()
			id, ok := c.approvals[rid]
			delete(c.approvals, rid)
			c.mu.Unlock()
			if !ok {
				return nil // a request that was no approval
			}
			ev = &RequestResolved{ThreadID: p.ThreadID, ApprovalID: id}
		}
	default:
		return &Notification{Method: m.Method, Params: m.Params}
	}
	if err != nil {
		c.log.Warn("undecodable codex notification", "method", m.Method, "err", err)
		return &Notification{Method: m.Method, Params: m.Params}
	}
	return ev
}

func (c *Client) enqueue(ev Event) {
	c.mu.Lock()
	c.queue = append(c.queue, ev)
	c.mu.Unlock()
	c.poke()
}

func (c *Client) poke() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// pump delivers queued events until *Exited was delivered or Close gave up.
func (c *Client) pump() {
	defer close(c.events)
	for {
		c.mu.Lock()
		batch := c.queue
		c.queue = nil
		done := c.readDone
		c.mu.Unlock()
		for _, ev := range batch {
			select {
			case c.events <- ev:
			case <-c.stop:
				return
			}
		}
		if done {
			c.mu.Lock()
			empty := len(c.queue) == 0
			c.mu.Unlock()
			if empty {
				return
			}
			continue
		}
		select {
		case <-c.wake:
		case <-c.stop:
			return
		}
	}
}

// readStderr logs the app-server's stderr and keeps its end for crash
// reports.
func (c *Client) readStderr(r io.Reader) {
	s := bufio.NewScanner(r)
	s.Buffer(make([]byte, 64<<10), 1<<20)
	for s.Scan() {
		line := s.Text()
		c.stderr.add(line)
		c.log.Debug("codex stderr", "line", line)
	}
	_, _ = io.Copy(io.Discard, r)
}

// tail keeps the last lines written to it, up to about 4 KiB.
type tail struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (t *tail) add(line string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf.WriteString(line)
	t.buf.WriteByte('\n')
	if t.buf.Len() > 8<<10 {
		b := t.buf.Bytes()[t.buf.Len()-4<<10:]
		t.buf = *bytes.NewBuffer(append([]byte(nil), b...))
	}
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(bytes.TrimSpace(t.buf.Bytes()))
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
