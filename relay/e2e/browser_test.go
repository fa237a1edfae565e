package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/betcode-dev/betcode/relay/pki"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/browsertest"
	"github.com/betcode-dev/betcode/shared/fakeapi"
)

// The web app in a real browser (Debian's chromium driven by playwright-core,
// web/e2e/*.mjs) against a real relay, a real agent and the real Claude CLI
// on the fake model API. The scripts print JSON lines; sync points let the
// test script the fake model and look at the machine between steps.

// stop answers a sync point that the test cannot honour: the script fails.
func browserStop(format string, args ...any) map[string]any {
	return map[string]any{"error": fmt.Sprintf(format, args...)}
}

// webURL is the web app on the relay's public TLS port.
func (w *world) webURL() string { return "https://" + w.addr + "/" }

// trustRelay is the chromium flag that makes it take the relay's
// certificate (issued by the test's CA) as valid: the app's service worker
// registers only on a valid one.
func (w *world) trustRelay() []string {
	w.t.Helper()
	b, err := os.ReadFile(filepath.Join(w.pki, pki.RelayCertFile))
	if err != nil {
		w.t.Fatal(err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		w.t.Fatal("relay certificate: no PEM block")
	}
	cert, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		w.t.Fatal(err)
	}
	sum := sha256.Sum256(cert.RawSubjectPublicKeyInfo)
	return []string{"--ignore-certificate-errors-spki-list=" + base64.StdEncoding.EncodeToString(sum[:])}
}

// storedEvents reads a session's stored events (ResumeSession, no follow).
func storedEvents(ctx context.Context, api pb.AgentServiceClient, id string) ([]*pb.AgentEvent, error) {
	r, err := api.ResumeSession(ctx, &pb.ResumeSessionRequest{SessionId: id})
	if err != nil {
		return nil, err
	}
	var evs []*pb.AgentEvent
	for {
		ev, err := r.Recv()
		if errors.Is(err, io.EOF) {
			return evs, nil
		}
		if err != nil {
			return evs, err
		}
		evs = append(evs, ev)
	}
}

// theSession returns the one session of the caller's current machine.
func theSession(ctx context.Context, api pb.AgentServiceClient) (*pb.SessionSummary, error) {
	l, err := api.ListSessions(ctx, &pb.ListSessionsRequest{})
	if err != nil {
		return nil, err
	}
	if len(l.Sessions) != 1 {
		return nil, fmt.Errorf("%d sessions, want 1", len(l.Sessions))
	}
	return l.Sessions[0], nil
}

func prefixedDeltas(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%d ", prefix, i)
	}
	return out
}

// flowScript is the conversation flow.mjs has, with the texts the fake
// model answers.
type flowScript struct {
	startReply  string
	reloadReply fakeapi.Reply
}

func newFlowScript() flowScript {
	return flowScript{
		startReply:  "Hello from the fake model, streamed word by word to a phone.",
		reloadReply: fakeapi.Reply{Deltas: prefixedDeltas("r", 200), Delay: 15 * time.Millisecond},
	}
}

// params returns flow.mjs's parameters for a session in cwd.
func (f flowScript) params(machine, cwd string, steps []string) map[string]any {
	return map[string]any{
		"machine": machine, "cwd": cwd, "steps": steps,
		"start":      map[string]any{"prompt": "say hello", "want": f.startReply},
		"permission": map[string]any{"prompt": "please RUNTOOL now", "want": fakeapi.ToolResultPrefix + "done"},
		"markdown":   map[string]any{"prompt": "why is the build slow"},
		"question": map[string]any{"prompt": "ASK me", "pick": []string{"SQLite", "Auth", "Search"},
			// The reply quotes the answers in order: wait for the last one,
			// or the page is read while the reply still streams.
			"replyIncludes": "Search"},
		"cancel": map[string]any{"prompt": "SLOW story", "waitFor": "w2"},
		"reload": map[string]any{"prompt": "stream while I reload", "reloadAfter": "r10",
			"want": f.reloadReply.FullText()},
	}
}

