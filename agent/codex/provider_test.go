package codex

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/betcode-dev/betcode/agent/provider"
	"github.com/betcode-dev/betcode/shared/fakeopenai"
)

// TestProviderCheck: a missing binary is "not installed" with how to
// install the pinned Codex; a missing endpoint is "not configured".
func TestProviderCheck(t *testing.T) {
	bin := requireCodex(t)
	missing := filepath.Join(t.TempDir(), "codex")
	for _, tc := range []struct {
		name string
		p    Provider
		want any
		msg  string
	}{
		{"binary missing", Provider{Binary: missing, BaseURL: "http://127.0.0.1:1/v1", Home: t.TempDir()}, new(*provider.NotInstalledError), "npm i -g @openai/codex@" + PinnedVersion},
		{"name not on PATH", Provider{Binary: "codex-not-on-path-xyz", BaseURL: "http://127.0.0.1:1/v1", Home: t.TempDir()}, new(*provider.NotInstalledError), "make codex"},
		{"no base URL", Provider{Binary: bin, Home: t.TempDir()}, new(*provider.NotConfiguredError), "--codex-base-url"},
		{"ready", Provider{Binary: bin, BaseURL: "http://127.0.0.1:1/v1", Home: t.TempDir()}, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.p.Check(context.Background())
			if tc.want == nil {
				if err != nil {
					t.Fatalf("Check = %v, want nil", err)
				}
				return
			}
			if !errors.As(err, tc.want) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("Check = %v, want %T mentioning %q", err, tc.want, tc.msg)
			}
		})
	}
}

// startConversation starts a conversation of a Provider on the real Codex
// against api, stopped at the end of the test.
func startConversation(t *testing.T, api *fakeopenai.Server) *Conversation {
	t.Helper()
	p := &Provider{
		Binary: requireCodex(t), Home: t.TempDir(), BaseURL: api.BaseURL(), APIKey: "sk-fake-test",
		ApprovalPolicy: PolicyUntrusted, Sandbox: SandboxFullAccess,
	}
	ctx, cancel := context.WithTimeout(context.Background(), turnTimeout)
	defer cancel()
	pc, err := p.Start(ctx, provider.Options{
		SessionID: "s1", Dir: t.TempDir(),
		Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		t.Fatal(err)
	}
	cv := pc.(*Conversation)
	t.Cleanup(func() {
		cv.Stop(20 * time.Second)
		for {
			if _, ok := cv.Next(); !ok {
				break
			}
		}
	})
	return cv
}

// readTurns reads cv's events until n turns ended, failing on an exit or
// after turnTimeout, and returns the events and the ended turns.
func readTurns(t *testing.T, cv *Conversation, n int) ([]Event, []*TurnEnded) {
	t.Helper()
	type res struct {
		evs   []Event
		ended []*TurnEnded
	}
	ch := make(chan res, 1)
	go func() {
		var r res
		for len(r.ended) < n {
			ev, ok := cv.Next()
			if !ok {
				break
			}
			r.evs = append(r.evs, ev)
			if e, ok := ev.(*TurnEnded); ok {
				r.ended = append(r.ended, e)
			}
		}
		ch <- r
	}()
	select {
	case r := <-ch:
		if len(r.ended) < n {
			t.Fatalf("stream ended after %d of %d turns: %s", len(r.ended), n, describe(r.evs))
		}
		return r.evs, r.ended
	case <-time.After(turnTimeout):
		// The reader stays blocked in Next until the cleanup's Stop.
		t.Fatalf("%d turns did not end within %v", n, turnTimeout)
		return nil, nil
	}
}

// echo answers every prompt with "answer to <prompt>", the prompt "first"
// slowly so that the next message arrives while it runs.
func echo(req *fakeopenai.Request) fakeopenai.Reply {
	r := fakeopenai.Reply{Text: "answer to " + req.Prompt()}
	if strings.HasPrefix(req.Prompt(), "first") {
		r.Delay = 100 * time.Millisecond
	}
	return r
}

// TestProviderQueuesMessages: a message sent while a turn runs is queued
// and answered as a turn of its own after it, in order; nothing is lost.
func TestProviderQueuesMessages(t *testing.T) {
	t.Parallel()
	api, err := fakeopenai.Start(fakeopenai.Config{Responder: echo})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = api.Close() })
	cv := startConversation(t, api)

	if err := cv.SendTurn(provider.Turn{ID: "m1", Text: "first message"}); err != nil {
		t.Fatal(err)
	}
	if err := cv.SendTurn(provider.Turn{ID: "m2", Text: "second message"}); err != nil {
		t.Fatal(err)
	}
	evs, ended := readTurns(t, cv, 2)

	for i, e := range ended {
		if e.Turn.Status != TurnStatusCompleted {
			t.Errorf("turn %d ended %q, want completed; events: %s", i+1, e.Turn.Status, describe(evs))
		}
	}
	if ended[0].Turn.ID == ended[1].Turn.ID {
		t.Errorf("both messages ended turn %s: the second ran inside the first", ended[0].Turn.ID)
	}
	var texts []string
	for _, ev := range evs {
		if ic, ok := ev.(*ItemCompleted); ok && ic.Item.Type == ItemAgentMessage {
			texts = append(texts, ic.Item.Text)
		}
	}
	if want := []string{"answer to first message", "answer to second message"}; !slices.Equal(texts, want) {
		t.Errorf("answers %q, want %q", texts, want)
	}
	reqs := api.Requests()
	if len(reqs) != 2 || reqs[0].Prompt() != "first message" || reqs[1].Prompt() != "second message" {
		t.Fatalf("model requests %d: %+v", len(reqs), reqs)
	}
	if got := reqs[1].Prompts(); !slices.Equal(got, []string{"first message", "second message"}) {
		t.Errorf("second request's prompts %q", got)
	}
}

