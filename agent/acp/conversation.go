package acp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	acpsdk "github.com/coder/acp-go-sdk"

	"github.com/betcode-dev/betcode/agent/internal/procgroup"
	"github.com/betcode-dev/betcode/agent/provider"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// Timing of a conversation's end.
const (
	// drainWait is how long, after the agent exited, its output may take
	// to reach the end (a grandchild may hold its stdout open).
	drainWait = 2 * time.Second
	// stderrTail is how much of the agent's stderr is kept for Stderr.
	stderrTail = 16 << 10
)

// eofMethod is the extension notification the conversation appends to the
// agent's output at its end, with a nonce the agent cannot know: the SDK
// handles notifications in order, so seeing it means every update before
// it was handled.
const eofMethod = "_betcode/eof"

// conversation is one ACP agent process running one session.
type conversation struct {
	log    *slog.Logger
	dir    string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *os.File // the read end of the agent's stdout
	stderr *tailBuffer
	conn   *acpsdk.ClientSideConnection
	terms  *terminals
	q      *outQueue
	nonce  string
	askPfx string

	ctx    context.Context // ends when the conversation does
	cancel context.CancelFunc

	sessionID acpsdk.SessionId
	resumeID  string
	image     bool // the agent takes images in prompts

	mu        sync.Mutex
	tr        *translator
	loading   bool // session/load replays history: not output again
	turns     []provider.Turn
	pending   map[string]*openAsk
	nextAsk   int
	inTurn    bool // a session/prompt is under way: asks belong to it
	stopAsked bool // Stop or Kill was called

	turnSignal chan struct{}
	drained    chan struct{} // the eof marker was handled
	drainOnce  sync.Once
	exited     chan struct{} // the process was reaped
	done       chan struct{} // everything ended; Next is drained
	waitErr    error
	wg         sync.WaitGroup
}

// openAsk is a permission request waiting for its answer.
type openAsk struct {
	answer chan provider.Answer
}

var (
	_ provider.Stream = (*conversation)(nil)
	_ acpsdk.Client   = (*client)(nil)
)

// start spawns the agent, initializes it and opens (or loads) its session.
func start(ctx context.Context, ag Agent, opts provider.Options, log *slog.Logger) (*conversation, error) {
	cmd := exec.Command(ag.Command[0], ag.Command[1:]...)
	cmd.Dir = opts.Dir
	cmd.Env = append(os.Environ(), opts.Env...)
	cmd.SysProcAttr = procgroup.Attr()
	cmd.WaitDelay = drainWait
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("acp agent %s: %w", ag.Name, err)
	}
	// Our own pipe, not StdoutPipe: Wait must not close it before the
	// connection has read everything.
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("acp agent %s: %w", ag.Name, err)
	}
	stderr := &tailBuffer{limit: stderrTail}
	cmd.Stdout, cmd.Stderr = pw, stderr
	if err := cmd.Start(); err != nil {
		_ = pr.Close()
		_ = pw.Close()
		return nil, fmt.Errorf("start acp agent %s (%s): %w", ag.Name, ag.Command[0], err)
	}
	_ = pw.Close()
	cctx, cancel := context.WithCancel(context.Background())
	c := &conversation{
		log: log.With("acp_agent", ag.Name, "pid", cmd.Process.Pid), dir: opts.Dir, cmd: cmd,
		stdin: stdin, stdout: pr, stderr: stderr, terms: newTerminals(opts.Dir, cmd.Env),
		q: newOutQueue(), nonce: randomHex(16), askPfx: "acp-" + randomHex(4) + "-",
		ctx: cctx, cancel: cancel, tr: newTranslator(opts.Dir, time.Now),
		pending: map[string]*openAsk{}, turnSignal: make(chan struct{}, 1),
		drained: make(chan struct{}), exited: make(chan struct{}), done: make(chan struct{}),
	}
	// The SDK reads its logger unsynchronized from the goroutine reading
	// the agent: that goroutine reads nothing until the logger is set.
	ready := make(chan struct{})
	c.conn = acpsdk.NewClientSideConnection(&client{c: c}, stdin, &eofMarker{r: pr, line: c.eofLine(), ready: ready})
	c.conn.SetLogger(c.log)
	close(ready)
	// The prompt loop's count is taken before supervise can Wait.
	c.wg.Add(1)
	go c.supervise()

	if err := c.open(ctx, ag, opts); err != nil {
		c.wg.Done()
		_ = c.Kill()
		<-c.done
		if tail := strings.TrimSpace(c.Stderr()); tail != "" {
			err = fmt.Errorf("%w (stderr: %s)", err, lastLine(tail))
		}
		return nil, err
	}
	go func() {
		defer c.wg.Done()
		c.promptLoop()
	}()
	return c, nil
}