// check asserts what every run of flow.mjs must show.
func (f flowScript) check(t *testing.T, r browsertest.FlowResult, steps []string) {
	t.Helper()
	if !slices.Equal(r.Steps, steps) {
		t.Errorf("steps done %q, want %q", r.Steps, steps)
	}
	for _, a := range r.Alerts {
		t.Errorf("the app showed an error: %q (at %s)", a.Text, a.URL)
	}
	if len(r.Start.Text) == 0 || r.Start.Text[len(r.Start.Text)-1] != f.startReply {
		t.Errorf("first reply rendered as %q, want %q", r.Start.Text, f.startReply)
	}
	if slices.Contains(steps, "permission") {
		if !strings.Contains(r.Permission.PromptText, "Bash") || !strings.Contains(r.Permission.PromptText, "created-by-tool.txt") {
			t.Errorf("permission prompt shows %q, want the tool and its command", r.Permission.PromptText)
		}
		if !r.Permission.FileOnDisk {
			t.Errorf("the approved tool's file is not on the machine")
		}
		if r.Permission.ToolCards == 0 {
			t.Errorf("no tool card after the tool ran")
		}
	}
	if slices.Contains(steps, "question") {
		// Both questions were answered, and Claude got both answers.
		for _, part := range []string{"Which database should we use?", "SQLite", "Which features do you want?", "Auth", "Search"} {
			if !strings.Contains(r.Question.Reply, part) {
				t.Errorf("Claude's reply to the answers %q does not quote %q", r.Question.Reply, part)
			}
		}
		if r.Question.SubmitButtonsLeft != 0 {
			t.Errorf("%d question forms still open after answering", r.Question.SubmitButtonsLeft)
		}
	}
	if slices.Contains(steps, "cancel") {
		if r.Cancel.StopStillEnabled {
			t.Errorf("the Stop button is still enabled 5 s after the cancelled turn ended")
		}
		if r.Cancel.StopReason != "cancelled" {
			t.Errorf("the cancelled turn ended with stop reason %q, want cancelled", r.Cancel.StopReason)
		}
		full := strings.TrimSpace(strings.Join(fakeapi.NumberedDeltas(50), ""))
		if r.Cancel.LastText == full || !strings.HasPrefix(full, r.Cancel.LastText) {
			t.Errorf("the cancelled turn rendered %q, want a strict prefix of the SLOW reply", r.Cancel.LastText)
		}
	}
	if slices.Contains(steps, "reload") {
		want := strings.TrimSpace(f.reloadReply.FullText())
		// Exactly one more text than before the turn, the scripted one: no
		// delta twice or missing, nothing earlier changed by the reload.
		if got := r.Reload.After; len(got) != len(r.Reload.Before)+1 || !slices.Equal(got[:len(got)-1], r.Reload.Before) || got[len(got)-1] != want {
			t.Errorf("after the reload the assistant texts are\n%q\nwant\n%q + %q", got, r.Reload.Before, want)
		}
	}
	if slices.Contains(steps, "lostSubscription") {
		// The tab's stream asked again by itself: the conversation showed
		// within the flow's wait (checked by flow.mjs), after dropped asks.
		if r.LostSubscription.Dropped == 0 {
			t.Errorf("the lost-subscription tab dropped no subscription: the step tested nothing")
		}
		t.Logf("a tab whose %d subscriptions were lost showed the conversation in %d ms", r.LostSubscription.Dropped, r.LostSubscription.ShownMs)
	}
	if slices.Contains(steps, "secondTab") {
		if r.SecondTabNeededLog {
			t.Errorf("the second tab asked to log in again")
		}
		if !slices.Equal(r.AssistantTexts, r.Tab2AssistantTexts) {
			t.Errorf("the second tab shows\n%q\nthe first\n%q", r.Tab2AssistantTexts, r.AssistantTexts)
		}
		if r.ToolCards != r.Tab2ToolCards {
			t.Errorf("tool cards: %d in the first tab, %d in the second", r.ToolCards, r.Tab2ToolCards)
		}
	}
	// Every reply of the flow differs from the one before: one shown twice
	// in a row is a replayed event.
	for i := 1; i < len(r.AssistantTexts); i++ {
		if r.AssistantTexts[i] == r.AssistantTexts[i-1] {
			t.Errorf("assistant text %d is shown twice: %q", i, r.AssistantTexts[i])
		}
	}
}

