package session

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/betcode-dev/betcode/agent/permission"
	"github.com/betcode-dev/betcode/agent/provider"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// scriptProvider is a provider.Provider whose conversations are
// scriptStreams the test drives: it stands for any provider that maps its
// own output to AgentEvents (ACP, the OpenAI API), whose real
// implementations are tested in their packages.
type scriptProvider struct {
	mu      sync.Mutex
	started []provider.Options
	convs   chan *scriptStream
}

func (p *scriptProvider) Kind() pb.SessionProvider {
	return pb.SessionProvider_SESSION_PROVIDER_OPENAI_API
}
func (p *scriptProvider) Check(context.Context) error { return nil }
func (p *scriptProvider) Start(_ context.Context, opts provider.Options) (provider.Conversation, error) {
	p.mu.Lock()
	p.started = append(p.started, opts)
	p.mu.Unlock()
	c := &scriptStream{out: make(chan provider.Output, 16), turns: make(chan provider.Turn, 4),
		answers: make(chan answered, 4), done: make(chan struct{}), resume: "conv-1"}
	p.convs <- c
	return c, nil
}

type answered struct {
	id string
	a  provider.Answer
}

// scriptStream is one conversation: the test writes its output and reads
// what the session sent it.
type scriptStream struct {
	out      chan provider.Output
	turns    chan provider.Turn
	answers  chan answered
	done     chan struct{}
	stopOnce sync.Once
	exitErr  error
	resume   string
}

func (c *scriptStream) Next() (provider.Output, bool) {
	select {
	case o, ok := <-c.out:
		return o, ok
	case <-c.done:
		return provider.Output{}, false
	}
}
func (c *scriptStream) ResumeID() string               { return c.resume }
func (c *scriptStream) SendTurn(t provider.Turn) error { c.turns <- t; return nil }
func (c *scriptStream) InterruptTurn() error           { return nil }
func (c *scriptStream) ForceInterrupt() error          { return c.Kill() }
func (c *scriptStream) Answer(id string, a provider.Answer) error {
	c.answers <- answered{id, a}
	return nil
}
func (c *scriptStream) exit(err error) {
	c.stopOnce.Do(func() { c.exitErr = err; close(c.done) })
}
func (c *scriptStream) Stop(time.Duration)    { c.exit(nil) }
func (c *scriptStream) Kill() error           { c.exit(errors.New("killed")); return nil }
func (c *scriptStream) Wait() error           { <-c.done; return c.exitErr }
func (c *scriptStream) Done() <-chan struct{} { return c.done }
func (c *scriptStream) Pid() int              { return 0 }
func (c *scriptStream) Stderr() string        { return "" }

// ask is the output of a provider asking to run tool with input.
func ask(id, tool string, input map[string]any, readOnly bool) provider.Output {
	raw, _ := json.Marshal(input)
	st, _ := structpb.NewStruct(input)
	return provider.Output{
		Events: []*pb.AgentEvent{
			{Event: &pb.AgentEvent_PermissionRequest{PermissionRequest: &pb.PermissionRequest{RequestId: id, ToolName: tool, Input: st, ToolUseId: "t-" + id}}},
			provider.StatusEvent(pb.AgentStatus_WAITING_FOR_USER, ""),
		},
		Permission: &provider.PermissionAsk{ID: id, Tool: tool, ToolUseID: "t-" + id, Input: raw, ReadOnly: readOnly},
	}
}

func endTurn() provider.Output {
	return provider.Output{TurnEnded: true, Events: []*pb.AgentEvent{
		{Event: &pb.AgentEvent_Usage{Usage: &pb.UsageReport{InputTokens: 10, OutputTokens: 5, Model: "m-1"}}},
		provider.TurnCompleteEvent("end_turn"),
		provider.StatusEvent(pb.AgentStatus_IDLE, ""),
	}}
}

