package codex

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/fakeopenai"
)

// turnTimeout bounds one turn against the fake API on a loaded machine.
const turnTimeout = 90 * time.Second

// harness is one real app-server against a fake Responses API, with a
// thread in a fresh workspace.
type harness struct {
	t      *testing.T
	api    *fakeopenai.Server
	cfg    Config
	c      *Client
	dir    string // the thread's workspace
	thread string
	tr     *Translator
}

type harnessOpts struct {
	responder func(*fakeopenai.Request) fakeopenai.Reply
	home      string // reuse a CODEX_HOME (resume tests)
	api       *fakeopenai.Server
	policy    string // default untrusted
	sandbox   string // default danger-full-access
}

func newHarness(t *testing.T, o harnessOpts) *harness {
	t.Helper()
	bin := requireCodex(t)
	api := o.api
	if api == nil {
		var err error
		api, err = fakeopenai.Start(fakeopenai.Config{Responder: o.responder})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = api.Close() })
	}
	home := o.home
	if home == "" {
		home = t.TempDir()
	}
	h := &harness{t: t, api: api, dir: t.TempDir()}
	h.cfg = Config{
		Binary:  bin,
		Home:    home,
		BaseURL: api.BaseURL(),
		APIKey:  "sk-fake-test",
		// Asks for every command and patch; no sandbox, so the tests also
		// pass where bubblewrap cannot create namespaces (containers).
		ApprovalPolicy: PolicyUntrusted,
		Sandbox:        SandboxFullAccess,
		ClientName:     "betcode-test",
		Logger:         slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
	if o.policy != "" {
		h.cfg.ApprovalPolicy = o.policy
	}
	if o.sandbox != "" {
		h.cfg.Sandbox = o.sandbox
	}
	h.start()
	return h
}

// start spawns the app-server (again).
func (h *harness) start() {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), turnTimeout)
	defer cancel()
	c, err := Start(ctx, h.cfg)
	if err != nil {
		h.t.Fatal(err)
	}
	h.c = c
	h.t.Cleanup(func() { closeClient(h.t, c) })
}

// close ends the current app-server.
func (h *harness) close() { closeClient(h.t, h.c) }

// closeClient closes c, which must end its process and goroutines in time.
func closeClient(t *testing.T, c *Client) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := c.Close(ctx); err != nil {
		t.Errorf("close: %v", err)
	}
	// Close waited for the client's goroutines; the stream is closed.
	for range c.Events() {
	}
}

func (h *harness) startThread() {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), turnTimeout)
	defer cancel()
	r, err := h.c.StartThread(ctx, ThreadStartParams{Cwd: h.dir})
	if err != nil {
		h.t.Fatal(err)
	}
	h.thread = r.Thread.ID
	h.tr = NewTranslator(r.Model, nil)
}

// turnResult is what one turn produced.
type turnResult struct {
	turn      Turn // from TurnEnded
	events    []Event
	pb        []*pb.AgentEvent
	approvals []*Approval
	exited    *Exited
}

// runTurn starts a turn and collects its events until it ends (or the
// process exits), answering approvals with answer and calling during for
// every event as it arrives.
func (h *harness) runTurn(prompt string, answer func(*Approval) Decision, during func(Event)) turnResult {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), turnTimeout)
	defer cancel()
	turn, err := h.c.StartTurn(ctx, h.thread, prompt)
	if err != nil {
		h.t.Fatal(err)
	}
	var res turnResult
	for {
		select {
		case ev, ok := <-h.c.Events():
			if !ok {
				return res
			}
			res.events = append(res.events, ev)
			res.pb = append(res.pb, h.tr.Translate(ev)...)
			if during != nil {
				during(ev)
			}
			switch e := ev.(type) {
			case *Approval:
				res.approvals = append(res.approvals, e)
				if answer == nil {
					h.t.Fatalf("unexpected approval request %+v", e)
				}
				if err := e.Reply(ctx, answer(e)); err != nil {
					h.t.Fatal(err)
				}
			case *TurnEnded:
				if e.Turn.ID == turn.ID {
					res.turn = e.Turn
					return res
				}
			case *Exited:
				res.exited = e
			}
		case <-ctx.Done():
			h.t.Fatalf("turn %q did not end: %v; events so far: %s", prompt, ctx.Err(), describe(res.events))
		}
	}
}

func always(d Decision) func(*Approval) Decision { return func(*Approval) Decision { return d } }

// describe lists events by type, for failure messages.
func describe(evs []Event) string {
	var b strings.Builder
	for _, ev := range evs {
		if n, ok := ev.(*Notification); ok {
			b.WriteString(n.Method + " ")
			continue
		}
		b.WriteString(strings.TrimPrefix(fmt.Sprintf("%T ", ev), "*codex."))
	}
	return b.String()
}

// agentText joins the streamed agent message deltas.
func (r turnResult) agentText() string {
	var b strings.Builder
	for _, ev := range r.events {
		if d, ok := ev.(*AgentMessageDelta); ok {
			b.WriteString(d.Delta)
		}
	}
	return b.String()
}

// pbText joins the TextDeltas of the mapped events.
func (r turnResult) pbText() string {
	var b strings.Builder
	for _, ev := range r.pb {
		if d := ev.GetTextDelta(); d != nil {
			b.WriteString(d.Text)
		}
	}
	return b.String()
}

// items returns the completed items of a type.
func (r turnResult) items(typ string) []Item {
	var out []Item
	for _, ev := range r.events {
		if c, ok := ev.(*ItemCompleted); ok && c.Item.Type == typ {
			out = append(out, c.Item)
		}
	}
	return out
}

// kinds lists the mapped events' kinds in order, e.g. "tool_call_start".
func (r turnResult) kinds() []string {
	var out []string
	for _, ev := range r.pb {
		out = append(out, pbKind(ev))
	}
	return out
}

func pbKind(ev *pb.AgentEvent) string {
	b, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(ev)
	if err != nil {
		return "?"
	}
	s := strings.TrimPrefix(string(b), "{")
	k, _, _ := strings.Cut(s, ":")
	return strings.Trim(strings.TrimSpace(k), `"`)
}

// last returns the last mapped event of a kind, or nil.
func (r turnResult) last(kind string) *pb.AgentEvent {
	for i := len(r.pb) - 1; i >= 0; i-- {
		if pbKind(r.pb[i]) == kind {
			return r.pb[i]
		}
	}
	return nil
}

// all returns the mapped events of a kind.
func (r turnResult) all(kind string) []*pb.AgentEvent {
	var out []*pb.AgentEvent
	for _, ev := range r.pb {
		if pbKind(ev) == kind {
			out = append(out, ev)
		}
	}
	return out
}