// flowWaits answers flow.mjs's sync points for a session in cwd on a
// machine reached through api.
func flowWaits(t *testing.T, ctx context.Context, fake *fakeapi.Server, api pb.AgentServiceClient, cwd string, f flowScript) browsertest.Wait {
	return func(name string, _ map[string]any) any {
		switch name {
		case "permission-done":
			_, err := os.Stat(filepath.Join(cwd, fakeapi.ToolFile))
			return map[string]any{"fileExists": err == nil}
		case "cancel-done":
			// The turn the browser cancelled ends at the agent.
			s, err := theSession(ctx, api)
			if err != nil {
				return browserStop("list sessions: %v", err)
			}
			_, ev, err := followSession(t, ctx, api, s.Id).next(ctx, 0, func(ev *pb.AgentEvent) bool {
				return ev.GetTurnComplete().GetStopReason() == "cancelled"
			})
			if err != nil {
				return browserStop("wait for the cancelled turn: %v", err)
			}
			return map[string]any{"stopReason": ev.ev.GetTurnComplete().GetStopReason()}
		case "reload-turn":
			fake.Enqueue(f.reloadReply)
			return map[string]any{}
		case "markdown-turn":
			fake.Enqueue(fakeapi.Reply{Text: browsertest.FlowMarkdown})
			return map[string]any{}
		case "changes":
			if err := browsertest.GitChange(cwd); err != nil {
				return browserStop("%v", err)
			}
			return map[string]any{}
		}
		return browserStop("unknown sync point %q", name)
	}
}

var allFlowSteps = []string{"start", "secondTab", "lostSubscription", "permission", "markdown", "question", "cancel", "reload", "changes"}

// TestBrowserFlowThroughRelay is the main flow on a phone against the relay:
// log in, pick the machine, start a session, approve a permission prompt, a
// markdown reply, answer a question, cancel a turn, reload mid-stream, a
// second tab, the changes view; axe-core checks every screen on the way.
func TestBrowserFlowThroughRelay(t *testing.T) {
	browsertest.Require(t)
	w := newWorld(t, "")
	m1 := w.startAgent("m1", w.addr)
	ctx := ctxT(t, 4*time.Minute)
	api := pb.NewAgentServiceClient(w.client())
	ctx = onMachine(ctx, "m1")
	f := newFlowScript()
	w.api.Enqueue(fakeapi.Reply{Text: f.startReply})
	out := browsertest.Run(t, browsertest.Options{
		Script: "flow.mjs", BaseURL: w.webURL(), Token: w.userToken("alice"), ChromiumArgs: w.trustRelay(),
		Params: f.params("name-m1", m1.project, allFlowSteps),
		OnWait: flowWaits(t, ctx, w.api, api, m1.project, f),
	})
	var r browsertest.FlowResult
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatal(err)
	}
	t.Logf("flow: reply %d ms after the start, turn ended %d ms after the Stop tap, the reloaded page caught up in %d ms",
		r.Start.ReplyMs, r.Cancel.AgentEndedMs, r.Reload.AfterReloadMs)
	f.check(t, r, allFlowSteps)
	if !r.MachinePicked {
		t.Error("no machine picker")
	}

	// The agent's record agrees: the session's events are gapless and hold
	// the scripted replies.
	s, err := theSession(ctx, api)
	if err != nil {
		t.Fatal(err)
	}
	evs, err := storedEvents(ctx, api, s.Id)
	if err != nil {
		t.Fatal(err)
	}
	checkSeq(t, evs)
	if got := textOf(evs); !strings.HasPrefix(got, f.startReply) || !strings.HasSuffix(got, f.reloadReply.FullText()) {
		t.Errorf("the session's text on the machine is %q", got)
	}
}

// follower is a gRPC client following a session live (ResumeSession with
// x-betcode-follow), stamping each event with its arrival time.
type follower struct {
	mu      sync.Mutex
	evs     []stamped
	err     error
	changed chan struct{} // closed and replaced on every event
}

type stamped struct {
	ev *pb.AgentEvent
	at time.Time
}

// follow starts following session id from its start; the stream ends with
// the test.
func followSession(t *testing.T, ctx context.Context, api pb.AgentServiceClient, id string) *follower {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	r, err := api.ResumeSession(metadataFollow(ctx), &pb.ResumeSessionRequest{SessionId: id})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	f := &follower{changed: make(chan struct{})}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			ev, err := r.Recv()
			at := time.Now()
			f.mu.Lock()
			if err != nil {
				f.err = err
			} else {
				f.evs = append(f.evs, stamped{ev, at})
			}
			close(f.changed)
			f.changed = make(chan struct{})
			f.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return f
}

