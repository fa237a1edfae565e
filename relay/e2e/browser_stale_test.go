package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/browsertest"
	"github.com/betcode-dev/betcode/shared/e2ee"
	"github.com/betcode-dev/betcode/shared/fakeapi"
)

// staleResult is what web/e2e/stale.mjs reports.
type staleResult struct {
	Steps           []string `json:"steps"`
	FrozenResumeMs  int      `json:"frozenResumeMs"`
	FrozenDeltas    []string `json:"frozenDeltas"`
	OfflineResumeMs int      `json:"offlineResumeMs"`
	OfflineDeltas   []string `json:"offlineDeltas"`
	OfflineStrip    string   `json:"offlineStrip"`
	LiveStrip       string   `json:"liveStrip"`
	DownStrip       string   `json:"downStrip"`
	UserTexts       []string `json:"userTexts"`
	pageTraffic
}

// localAgent is a gRPC client of the agent's own Unix socket (no relay, no token): what the
// machine itself stored, to compare the browser's view with.
func localAgent(t *testing.T, a *agent) pb.AgentServiceClient {
	t.Helper()
	cc, err := grpc.NewClient("unix://"+a.sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return pb.NewAgentServiceClient(cc)
}

// waitTurns waits until the one session of the agent has stored n turn_complete events.
func waitTurns(ctx context.Context, api pb.AgentServiceClient, f **follower, t *testing.T, n int) error {
	if *f == nil {
		s, err := theSession(ctx, api)
		if err != nil {
			return err
		}
		*f = followSession(t, ctx, api, s.Id)
	}
	from := 0
	for i := range n {
		idx, _, err := (*f).next(ctx, from, func(ev *pb.AgentEvent) bool { return ev.GetTurnComplete() != nil })
		if err != nil {
			return fmt.Errorf("waiting for turn %d to complete: %w", i+1, err)
		}
		from = idx + 1
	}
	return nil
}

// waitReplyTo waits until the one session of the agent has stored the user input text and a
// turn_complete after it (the turn counts of waitTurns do not survive a kill -9 of the agent:
// events of its last moments may not have been written).
func waitReplyTo(ctx context.Context, t *testing.T, api pb.AgentServiceClient, text string) error {
	s, err := theSession(ctx, api)
	if err != nil {
		return err
	}
	f := followSession(t, ctx, api, s.Id)
	at, _, err := f.next(ctx, 0, func(ev *pb.AgentEvent) bool { return ev.GetUserInput().GetContent() == text })
	if err != nil {
		return fmt.Errorf("waiting for %q to be stored: %w", text, err)
	}
	if _, _, err := f.next(ctx, at+1, func(ev *pb.AgentEvent) bool { return ev.GetTurnComplete() != nil }); err != nil {
		return fmt.Errorf("waiting for the turn of %q: %w", text, err)
	}
	return nil
}

// TestBrowserStaleThroughRelay is issue 24's "never stale" on a paired phone, end to end through
// the relay (the machine on --relay-e2e=required): the page is frozen (Page.setWebLifecycleState)
// while a turn streams on at the machine, and taken offline (context.setOffline) during the next
// turn; each time, once resumed, the DOM shows every delta exactly once, in order, within 1 s. A
// message written offline is queued ("offline, 1 message queued") and delivered exactly once
// when the network returns: the model gets it once, the agent stores it once; so is a message
// cut while in flight, and one written while the machine is away (its agent killed, then started
// again on the same data).
func TestBrowserStaleThroughRelay(t *testing.T) {
	browsertest.Require(t)
	w := newWorld(t, "")
	a := w.startE2EAgent("stale-m")
	ctx := ctxT(t, 4*time.Minute)
	api := localAgent(t, a)

	code, _, _ := pairCode(ctx, t, a)
	if _, err := e2ee.ParsePairingCode(code); err != nil {
		t.Fatalf("the machine's pairing code: %v", err)
	}
	const n = 40
	p := map[string]any{
		"code": code, "deviceName": "Stale phone", "cwd": a.project,
		"hello": "hello there", "helloReply": fakeapi.HelloText,
		"turn1": "first long turn", "prefix1": "a", "turn2": "second long turn", "prefix2": "b", "n": n,
		"queued": "written while offline " + marker("q"), "queuedReply": fakeapi.HelloText,
		"inflight": "cut in flight " + marker("f"), "whileDown": "written while the machine is away " + marker("d"),
	}
	// A reply of n deltas, 60 ms apart: about 2.4 s of streaming at the machine.
	stepped := func(prefix string) fakeapi.Reply {
		return fakeapi.Reply{Deltas: prefixedDeltas(prefix, n), Delay: 60 * time.Millisecond}
	}
	var follow *follower
	out := browsertest.Run(t, browsertest.Options{
		Script: "stale.mjs", BaseURL: w.webURL(), ChromiumArgs: w.trustRelay(), Timeout: 200 * time.Second, Params: p,
		OnWait: func(name string, _ map[string]any) any {
			switch name {
			case "turn1":
				w.api.Enqueue(stepped("a"))
			case "turn2":
				w.api.Enqueue(stepped("b"))
			case "frozen": // the page is frozen: the turn ends at the machine meanwhile
				if err := waitTurns(ctx, api, &follow, t, 2); err != nil {
					return browserStop("%v", err)
				}
			case "offline":
				if err := waitTurns(ctx, api, &follow, t, 3); err != nil {
					return browserStop("%v", err)
				}
			case "delivered":
				if err := waitTurns(ctx, api, &follow, t, 4); err != nil {
					return browserStop("%v", err)
				}
			case "inflight":
				if err := waitTurns(ctx, api, &follow, t, 5); err != nil {
					return browserStop("%v", err)
				}
			case "machineDown":
				a.proc.kill()
				follow = nil // its stream ended with the agent
			case "machineUp":
				a.startAgain(w)
			case "machineDelivered": // its turn ended on the new agent process
				if err := waitReplyTo(ctx, t, api, p["whileDown"].(string)); err != nil {
					return browserStop("%v", err)
				}
			}
			return map[string]any{}
		},
	})
	var r staleResult
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatal(err)
	}
	t.Logf("stale.mjs: frozen → complete in %d ms, offline → complete in %d ms; strip %q then %q", r.FrozenResumeMs, r.OfflineResumeMs, r.OfflineStrip, r.LiveStrip)

	if want := []string{"paired", "frozen", "offline", "inflight", "machine"}; !slices.Equal(r.Steps, want) {
		t.Errorf("steps %q, want %q", r.Steps, want)
	}
	wantDeltas := func(prefix string) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("%s%d", prefix, i)
		}
		return out
	}
	if !slices.Equal(r.FrozenDeltas, wantDeltas("a")) {
		t.Errorf("after the freeze the page shows %q, want a0…a%d once each, in order", r.FrozenDeltas, n-1)
	}
	if !slices.Equal(r.OfflineDeltas, wantDeltas("b")) {
		t.Errorf("after going offline the page shows %q, want b0…b%d once each, in order", r.OfflineDeltas, n-1)
	}
	if r.FrozenResumeMs > 1000 {
		t.Errorf("the frozen page showed the whole turn %d ms after it resumed, want ≤ 1000", r.FrozenResumeMs)
	}
	if r.OfflineResumeMs > 1000 {
		t.Errorf("the offline page showed the whole turn %d ms after the network returned, want ≤ 1000", r.OfflineResumeMs)
	}
	if !strings.Contains(r.OfflineStrip, "offline") || !strings.Contains(r.OfflineStrip, "1 message queued") {
		t.Errorf("the strip offline says %q, want offline, 1 message queued", r.OfflineStrip)
	}
	if r.LiveStrip != "live" {
		t.Errorf("the strip back online says %q, want live", r.LiveStrip)
	}
	s, err := theSession(ctx, api)
	if err != nil {
		t.Fatal(err)
	}
	evs, err := storedEvents(ctx, api, s.Id)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(r.DownStrip, "1 message queued") {
		t.Errorf("the strip with the machine away says %q, want 1 message queued", r.DownStrip)
	}
	for _, k := range []string{"queued", "inflight", "whileDown"} {
		msg := p[k].(string)
		if got := countOf(r.UserTexts, msg); got != 1 {
			t.Errorf("the page shows the %s message %d times (%q), want once", k, got, r.UserTexts)
		}
		// Exactly once at the machine: one model request with it, one user_input stored.
		var asked, stored int
		for _, req := range w.api.Requests() {
			if req.MainLoop() && req.Prompt() == msg {
				asked++
			}
		}
		for _, ev := range evs {
			if ev.GetUserInput().GetContent() == msg {
				stored++
			}
		}
		if asked != 1 || stored != 1 {
			t.Errorf("the %s message: the model was asked %d times, the agent stored it %d times; want once each", k, asked, stored)
		}
	}
	nothingInClear(t, r.APIRequests, r.WebSockets)
	for _, al := range r.Alerts {
		t.Errorf("the app showed an error: %q (at %s)", al.Text, al.URL)
	}
}

func countOf(xs []string, x string) int {
	n := 0
	for _, y := range xs {
		if y == x {
			n++
		}
	}
	return n
}
