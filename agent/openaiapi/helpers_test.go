package openaiapi

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/betcode-dev/betcode/agent/provider"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/fakeopenai"
)

// testTimeout bounds every wait of a test (a -race run on a loaded machine
// is slow; a hang still fails).
const testTimeout = 30 * time.Second

// startFake runs the fake Responses API; responder nil is KeywordReply.
func startFake(t *testing.T, responder func(*fakeopenai.Request) fakeopenai.Reply) *fakeopenai.Server {
	t.Helper()
	srv, err := fakeopenai.Start(fakeopenai.Config{Responder: responder})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	return srv
}

// driver plays the session: it reads a conversation's output on its own
// goroutine and hands it to the test.
type driver struct {
	t    *testing.T
	c    *conversation
	outs chan provider.Output
}

// start starts a conversation of p in dir (a new temp dir when "").
func start(t *testing.T, p *Provider, dir, resume string) *driver {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	conv, err := p.Start(context.Background(), provider.Options{
		SessionID: "s1", ResumeID: resume, Dir: dir,
		Logger: slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	if err != nil {
		t.Fatal(err)
	}
	c := conv.(*conversation)
	d := &driver{t: t, c: c, outs: make(chan provider.Output, 1024)}
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		defer close(d.outs)
		for {
			o, ok := c.Next()
			if !ok {
				return
			}
			d.outs <- o
		}
	}()
	t.Cleanup(func() {
		stopped := make(chan struct{})
		go func() { c.Stop(time.Second); close(stopped) }()
		select {
		case <-stopped:
		case <-time.After(testTimeout):
			t.Error("Stop did not return")
		}
		for range d.outs { // drain what is left
		}
		<-readerDone
	})
	return d
}

// testWriter sends logs to t.Log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// next returns the next output or fails the test after testTimeout.
func (d *driver) next() provider.Output {
	d.t.Helper()
	select {
	case o, ok := <-d.outs:
		if !ok {
			d.t.Fatal("the conversation ended")
		}
		return o
	case <-time.After(testTimeout):
		d.t.Fatal("no output within the test timeout")
	}
	return provider.Output{}
}

// decideFunc answers a permission ask for a test.
type decideFunc func(*provider.PermissionAsk) provider.Answer

func allow(a *provider.PermissionAsk) provider.Answer {
	return provider.Answer{Decision: provider.Allow, Input: a.Input}
}

// until reads outputs, answering asks with decide, until stop holds for an
// output (inclusive); it returns their events, and the asks seen.
func (d *driver) until(decide decideFunc, stop func(provider.Output) bool) ([]*pb.AgentEvent, []*provider.PermissionAsk) {
	d.t.Helper()
	var evs []*pb.AgentEvent
	var asks []*provider.PermissionAsk
	for {
		o := d.next()
		evs = append(evs, o.Events...)
		if a := o.Permission; a != nil {
			asks = append(asks, a)
			if decide == nil {
				d.t.Fatalf("unexpected permission ask %+v", a)
			}
			if err := d.c.Answer(a.ID, decide(a)); err != nil {
				d.t.Fatal(err)
			}
		}
		if stop(o) {
			return evs, asks
		}
	}
}

// turn sends text and reads its output until the turn ends.
func (d *driver) turn(text string, decide decideFunc) ([]*pb.AgentEvent, []*provider.PermissionAsk) {
	d.t.Helper()
	if err := d.c.SendTurn(provider.Turn{ID: "t", Text: text}); err != nil {
		d.t.Fatal(err)
	}
	return d.until(decide, func(o provider.Output) bool { return o.TurnEnded })
}

func texts(evs []*pb.AgentEvent) string {
	var b strings.Builder
	for _, ev := range evs {
		b.WriteString(ev.GetTextDelta().GetText())
	}
	return b.String()
}

func stopReason(t *testing.T, evs []*pb.AgentEvent) string {
	t.Helper()
	for i := len(evs) - 1; i >= 0; i-- {
		if tc := evs[i].GetTurnComplete(); tc != nil {
			return tc.StopReason
		}
	}
	t.Fatalf("no TurnComplete in %v", evs)
	return ""
}

func toolResults(evs []*pb.AgentEvent) []*pb.ToolCallResult {
	var out []*pb.ToolCallResult
	for _, ev := range evs {
		if r := ev.GetToolCallResult(); r != nil {
			out = append(out, r)
		}
	}
	return out
}

func errorEvents(evs []*pb.AgentEvent) []*pb.ErrorEvent {
	var out []*pb.ErrorEvent
	for _, ev := range evs {
		if e := ev.GetError(); e != nil {
			out = append(out, e)
		}
	}
	return out
}