// next waits for the first event after index from that pred accepts and
// returns its index.
func (f *follower) next(ctx context.Context, from int, pred func(*pb.AgentEvent) bool) (int, stamped, error) {
	for i := from; ; {
		f.mu.Lock()
		evs, err, changed := f.evs, f.err, f.changed
		f.mu.Unlock()
		for ; i < len(evs); i++ {
			if pred(evs[i].ev) {
				return i, evs[i], nil
			}
		}
		if err != nil {
			return i, stamped{}, fmt.Errorf("follow stream ended: %w", err)
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return i, stamped{}, ctx.Err()
		}
	}
}

// len returns how many events arrived so far.
func (f *follower) len() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.evs)
}

// perfResult is what perf.mjs reports.
type perfResult struct {
	FirstLoad struct {
		Files []struct {
			URL         string `json:"url"`
			Type        string `json:"type"`
			Encoding    string `json:"encoding"`
			Transferred int    `json:"transferred"`
			Decoded     int    `json:"decoded"`
		} `json:"files"`
		JSBytes      int `json:"jsBytes"`
		CSSBytes     int `json:"cssBytes"`
		Bytes        int `json:"bytes"`
		DecodedBytes int `json:"decodedBytes"`
	} `json:"firstLoad"`
	TTFT []struct {
		Turn    int     `json:"turn"`
		Marker  string  `json:"marker"`
		At      float64 `json:"at"`      // ms since the epoch: in the DOM
		Painted float64 `json:"painted"` // ms since the epoch: the next frame
		Already bool    `json:"already"`
	} `json:"ttft"`
	Burst struct {
		RenderMs           int  `json:"renderMs"`
		LongTasksSupported bool `json:"longTasksSupported"`
		LongTasks          []struct {
			Start    float64 `json:"start"`
			Duration float64 `json:"duration"`
		} `json:"longTasks"`
		FramesDuringBurst int `json:"framesDuringBurst"`
		WebSockets        int `json:"webSockets"`
		TaskCPU           struct {
			Tasks         int     `json:"tasks"`
			HasThreadTime bool    `json:"hasThreadTime"`
			WorstCPUMs    float64 `json:"worstCpuMs"`
			WorstWallMs   float64 `json:"worstWallMs"`
			OverBudgetCPU int     `json:"overBudgetCpu"`
		} `json:"taskCPU"`
	} `json:"burst"`
}

const (
	ttftTurns   = 7
	burstDeltas = 2000
	// burstDelay paces the fake model's deltas: 1,000 a second.
	burstDelay = time.Millisecond
	// Targets (docs/benchmarks.md, "Web app").
	maxFirstLoadBytes = 150 << 10
	maxTTFTGap        = 50 * time.Millisecond
	maxLongTask       = 50 * time.Millisecond
)

func medianOf(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}

func epochTime(ms float64) time.Time { return time.UnixMicro(int64(ms * 1000)) }

