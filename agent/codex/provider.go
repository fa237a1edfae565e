package codex

import (
	"context"
	"fmt"
	"log/slog"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/betcode-dev/betcode/shared/pinned"

	"github.com/betcode-dev/betcode/agent/provider"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// callTimeout bounds one request to the app-server made for the session
// manager (turn/start, turn/interrupt, an approval's reply).
const callTimeout = 30 * time.Second

// Provider is Codex as a provider.Provider: every conversation is one
// app-server child with one thread, in a CODEX_HOME of its own under Home.
type Provider struct {
	// Binary is the codex executable; "" finds the pinned one (FindBinary).
	Binary string
	// Home is the directory holding the conversations' CODEX_HOMEs
	// (<Home>/<session id>).
	Home string
	// BaseURL is the OpenAI Responses API base; "" leaves Codex
	// unconfigured.
	BaseURL string
	// APIKey is sent to BaseURL; "" sends none.
	APIKey string
	// Model is the default model; "" is DefaultModel.
	Model string
	// ApprovalPolicy and Sandbox are the defaults of every thread (see
	// Config); sessions can override them with the provider_config keys
	// approval_policy and sandbox.
	ApprovalPolicy, Sandbox string
}

var _ provider.Provider = (*Provider)(nil)

// Kind is SESSION_PROVIDER_CODEX.
func (p *Provider) Kind() pb.SessionProvider { return pb.SessionProvider_SESSION_PROVIDER_CODEX }

// InstallHint says how to install the pinned Codex.
var InstallHint = fmt.Sprintf("run make codex (scripts/install-codex.sh) or npm i -g @openai/codex@%s, or point --codex-bin (BETCODE_CODEX_BIN) at a codex %s binary", PinnedVersion, PinnedVersion)

// binary resolves the executable.
func (p *Provider) binary() (string, error) {
	if p.Binary == "" {
		return FindBinary()
	}
	if strings.ContainsRune(p.Binary, filepath.Separator) {
		if err := pinned.Executable(p.Binary); err != nil {
			return "", err
		}
		return p.Binary, nil
	}
	path, err := exec.LookPath(p.Binary)
	if err != nil {
		return "", fmt.Errorf("find codex binary %q: %w", p.Binary, err)
	}
	return path, nil
}

// Check reports a missing binary as a *provider.NotInstalledError and a
// missing model endpoint as a *provider.NotConfiguredError.
func (p *Provider) Check(context.Context) error {
	if _, err := p.binary(); err != nil {
		return &provider.NotInstalledError{Kind: p.Kind(), Err: err, Install: InstallHint}
	}
	if p.BaseURL == "" {
		return &provider.NotConfiguredError{Kind: p.Kind(), Configure: "set --codex-base-url (BETCODE_CODEX_BASE_URL) to an OpenAI Responses API base such as https://api.openai.com/v1, and OPENAI_API_KEY"}
	}
	if p.Home == "" {
		return &provider.NotConfiguredError{Kind: p.Kind(), Configure: "the agent has no directory for CODEX_HOME"}
	}
	return nil
}

// Start spawns an app-server for the conversation and starts its thread,
// or resumes the thread Options.ResumeID. Options.Config accepts
// approval_policy and sandbox.
func (p *Provider) Start(ctx context.Context, o provider.Options) (provider.Conversation, error) {
	if err := p.Check(ctx); err != nil {
		return nil, err
	}
	bin, _ := p.binary()
	cfg := Config{
		Binary: bin, Home: filepath.Join(p.Home, o.SessionID), BaseURL: p.BaseURL, APIKey: p.APIKey,
		Model: p.Model, ApprovalPolicy: p.ApprovalPolicy, Sandbox: p.Sandbox, Env: o.Env, Logger: o.Logger,
		RequestMaxRetries: DefaultRequestMaxRetries, StreamMaxRetries: DefaultStreamMaxRetries,
	}
	if o.Model != "" {
		cfg.Model = o.Model
	}
	for k, v := range o.Config {
		switch k {
		case "approval_policy":
			cfg.ApprovalPolicy = v
		case "sandbox":
			cfg.Sandbox = v
		default:
			return nil, fmt.Errorf("codex: unknown provider_config key %q (one of approval_policy, sandbox)", k)
		}
	}
	c, err := Start(ctx, cfg)
	if err != nil {
		return nil, err
	}
	var r ThreadResponse
	if o.ResumeID != "" {
		r, err = c.ResumeThread(ctx, ThreadResumeParams{ThreadID: o.ResumeID, Cwd: o.Dir})
	} else {
		r, err = c.StartThread(ctx, ThreadStartParams{Cwd: o.Dir})
	}
	if err != nil {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = c.Close(cctx)
		return nil, err
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Conversation{c: c, thread: r.Thread.ID, model: r.Model, log: log, approvals: map[string]*Approval{}}, nil
}

// Conversation is one thread on its own app-server, as a
// provider.Conversation. Its output is read with Next.
//
// A thread runs one turn at a time: a message sent while a turn runs is
// queued and started as the next turn when the running one ends, so every
// message gets its own TurnEnded, in order (queue.go).
type Conversation struct {
	c      *Client
	thread string
	model  string
	log    *slog.Logger

	mu        sync.Mutex
	turn      string               // the running turn's id, once known
	lastEnded string               // the id of the last turn that ended
	running   bool                 // a turn was started and has not ended
	queue     []queuedTurn         // messages waiting for the running turn
	cancels   int                  // InterruptTurn calls, to catch one racing a queued start
	made      []Event              // events made here (queued turns that never ran), before the stream's
	approvals map[string]*Approval // open approvals by ID
}

var _ provider.Conversation = (*Conversation)(nil)

// ThreadID is the thread's id, which resumes it (Options.ResumeID).
func (cv *Conversation) ThreadID() string { return cv.thread }

// Model is the thread's model.
func (cv *Conversation) Model() string { return cv.model }

// Next returns the next event; ok is false once the stream ended (after
// *Exited, or after Stop). Only one goroutine may call it. When a turn
// ends, Next starts the next queued message before returning its
// TurnEnded.
func (cv *Conversation) Next() (ev Event, ok bool) {
	if ev, ok := cv.popMade(); ok {
		return ev, true
	}
	ev, ok = <-cv.c.Events()
	if !ok {
		return nil, false
	}
	cv.mu.Lock()
	ended := false
	switch e := ev.(type) {
	case *Approval:
		cv.approvals[e.ID()] = e
	case *RequestResolved:
		delete(cv.approvals, e.ApprovalID)
	case *TurnStarted:
		if e.Turn.ID != cv.lastEnded {
			cv.turn = e.Turn.ID
		}
	case *TurnEnded:
		if cv.turn == e.Turn.ID {
			cv.turn = ""
		}
		cv.lastEnded = e.Turn.ID
		clear(cv.approvals)
		ended = true
	}
	cv.mu.Unlock()
	if ended {
		cv.startQueued()
	}
	return ev, true
}

// SendTurn starts a turn with the message (its text and images, see
// TurnInput), or queues it while a turn runs.
func (cv *Conversation) SendTurn(t provider.Turn) error {
	in := TurnInput(t)
	cv.mu.Lock()
	if cv.running {
		cv.queue = append(cv.queue, queuedTurn{id: t.ID, input: in})
		cv.mu.Unlock()
		return nil
	}
	cv.running = true
	cv.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	turn, err := cv.c.StartTurnInput(ctx, cv.thread, in)
	if err != nil {
		cv.mu.Lock()
		queued := len(cv.queue) > 0
		cv.running = queued
		cv.mu.Unlock()
		if queued {
			// Messages queued behind this one while turn/start failed
			// (callers that do not serialise SendTurn): no TurnEnded will
			// start them.
			cv.startQueued()
		}
		return err
	}
	cv.noteStarted(turn.ID)
	return nil
}

// InterruptTurn interrupts the running turn, which ends with TurnEnded
// interrupted, and cancels the queued messages: each ends with a TurnEnded
// interrupted of its own, without reaching Codex.
func (cv *Conversation) InterruptTurn() error {
	cv.mu.Lock()
	turn := cv.turn
	cv.cancels++
	for i := range cv.queue {
		cv.queue[i].cancelled = true
	}
	cv.mu.Unlock()
	if turn == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	return cv.c.Interrupt(ctx, cv.thread, turn)
}

// ForceInterrupt kills the app-server (and the commands it runs).
func (cv *Conversation) ForceInterrupt() error { return cv.Kill() }

// Answer replies to the open approval requestID: Allow accepts,
// AllowForSession accepts for the session, Deny declines, Cancel cancels
// (and ends the turn). Codex takes no edited input nor message.
func (cv *Conversation) Answer(requestID string, a provider.Answer) error {
	cv.mu.Lock()
	ap := cv.approvals[requestID]
	delete(cv.approvals, requestID)
	cv.mu.Unlock()
	if ap == nil {
		return fmt.Errorf("codex: no open approval %s", requestID)
	}
	var d Decision
	switch a.Decision {
	case provider.Allow:
		d = Accept
	case provider.AllowForSession:
		d = AcceptForSession
	case provider.Deny:
		d = Decline
	case provider.Cancel:
		d = Cancel
	default:
		return fmt.Errorf("codex: unknown decision %d", a.Decision)
	}
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	return ap.Reply(ctx, d)
}

// Stop closes the app-server's stdin, which ends it (a running turn is
// stored as interrupted), and kills it after grace.
func (cv *Conversation) Stop(grace time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if err := cv.c.Close(ctx); err != nil {
		cv.log.Warn("codex: stop app-server", "err", err)
	}
}

// Kill ends the app-server's process group at once.
func (cv *Conversation) Kill() error {
	cv.c.kill()
	return nil
}

// Wait waits for the app-server to exit, releases the client and returns
// why it exited (nil after Stop).
func (cv *Conversation) Wait() error {
	<-cv.c.Done()
	err := cv.c.Err()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = cv.c.Close(ctx)
	return err
}

// Done is closed when the app-server has exited.
func (cv *Conversation) Done() <-chan struct{} { return cv.c.Done() }

// Pid is the app-server's process id.
func (cv *Conversation) Pid() int {
	if cv.c.cmd.Process == nil {
		return 0
	}
	return cv.c.cmd.Process.Pid
}

// Stderr is the end of the app-server's stderr.
func (cv *Conversation) Stderr() string { return cv.c.stderr.String() }