// A provider.Stream's session goes through the one pipeline: its events
// are sequenced and replayable, a rule answers a request with nobody asked
// (and nothing shown), a read that no rule matches runs without asking,
// other requests wait for a client, usage is counted, and a restarted
// provider is given its conversation's resume id.
func TestStreamProviderSession(t *testing.T) {
	prov := &scriptProvider{convs: make(chan *scriptStream, 2)}
	rules, err := permission.Settings{Deny: []string{"Bash(rm *)"}}.Rules()
	if err != nil {
		t.Fatal(err)
	}
	eng, err := permission.New(rules, permission.Options{})
	if err != nil {
		t.Fatal(err)
	}
	m := newManager(t, Config{DefaultDir: t.TempDir(), Permissions: eng,
		Providers: provider.NewRegistry(prov)})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := m.Create(ctx, CreateRequest{Provider: pb.SessionProvider_SESSION_PROVIDER_OPENAI_API})
	if err != nil {
		t.Fatal(err)
	}
	live := make(chan *pb.AgentEvent, 64)
	go func() {
		_ = s.Stream(ctx, StreamOptions{}, func(ev *pb.AgentEvent) error {
			live <- proto.CloneOf(ev)
			return nil
		})
	}()
	next := func(want func(*pb.AgentEvent) bool, what string) *pb.AgentEvent {
		t.Helper()
		for {
			select {
			case ev := <-live:
				if want(ev) {
					return ev
				}
			case <-ctx.Done():
				t.Fatalf("no %s", what)
			}
		}
	}
	if err := s.SendUser(ctx, "hello", nil); err != nil {
		t.Fatal(err)
	}
	c := <-prov.convs
	if turn := <-c.turns; turn.Text != "hello" {
		t.Fatalf("provider got turn %q", turn.Text)
	}
	c.out <- provider.Output{Events: []*pb.AgentEvent{provider.StatusEvent(pb.AgentStatus_THINKING, ""), provider.TextEvent("Hi", false)}}
	next(func(ev *pb.AgentEvent) bool { return ev.GetTextDelta().GetText() == "Hi" }, "text")

	// Denied by the rule: answered at once, no request shown.
	c.out <- ask("r1", "Bash", map[string]any{"command": "rm -rf x"}, false)
	if a := <-c.answers; a.id != "r1" || a.a.Decision != provider.Deny {
		t.Fatalf("rule answer %+v, want deny of r1", a)
	}
	// A read: allowed without asking.
	c.out <- ask("r2", "Read", map[string]any{"file_path": "go.mod"}, true)
	if a := <-c.answers; a.id != "r2" || a.a.Decision != provider.Allow {
		t.Fatalf("read answer %+v, want allow of r2", a)
	}
	// Anything else waits for a client.
	c.out <- ask("r3", "Bash", map[string]any{"command": "make"}, false)
	req := next(func(ev *pb.AgentEvent) bool { return ev.GetPermissionRequest() != nil }, "permission request")
	if id := req.GetPermissionRequest().RequestId; id != "r3" {
		t.Fatalf("client was asked %q, want only r3", id)
	}
	if err := s.AnswerPermission(ctx, "r3", pb.PermissionDecision_ALLOW_SESSION, ""); err != nil {
		t.Fatal(err)
	}
	if a := <-c.answers; a.id != "r3" || a.a.Decision != provider.AllowForSession {
		t.Fatalf("client answer %+v, want allow for session of r3", a)
	}
	c.out <- endTurn()
	next(func(ev *pb.AgentEvent) bool { return ev.GetTurnComplete() != nil }, "turn end")

	log, err := s.PermissionLog(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	sources := map[string]string{}
	for _, e := range log {
		sources[e.RequestId] = e.Decision + "/" + e.Source
	}
	for id, want := range map[string]string{"r1": "deny/rule", "r2": "allow/mode", "r3": "allow/user"} {
		if sources[id] != want {
			t.Errorf("decision log %s = %q, want %q (all: %v)", id, sources[id], want, sources)
		}
	}
	if sum := s.Summary(); sum.Provider != pb.SessionProvider_SESSION_PROVIDER_OPENAI_API {
		t.Errorf("summary provider %v", sum.Provider)
	}

	// Replay: contiguous sequences, the rule-decided requests absent.
	var replay []*pb.AgentEvent
	if err := s.Stream(ctx, StreamOptions{UntilIdle: true}, func(ev *pb.AgentEvent) error {
		replay = append(replay, proto.CloneOf(ev))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	asked := 0
	for i, ev := range replay {
		if ev.Sequence != uint64(i+1) {
			t.Fatalf("replayed event %d has sequence %d", i, ev.Sequence)
		}
		if ev.GetPermissionRequest() != nil {
			asked++
		}
	}
	if asked != 1 {
		t.Fatalf("replay shows %d permission requests, want 1", asked)
	}

	// The provider dies mid-turn: the turn ends as crashed, and the next
	// message starts it again with the conversation's resume id.
	if err := s.SendUser(ctx, "again", nil); err != nil {
		t.Fatal(err)
	}
	if turn := <-c.turns; turn.Text != "again" {
		t.Fatalf("provider got %q", turn.Text)
	}
	c.exit(errors.New("exit status 2"))
	crash := next(func(ev *pb.AgentEvent) bool { return ev.GetError() != nil }, "crash report")
	if crash.GetError().Code != CodeSubprocessCrashed {
		t.Fatalf("crash reported as %v", crash.GetError())
	}
	if tc := next(func(ev *pb.AgentEvent) bool { return ev.GetTurnComplete() != nil }, "crashed turn end"); tc.GetTurnComplete().StopReason != "crashed" {
		t.Fatalf("crashed turn ended %q", tc.GetTurnComplete().StopReason)
	}
	if err := s.SendUser(ctx, "third", nil); err != nil {
		t.Fatal(err)
	}
	c2 := <-prov.convs
	if turn := <-c2.turns; turn.Text != "third" {
		t.Fatalf("restarted provider got %q", turn.Text)
	}
	prov.mu.Lock()
	resume := prov.started[len(prov.started)-1].ResumeID
	prov.mu.Unlock()
	if resume != "conv-1" {
		t.Fatalf("restarted with ResumeID %q, want conv-1", resume)
	}
	c2.out <- endTurn()
	next(func(ev *pb.AgentEvent) bool { return ev.GetTurnComplete() != nil }, "third turn end")
}