// TestBrowserPerfThroughRelay measures the web app through the relay on a
// phone viewport: first-load bytes, time to first token in the browser
// against a gRPC client's on the same turns, and long tasks while a turn
// streams 1,000 deltas a second. It logs the numbers and writes them to
// $BETCODE_WEB_BENCH_OUT (default web-bench.out in the repository root),
// which docs/benchmarks.md quotes.
func TestBrowserPerfThroughRelay(t *testing.T) {
	browsertest.Require(t)
	w := newWorld(t, "")
	m1 := w.startAgent("m1", w.addr)
	ctx := onMachine(ctxT(t, 4*time.Minute), "m1")
	api := pb.NewAgentServiceClient(w.client())
	const name = "bench"
	st, err := api.StartSession(ctx, &pb.StartSessionRequest{WorkingDirectory: m1.project, Name: name})
	if err != nil {
		t.Fatal(err)
	}
	id := st.Session.Id
	fol := followSession(t, ctx, api, id)

	const warmup = "Warm and ready."
	var browserGap, grpcTTFT []time.Duration
	var sent []time.Time
	var firsts []time.Time
	turn := func(text string, reply fakeapi.Reply, marker string) error {
		from := fol.len()
		w.api.Enqueue(reply)
		t0 := time.Now()
		if _, err := api.QueueMessage(ctx, &pb.QueueMessageRequest{SessionId: id, Message: &pb.UserMessage{Content: text}}); err != nil {
			return err
		}
		if marker != "" {
			_, first, err := fol.next(ctx, from, func(ev *pb.AgentEvent) bool { return strings.Contains(ev.GetTextDelta().GetText(), marker) })
			if err != nil {
				return err
			}
			sent = append(sent, t0)
			firsts = append(firsts, first.at)
			grpcTTFT = append(grpcTTFT, first.at.Sub(t0))
		}
		_, _, err := fol.next(ctx, from, isTurnComplete)
		return err
	}
	out := browsertest.Run(t, browsertest.Options{
		Script: "perf.mjs", BaseURL: w.webURL(), Token: w.userToken("alice"), ChromiumArgs: w.trustRelay(),
		Params: map[string]any{"machine": "name-m1", "sessionName": name, "warmupWant": warmup,
			"ttftTurns": ttftTurns, "markerPrefix": "ttft"},
		OnWait: func(wait string, msg map[string]any) any {
			switch wait {
			case "warmup":
				if err := turn("warm up", fakeapi.Reply{Text: warmup}, ""); err != nil {
					return browserStop("warm-up turn: %v", err)
				}
				return map[string]any{}
			case "ttft":
				marker, _ := msg["marker"].(string)
				reply := fakeapi.Reply{Deltas: []string{marker + " ", "and ", "the ", "rest."}}
				if err := turn("first token please", reply, marker); err != nil {
					return browserStop("turn %s: %v", marker, err)
				}
				return map[string]any{"want": reply.FullText()}
			case "burst":
				reply := fakeapi.Reply{Deltas: fakeapi.NumberedDeltas(burstDeltas), Delay: burstDelay}
				from := fol.len()
				w.api.Enqueue(reply)
				if _, err := api.QueueMessage(ctx, &pb.QueueMessageRequest{SessionId: id, Message: &pb.UserMessage{Content: "burst"}}); err != nil {
					return browserStop("burst: %v", err)
				}
				return map[string]any{"want": reply.FullText(), "from": from}
			}
			return browserStop("unknown sync point %q", wait)
		},
	})
	var r perfResult
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatal(err)
	}
	if len(r.TTFT) != len(grpcTTFT) {
		t.Fatalf("%d browser turns, %d gRPC turns", len(r.TTFT), len(grpcTTFT))
	}
	var browserTTFT, paintGap []time.Duration
	for i, b := range r.TTFT {
		browserTTFT = append(browserTTFT, epochTime(b.At).Sub(sent[i]))
		browserGap = append(browserGap, epochTime(b.At).Sub(firsts[i]))
		if b.Painted > 0 {
			paintGap = append(paintGap, epochTime(b.Painted).Sub(firsts[i]))
		}
	}

	// The burst as the gRPC client saw it: its rate at the source.
	var deltas int
	var firstAt, lastAt time.Time
	for _, s := range fol.snapshotEvents() {
		if d := s.ev.GetTextDelta(); d != nil && burstDeltaRE.MatchString(d.Text) {
			if deltas == 0 {
				firstAt = s.at
			}
			deltas++
			lastAt = s.at
		}
	}
	rate := float64(deltas) / lastAt.Sub(firstAt).Seconds()
	var worst time.Duration
	for _, lt := range r.Burst.LongTasks {
		worst = max(worst, time.Duration(lt.Duration*float64(time.Millisecond)))
	}

	var rep strings.Builder
	fmt.Fprintf(&rep, "BetCode web app through the relay, phone viewport 390x844, chromium %s, %s\n", chromiumVersion(), time.Now().UTC().Format(time.RFC3339))
	fmt.Fprintf(&rep, "first load: %d bytes of JS+CSS transferred compressed (JS %d, CSS %d; %d decoded) in %d files (target < %d)\n",
		r.FirstLoad.Bytes, r.FirstLoad.JSBytes, r.FirstLoad.CSSBytes, r.FirstLoad.DecodedBytes, len(r.FirstLoad.Files), maxFirstLoadBytes)
	for _, f := range r.FirstLoad.Files {
		fmt.Fprintf(&rep, "  %-40s %-10s %-4s %7d transferred %7d decoded\n", f.URL, f.Type, f.Encoding, f.Transferred, f.Decoded)
	}
	fmt.Fprintf(&rep, "time to first token over %d turns, from QueueMessage: gRPC client median %s, browser median %s; browser after gRPC: median %s, each %v (target median <= %s); to the next painted frame: median %s\n",
		len(grpcTTFT), fmtMs(medianOf(grpcTTFT)), fmtMs(medianOf(browserTTFT)), fmtMs(medianOf(browserGap)), fmtMsList(browserGap), maxTTFTGap, fmtMs(medianOf(paintGap)))
	fmt.Fprintf(&rep, "1,000 deltas/s turn: %d deltas at %.0f/s at the gRPC client, rendered in %d ms; %d WebSocket frames; long tasks over 50 ms: %d (worst %s; observer supported: %v)\n",
		deltas, rate, r.Burst.RenderMs, r.Burst.FramesDuringBurst, len(r.Burst.LongTasks), fmtMs(worst), r.Burst.LongTasksSupported)
	tc := r.Burst.TaskCPU
	fmt.Fprintf(&rep, "  main-thread tasks in the trace: %d; longest by the page's own CPU time %.1f ms (target <= %s), longest wall time %.1f ms; tasks over 50 ms of CPU: %d\n",
		tc.Tasks, tc.WorstCPUMs, maxLongTask, tc.WorstWallMs, tc.OverBudgetCPU)
	t.Log("\n" + rep.String())
	outPath := os.Getenv("BETCODE_WEB_BENCH_OUT")
	if outPath == "" {
		outPath = filepath.Join(repoRoot(), "web-bench.out")
	}
	if err := os.WriteFile(outPath, []byte(rep.String()), 0o644); err != nil {
		t.Errorf("write %s: %v", outPath, err)
	}

	if r.FirstLoad.Bytes == 0 || r.FirstLoad.Bytes >= maxFirstLoadBytes {
		t.Errorf("first load transfers %d bytes of JS and CSS, want 1..%d", r.FirstLoad.Bytes, maxFirstLoadBytes)
	}
	for _, f := range r.FirstLoad.Files {
		if f.Encoding == "" && f.Transferred > 1024 {
			t.Errorf("%s is served uncompressed (%d bytes)", f.URL, f.Transferred)
		}
	}
	if g := medianOf(browserGap); g > maxTTFTGap {
		t.Errorf("the browser shows the first token %s after the gRPC client (median), want <= %s", fmtMs(g), maxTTFTGap)
	}
	if !r.Burst.LongTasksSupported {
		t.Error("chromium does not report long tasks")
	}
	// The 'longtask' observer's durations are wall time: on a loaded
	// machine (CI runs the other packages' tests beside this one) they
	// include the time the renderer waited for a CPU, so they are reported
	// above, and the target is checked on each task's own thread time from
	// the trace, which is the work the page asked of the CPU.
	if tc.Tasks == 0 || !tc.HasThreadTime {
		t.Errorf("the trace has %d main-thread tasks (thread time recorded: %v): cannot check the long-task target", tc.Tasks, tc.HasThreadTime)
	}
	if tc.OverBudgetCPU > 0 {
		t.Errorf("%d main-thread tasks took over %s of CPU while streaming 1,000 deltas/s (longest %.1f ms)", tc.OverBudgetCPU, maxLongTask, tc.WorstCPUMs)
	}
}