// open initializes the agent and creates or loads the session.
func (c *conversation) open(ctx context.Context, ag Agent, opts provider.Options) error {
	init, err := c.conn.Initialize(ctx, acpsdk.InitializeRequest{
		ProtocolVersion: acpsdk.ProtocolVersionNumber,
		ClientCapabilities: acpsdk.ClientCapabilities{
			Fs:       acpsdk.FileSystemCapabilities{ReadTextFile: true, WriteTextFile: true},
			Terminal: true,
		},
		ClientInfo: &acpsdk.Implementation{Name: "betcode", Version: "1"},
	})
	if err != nil {
		return fmt.Errorf("acp agent %s: initialize: %w", ag.Name, c.connErr(ctx, err))
	}
	c.image = init.AgentCapabilities.PromptCapabilities.Image
	canLoad := init.AgentCapabilities.LoadSession
	var modes *acpsdk.SessionModeState
	var models *acpsdk.SessionModelState
	loaded := false
	if opts.ResumeID != "" && canLoad {
		c.mu.Lock()
		c.loading = true
		c.sessionID = acpsdk.SessionId(opts.ResumeID)
		c.mu.Unlock()
		resp, err := c.conn.LoadSession(ctx, acpsdk.LoadSessionRequest{
			SessionId: acpsdk.SessionId(opts.ResumeID), Cwd: opts.Dir, McpServers: []acpsdk.McpServer{},
		})
		c.mu.Lock()
		c.loading = false
		c.mu.Unlock()
		switch {
		case err == nil:
			loaded, modes, models = true, resp.Modes, resp.Models
		case c.isDone():
			return fmt.Errorf("acp agent %s: session/load: %w", ag.Name, c.connErr(ctx, err))
		default:
			c.log.Warn("acp: session/load failed; starting a new conversation", "resume_id", opts.ResumeID, "err", err)
			c.q.push(provider.Output{Events: []*pb.AgentEvent{provider.ErrorEvent(CodeAgentError,
				fmt.Sprintf("the agent could not resume its conversation (%v); this is a new one", err), false)}})
		}
	} else if opts.ResumeID != "" {
		c.log.Warn("acp: the agent cannot load sessions; starting a new conversation", "resume_id", opts.ResumeID)
	}
	if !loaded {
		resp, err := c.conn.NewSession(ctx, acpsdk.NewSessionRequest{Cwd: opts.Dir, McpServers: []acpsdk.McpServer{}})
		if err != nil {
			return fmt.Errorf("acp agent %s: session/new: %w", ag.Name, c.connErr(ctx, err))
		}
		c.mu.Lock()
		c.sessionID = resp.SessionId
		c.mu.Unlock()
		modes, models = resp.Modes, resp.Models
	}
	if canLoad {
		c.resumeID = string(c.sid())
	}
	// Without a mode of its own the session asks for the agent's
	// "default" mode, when it has one: the mode that asks before acting,
	// so that tool calls come to BetCode's rules (claude-agent-acp starts
	// in "auto", which lets a model decide instead).
	m := opts.PermissionMode
	if m == "" {
		m = "default"
	}
	if modes != nil && modes.CurrentModeId != acpsdk.SessionModeId(m) {
		for _, am := range modes.AvailableModes {
			if am.Id == acpsdk.SessionModeId(m) {
				if _, err := c.conn.SetSessionMode(ctx, acpsdk.SetSessionModeRequest{SessionId: c.sid(), ModeId: am.Id}); err != nil {
					c.log.Warn("acp: session/set_mode failed", "mode", m, "err", err)
				}
			}
		}
	}
	if m := opts.Model; m != "" && models != nil && models.CurrentModelId != acpsdk.ModelId(m) {
		if _, err := c.conn.UnstableSetSessionModel(ctx, acpsdk.UnstableSetSessionModelRequest{SessionId: c.sid(), ModelId: acpsdk.UnstableModelId(m)}); err != nil {
			c.log.Warn("acp: session/set_model failed", "model", m, "err", err)
		}
	}
	return nil
}

// sid is the ACP session id (set while opening).
func (c *conversation) sid() acpsdk.SessionId {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sessionID
}