// TestProviderInterruptCancelsQueued: cancelling the running turn also
// cancels the messages queued behind it, each with a TurnEnded of its own;
// they never reach the model, and the thread goes on.
func TestProviderInterruptCancelsQueued(t *testing.T) {
	t.Parallel()
	api, err := fakeopenai.Start(fakeopenai.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = api.Close() })
	cv := startConversation(t, api)

	if err := cv.SendTurn(provider.Turn{ID: "m1", Text: "SLOW please"}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"m2", "m3"} {
		if err := cv.SendTurn(provider.Turn{ID: id, Text: "queued " + id}); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), turnTimeout)
	defer cancel()
	if _, err := api.WaitRequests(ctx, 1); err != nil {
		t.Fatal(err)
	}
	// The slow turn is streaming: its TurnStarted is known once Next read
	// it, so interrupt after the first delta.
	for {
		ev, ok := cv.Next()
		if !ok {
			t.Fatal("stream ended before the first delta")
		}
		if _, ok := ev.(*AgentMessageDelta); ok {
			break
		}
	}
	if err := cv.InterruptTurn(); err != nil {
		t.Fatal(err)
	}
	evs, ended := readTurns(t, cv, 3)
	for i, e := range ended {
		if e.Turn.Status != TurnStatusInterrupted {
			t.Errorf("turn %d ended %q, want interrupted; events: %s", i+1, e.Turn.Status, describe(evs))
		}
	}
	if n := len(api.Requests()); n != 1 {
		t.Errorf("%d model requests, want 1 (queued messages cancelled)", n)
	}

	if err := cv.SendTurn(provider.Turn{ID: "m4", Text: "after"}); err != nil {
		t.Fatal(err)
	}
	_, ended = readTurns(t, cv, 1)
	if ended[0].Turn.Status != TurnStatusCompleted {
		t.Errorf("turn after the cancel ended %q", ended[0].Turn.Status)
	}
}

// TestProviderImage: an image block reaches the model as an input_image
// with the image's data URL, next to the message's text.
func TestProviderImage(t *testing.T) {
	t.Parallel()
	api, err := fakeopenai.Start(fakeopenai.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = api.Close() })
	cv := startConversation(t, api)

	const png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
	err = cv.SendTurn(provider.Turn{ID: "m1", Blocks: []map[string]any{
		{"type": "text", "text": "what is in this picture"},
		{"type": "image", "source": map[string]any{"type": "base64", "media_type": "image/png", "data": png}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	evs, ended := readTurns(t, cv, 1)
	if ended[0].Turn.Status != TurnStatusCompleted {
		t.Fatalf("turn ended %q; events: %s", ended[0].Turn.Status, describe(evs))
	}
	reqs := api.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d model requests", len(reqs))
	}
	if got, want := reqs[0].Images(), []string{"data:image/png;base64," + png}; !slices.Equal(got, want) {
		t.Errorf("images reaching the model %q, want %q; body %s", got, want, reqs[0].Body)
	}
	if !slices.Contains(reqs[0].Prompts(), "what is in this picture") {
		t.Errorf("prompts %q lack the text", reqs[0].Prompts())
	}
}