var burstDeltaRE = regexp.MustCompile(`^w[0-9]+ $`)

// snapshot returns the events so far.
func (f *follower) snapshotEvents() []stamped {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.evs)
}

func fmtMs(d time.Duration) string {
	return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
}

func fmtMsList(ds []time.Duration) string {
	var s []string
	for _, d := range ds {
		s = append(s, fmtMs(d))
	}
	return "[" + strings.Join(s, " ") + "]"
}

func chromiumVersion() string {
	out, err := exec.Command("chromium", "--version").Output()
	if err != nil {
		return "?"
	}
	return strings.TrimSpace(string(out))
}

// TestBrowserScreenshots takes the screenshots of the main screens (phone
// and laptop, light and dark) with a machine whose sessions show a finished
// reply and a permission prompt. make screenshots sets
// BETCODE_SCREENSHOTS_DIR=docs/screenshots; otherwise they go to a
// temporary directory and only their taking is tested.
func TestBrowserScreenshots(t *testing.T) {
	browsertest.Require(t)
	begin := time.Now()
	w := newWorld(t, "")
	ws := w.startAgent("workstation", w.addr)
	w.startAgent("buildbox", w.addr)
	t.Logf("relay and agents up in %s", time.Since(begin))
	ctx := onMachine(ctxT(t, 4*time.Minute), "workstation")
	api := pb.NewAgentServiceClient(w.client())
	isPrompt := func(ev *pb.AgentEvent) bool { return ev.GetPermissionRequest() != nil }
	// One after the other: each takes the fake model's next queued reply.
	for _, s := range []struct {
		name, prompt string
		reply        fakeapi.Reply
		until        func(*pb.AgentEvent) bool
	}{
		{"Explain the parser", "How does the parser handle nested blocks?", fakeapi.Reply{Text: screenshotAnswer}, isTurnComplete},
		{"Release notes", "Draft the release notes for 0.4", fakeapi.Reply{Text: "Here is a draft:\n\n- **Web app**: phones and laptops, with push notifications.\n- **Web API**: REST and WebSocket on the relay and the agent."}, isTurnComplete},
		{"Add a marker file", "Add a marker file so the deploy script knows this checkout is ready", fakeapi.Reply{
			Text:    "I'll create the marker file with a shell command.",
			ToolUse: &fakeapi.ToolUse{Name: "Bash", Input: map[string]any{"command": fakeapi.ToolCommand, "description": "Create the marker file"}},
		}, isPrompt},
	} {
		dir := filepath.Join(ws.project, strings.ToLower(strings.ReplaceAll(s.name, " ", "-")))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		w.api.Enqueue(s.reply)
		st, err := api.StartSession(ctx, &pb.StartSessionRequest{WorkingDirectory: dir, Name: s.name,
			Message: &pb.UserMessage{Content: s.prompt}})
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := followSession(t, ctx, api, st.Session.Id).next(ctx, 0, s.until); err != nil {
			t.Fatalf("session %q: %v", s.name, err)
		}
	}
	t.Logf("sessions ready in %s", time.Since(begin))
	// make test takes the phone's light screens only: they all render.
	outDir, looks := os.Getenv("BETCODE_SCREENSHOTS_DIR"), 24
	params := map[string]any{"machine": "name-workstation", "sessionName": "Add a marker file", "outDir": outDir,
		"prompt": "Find why the nightly build is slow and fix it"}
	if outDir == "" {
		params["outDir"], params["sizes"], params["schemes"] = t.TempDir(), []string{"phone"}, []string{"light"}
		looks = 6
	}
	out := browsertest.Run(t, browsertest.Options{
		Script: "screenshots.mjs", BaseURL: w.webURL(), Token: w.userToken("alice"), ChromiumArgs: w.trustRelay(),
		Params: params,
	})
	var r struct {
		Shots  []string    `json:"shots"`
		Alerts []pageAlert `json:"alerts"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatal(err)
	}
	for _, a := range r.Alerts {
		t.Errorf("the app showed an error: %q (at %s)", a.Text, a.URL)
	}
	if len(r.Shots) != looks {
		t.Errorf("%d screenshots, want %d (6 screens in each size and theme)", len(r.Shots), looks)
	}
	for _, p := range r.Shots {
		b, err := os.ReadFile(p)
		if err != nil || !bytes.HasPrefix(b, []byte("\x89PNG")) {
			t.Errorf("%s is not a PNG: %v", p, err)
		}
	}
	t.Logf("%d screenshots in %s", len(r.Shots), params["outDir"])
}

// screenshotAnswer is a reply with the markdown the conversation renders.
const screenshotAnswer = "The parser keeps a **stack of open blocks**:\n\n" +
	"1. An opening fence pushes a block.\n2. A closing fence pops it, and the block becomes a child of the one below.\n" +
	"3. At the end of input, blocks still open are an error.\n\n" +
	"```go\nfunc (p *parser) close() error {\n\tif len(p.stack) == 0 {\n\t\treturn errUnbalanced\n\t}\n\tp.stack = p.stack[:len(p.stack)-1]\n\treturn nil\n}\n```\n\n" +
	"See `parser_test.go` for the nested cases."