// connErr prefers saying that the agent exited, or did not answer in
// time, to the SDK's "peer disconnected" and "internal error".
func (c *conversation) connErr(ctx context.Context, err error) error {
	if ctx.Err() != nil && !c.isDone() {
		return fmt.Errorf("no answer: %w", ctx.Err())
	}
	if c.isDone() {
		select {
		case <-c.exited:
			if c.waitErr != nil {
				return fmt.Errorf("the agent exited (%w)", c.waitErr)
			}
			return errors.New("the agent exited")
		case <-time.After(drainWait):
		}
	}
	return err
}

func (c *conversation) isDone() bool {
	select {
	case <-c.conn.Done():
		return true
	default:
		return false
	}
}

// supervise reaps the process and ends the conversation: once the agent
// exited (or its connection broke, which kills it), it waits for its
// output to be handled, kills the terminals, ends the prompt loop and
// closes the output.
func (c *conversation) supervise() {
	exitCh := make(chan error, 1)
	go func() { exitCh <- c.cmd.Wait() }()
	var err error
	select {
	case err = <-exitCh:
	case <-c.conn.Done():
		// The output ended: the agent is exiting, or the connection broke
		// (an overlong line, an overflow) and the agent cannot be talked
		// to any more.
		select {
		case err = <-exitCh:
		case <-time.After(drainWait):
			c.killGroup()
			err = <-exitCh
			err = fmt.Errorf("acp connection lost (agent killed: %v)", err)
		}
	}
	if c.stopping() {
		err = nil // asked to stop: how it exited is no failure
	}
	c.waitErr = err
	close(c.exited)
	select {
	case <-c.drained:
	case <-time.After(drainWait):
	}
	_ = c.stdout.Close() // ends the connection if something holds stdout open
	<-c.conn.Done()
	c.cancel()
	c.wg.Wait()
	c.terms.closeAll()
	c.withdrawAll()
	c.q.close()
	close(c.done)
}

// stopping reports whether Stop or Kill was called.
func (c *conversation) stopping() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stopAsked
}

func (c *conversation) eofLine() []byte {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": eofMethod, "params": map[string]string{"nonce": c.nonce}})
	return append(append([]byte("\n"), b...), '\n')
}

// SendTurn queues a user message; turns run one at a time.
func (c *conversation) SendTurn(t provider.Turn) error {
	select {
	case <-c.ctx.Done():
		return errors.New("acp: the conversation has ended")
	default:
	}
	c.mu.Lock()
	c.turns = append(c.turns, t)
	c.mu.Unlock()
	select {
	case c.turnSignal <- struct{}{}:
	default:
	}
	return nil
}

// promptLoop sends the queued turns, one session/prompt at a time.
func (c *conversation) promptLoop() {
	for {
		c.mu.Lock()
		var t provider.Turn
		ok := len(c.turns) > 0
		if ok {
			t = c.turns[0]
			c.turns = c.turns[1:]
		}
		c.mu.Unlock()
		if !ok {
			select {
			case <-c.turnSignal:
				continue
			case <-c.ctx.Done():
				return
			}
		}
		if !c.prompt(t) {
			return
		}
	}
}

// prompt runs one turn; false when the connection is gone.
func (c *conversation) prompt(t provider.Turn) bool {
	c.mu.Lock()
	evs := c.tr.setStatus(nil, pb.AgentStatus_THINKING, "")
	c.q.push(provider.Output{Events: evs})
	c.inTurn = true
	c.mu.Unlock()
	resp, err := c.conn.Prompt(c.ctx, acpsdk.PromptRequest{SessionId: c.sid(), Prompt: c.blocks(t)})
	if err != nil && (c.isDone() || c.ctx.Err() != nil) {
		return false // the process ended: the session settles the turn
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.inTurn = false
	c.withdrawAllLocked()
	if err != nil {
		c.log.Warn("acp: session/prompt failed", "err", err)
		c.q.push(provider.Output{Events: c.tr.turnFailed(err), TurnEnded: true})
		return true
	}
	stop := string(resp.StopReason)
	if stop == "" {
		stop = string(acpsdk.StopReasonEndTurn)
	}
	c.q.push(provider.Output{Events: c.tr.turnEnded(stop, resp.Usage), TurnEnded: true})
	return true
}

// blocks converts a turn to ACP content: text, and base64 images when the
// agent takes them.
func (c *conversation) blocks(t provider.Turn) []acpsdk.ContentBlock {
	if len(t.Blocks) == 0 {
		return []acpsdk.ContentBlock{acpsdk.TextBlock(t.Text)}
	}
	var out []acpsdk.ContentBlock
	for _, b := range t.Blocks {
		switch b["type"] {
		case "text":
			if s, ok := b["text"].(string); ok {
				out = append(out, acpsdk.TextBlock(s))
			}
		case "image":
			src, _ := b["source"].(map[string]any)
			data, _ := src["data"].(string)
			mt, _ := src["media_type"].(string)
			if c.image && src["type"] == "base64" && data != "" {
				out = append(out, acpsdk.ImageBlock(data, mt))
			}
		}
	}
	if len(out) == 0 {
		out = append(out, acpsdk.TextBlock(t.Text))
	}
	return out
}

// InterruptTurn sends session/cancel and answers the open permission
// requests "cancelled", as ACP asks of clients.
func (c *conversation) InterruptTurn() error {
	c.withdrawAll()
	if err := c.conn.Cancel(c.ctx, acpsdk.CancelNotification{SessionId: c.sid()}); err != nil {
		return fmt.Errorf("acp session/cancel: %w", err)
	}
	return nil
}

// ForceInterrupt kills the agent: ACP has no stronger interrupt than
// session/cancel. The session then ends the turn as cancelled.
func (c *conversation) ForceInterrupt() error { return c.Kill() }

// Answer answers the permission request requestID.
func (c *conversation) Answer(requestID string, a provider.Answer) error {
	c.mu.Lock()
	ask := c.pending[requestID]
	delete(c.pending, requestID)
	c.mu.Unlock()
	if ask == nil {
		return fmt.Errorf("acp: no open request %q", requestID)
	}
	ask.answer <- a
	return nil
}

// withdrawAll answers every open request "cancelled" and reports each
// withdrawn.
func (c *conversation) withdrawAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.withdrawAllLocked()
}

func (c *conversation) withdrawAllLocked() {
	for id, ask := range c.pending {
		delete(c.pending, id)
		ask.answer <- provider.Answer{Decision: provider.Cancel}
		c.q.push(provider.Output{Withdrawn: id})
	}
}

// Stop closes the agent's stdin (ACP agents exit then), then sends
// SIGTERM and SIGKILL to its process group, grace apart.
func (c *conversation) Stop(grace time.Duration) {
	c.markStopping()
	_ = c.stdin.Close()
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		t := time.NewTimer(grace)
		select {
		case <-c.exited:
			t.Stop()
			<-c.done
			return
		case <-t.C:
		}
		_ = procgroup.Signal(c.cmd.Process, sig)
	}
	<-c.done
}

func (c *conversation) markStopping() {
	c.mu.Lock()
	c.stopAsked = true
	c.mu.Unlock()
}

// Kill kills the agent's process group.
func (c *conversation) Kill() error {
	c.markStopping()
	c.killGroup()
	return nil
}

func (c *conversation) killGroup() {
	select {
	case <-c.exited:
		return
	default:
	}
	_ = procgroup.Signal(c.cmd.Process, syscall.SIGKILL)
}

// Wait waits for the conversation to end and returns the agent's exit
// error (nil after Stop or Kill).
func (c *conversation) Wait() error {
	<-c.done
	return c.waitErr
}

// Done is closed once the conversation has ended.
func (c *conversation) Done() <-chan struct{} { return c.done }

// Pid is the agent's process id.
func (c *conversation) Pid() int { return c.cmd.Process.Pid }

// Stderr is the tail of the agent's stderr.
func (c *conversation) Stderr() string {
	s, _ := c.stderr.String()
	return s
}

// Next returns the next output; false once the conversation has ended.
func (c *conversation) Next() (provider.Output, bool) { return c.q.next() }

// ResumeID is the ACP session id when the agent can load sessions.
func (c *conversation) ResumeID() string { return c.resumeID }

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// eofMarker reads r, once ready is closed, then line: the marker of the
// output's end.
type eofMarker struct {
	r     io.Reader
	line  []byte
	eof   bool
	ready <-chan struct{}
}

func (e *eofMarker) Read(p []byte) (int, error) {
	if e.ready != nil {
		<-e.ready
		e.ready = nil
	}
	if !e.eof {
		n, err := e.r.Read(p)
		if err == nil {
			return n, nil
		}
		e.eof = true
		if n > 0 {
			return n, nil
		}
	}
	if len(e.line) == 0 {
		return 0, io.EOF
	}
	n := copy(p, e.line)
	e.line = e.line[n:]
	return n, nil
}
