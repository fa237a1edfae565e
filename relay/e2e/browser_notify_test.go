package e2e

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/betcode-dev/betcode/relay/internal/pgtest"
	"github.com/betcode-dev/betcode/relay/internal/pushtest"
	"github.com/betcode-dev/betcode/shared/browsertest"
	"github.com/betcode-dev/betcode/shared/fakeapi"
	"github.com/betcode-dev/betcode/shared/promtest"
)

// pushMailbox hands each subscription's messages, as the loopback push
// service decrypted them, to the browser script (GET /next?sub=ID: the
// payload, or 204 after a while without one), and keeps them all for the
// test.
type pushMailbox struct {
	mu   sync.Mutex
	subs map[string]chan []byte
	all  []pushtest.Message
}

func newPushMailbox(t *testing.T, srv *pushtest.Server, subs ...*pushtest.Subscription) (*pushMailbox, string) {
	m := &pushMailbox{subs: map[string]chan []byte{}}
	for _, s := range subs {
		m.subs[s.ID] = make(chan []byte, 100)
	}
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				return
			case msg := <-srv.Messages():
				m.mu.Lock()
				m.all = append(m.all, msg)
				ch := m.subs[msg.Subscription]
				m.mu.Unlock()
				if ch != nil {
					ch <- msg.Payload
				}
			}
		}
	}()
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ch := m.subs[r.URL.Query().Get("sub")]
		if ch == nil {
			http.NotFound(w, r)
			return
		}
		t := time.NewTimer(20 * time.Second)
		defer t.Stop()
		select {
		case p := <-ch:
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(p)
		case <-t.C:
			w.WriteHeader(http.StatusNoContent)
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() {
		hs.Close()
		close(done)
	})
	return m, hs.URL
}

// messages returns the messages delivered to subscription id, decoded.
func (m *pushMailbox) messages(id string) []map[string]string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []map[string]string
	for _, msg := range m.all {
		if msg.Subscription != id {
			continue
		}
		var n map[string]string
		_ = json.Unmarshal(msg.Payload, &n)
		out = append(out, n)
	}
	return out
}

// notifyResult is what web/e2e/notify.mjs reports.
type notifyResult struct {
	Steps               []string `json:"steps"`
	Tag                 string   `json:"tag"`
	PageTag             string   `json:"pageTag"`
	TimeoutTag          string   `json:"timeoutTag"`
	AnsweredFrom        string   `json:"answeredFrom"`
	NotificationFailure string   `json:"notificationFailure"`
	ClearMs             int      `json:"clearMs"`
	AShownAfter         int      `json:"aShownAfter"`
	PageClearMs         int      `json:"pageClearMs"`
	PageAClosed         bool     `json:"pageAClosed"`
	TimeoutShownMs      struct {
		A int `json:"a"`
		B int `json:"b"`
	} `json:"timeoutShownMs"`
	DeliveredVia []string `json:"deliveredVia"`
	Redelivered  struct {
		A []string `json:"a"`
		B []string `json:"b"`
	} `json:"redelivered"`
}

// TestBrowserNotificationsClear is issue 24's "notifications that clear"
// in real browsers: two chromium contexts are two phones of one user,
// paired with one machine (--relay-e2e=required) through a real relay and
// subscribed to its push notifications (the loopback push service stands
// in for the browser vendor's: the relay POSTs it the machine's encrypted
// messages, it decrypts them with the subscription's keys and the script
// delivers them to the phone's service worker). A real Claude CLI's tool
// asks permission; both phones show it; phone A answers from its
// notification; phone B's notification is withdrawn within 2 s by the
// machine's "resolved" message, and phone A gets none. A second prompt,
// answered in phone A's page, clears phone B's notification the same way
// (and the app closes A's own). A third prompt nobody answers times out,
// and both phones' notifications clear. The
// relay's log never holds a prompt's tag: it saw sizes and times only.
func TestBrowserNotificationsClear(t *testing.T) {
	browsertest.Require(t)
	w := newWorldOf(t, &world{t: t, pki: t.TempDir(), dataDir: t.TempDir(), dbURL: pgtest.URL(t),
		extraArgs: []string{"--push-subject", "mailto:ops@example.com", "--push-private-endpoints"}})
	srv := pushtest.New(t)
	subA, subB := srv.Subscribe(t), srv.Subscribe(t)
	mail, mailURL := newPushMailbox(t, srv, subA, subB)
	const permissionTimeout = 12 * time.Second
	a := w.startE2EAgent("notify-m", "--permission-timeout", permissionTimeout.String(), "--metrics-listen", "127.0.0.1:0")
	ctx := ctxT(t, 4*time.Minute)

	codeA, pairA, outA := pairCode(ctx, t, a)
	codeB, pairB, outB := pairCode(ctx, t, a)
	want := fakeapi.ToolResultPrefix + "done"
	sub := func(s *pushtest.Subscription) map[string]string {
		return map[string]string{"id": s.ID, "endpoint": s.Endpoint, "p256dh": s.P256dh, "auth": s.Auth}
	}
	out := browsertest.Run(t, browsertest.Options{
		Script: "notify.mjs", BaseURL: w.webURL(), ChromiumArgs: w.trustRelay(), Timeout: 3 * time.Minute,
		Params: map[string]any{
			"codes": []string{codeA, codeB}, "subs": []map[string]string{sub(subA), sub(subB)}, "mailbox": mailURL,
			"machineId": "notify-m", "cwd": a.project, "prompt": "please RUNTOOL now", "want": want,
			"timeoutPath": true, "permissionTimeoutMs": permissionTimeout.Milliseconds(),
		},
	})
	var r notifyResult
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatal(err)
	}
	t.Logf("notify.mjs: answered from the %s%s; phone B's notification withdrawn %d ms after the answer (%d ms after an answer in A's page); the timed-out prompt's shown for %d / %d ms (timeout %v); pushes delivered by %q (delivered again after leaving no trace in 5 s: A %q, B %q)",
		r.AnsweredFrom, map[bool]string{true: " (the notification failed: " + r.NotificationFailure + ")"}[r.NotificationFailure != ""],
		r.ClearMs, r.PageClearMs, r.TimeoutShownMs.A, r.TimeoutShownMs.B, permissionTimeout, r.DeliveredVia, r.Redelivered.A, r.Redelivered.B)
	for _, p := range []struct {
		cmd interface{ Wait() error }
		out *lockedBuffer
	}{{pairA, outA}, {pairB, outB}} {
		if err := p.cmd.Wait(); err != nil || !strings.Contains(p.out.String(), "paired: Phone") {
			t.Errorf("betcode-agent pair: %v\n%s", err, p.out.String())
		}
	}

	if wantSteps := []string{"paired", "notified", "cleared", "page", "timeout"}; strings.Join(r.Steps, ",") != strings.Join(wantSteps, ",") {
		t.Errorf("steps %q, want %q", r.Steps, wantSteps)
	}
	if r.ClearMs <= 0 || r.ClearMs > 2000 {
		t.Errorf("phone B's notification was withdrawn %d ms after the answer, want within 2000 ms", r.ClearMs)
	}
	if r.PageClearMs <= 0 || r.PageClearMs > 2000 {
		t.Errorf("phone B's notification was withdrawn %d ms after the answer in A's page, want within 2000 ms", r.PageClearMs)
	}
	if !r.PageAClosed {
		t.Error("phone A still shows the notification of the prompt it answered in the page")
	}
	count := func(msgs []map[string]string, typ, tag string) int {
		n := 0
		for _, m := range msgs {
			if m["type"] == typ && m["tag"] == tag {
				n++
			}
		}
		return n
	}
	ma, mb := mail.messages(subA.ID), mail.messages(subB.ID)
	for name, msgs := range map[string][]map[string]string{"A": ma, "B": mb} {
		if count(msgs, "permission_request", r.Tag) != 1 || count(msgs, "permission_request", r.PageTag) != 1 ||
			count(msgs, "permission_request", r.TimeoutTag) != 1 {
			t.Errorf("phone %s got %v, want each prompt once", name, msgs)
		}
		if count(msgs, "resolved", r.TimeoutTag) != 1 {
			t.Errorf("phone %s got %v, want the timed-out prompt's resolution once", name, msgs)
		}
	}
	for _, tag := range []string{r.Tag, r.PageTag} {
		if n := count(ma, "resolved", tag); n != 0 {
			t.Errorf("phone A, which answered %s, got %d resolutions of it, want none", tag, n)
		}
		if n := count(mb, "resolved", tag); n != 1 {
			t.Errorf("phone B got %d resolutions of the answered prompt %s, want 1", n, tag)
		}
	}
	if r.AnsweredFrom == "notification" && r.AShownAfter != 0 {
		t.Errorf("phone A still shows the notification it answered from")
	}
	// The machine counted its sends (each once the relay answered, just
	// after the push service had the message): four resolutions, B's of
	// the two answered prompts and A's and B's of the timed-out one, and
	// six prompts.
	m := regexp.MustCompile(`agent metrics.* addr=(\S+)`).FindStringSubmatch(a.proc.Log())
	if m == nil {
		t.Fatal("the agent logged no metrics address")
	}
	var metrics []byte
	if !eventually(10*time.Second, 50*time.Millisecond, func() bool {
		metrics = promtest.Scrape(t, "http://"+m[1]+"/metrics")
		r, _ := promtest.Value(metrics, "betcode_agent_push_sends_total", "kind", "resolved", "outcome", "sent")
		p, _ := promtest.Value(metrics, "betcode_agent_push_sends_total", "kind", "permission_request", "outcome", "sent")
		return r == 4 && p == 6
	}) {
		t.Errorf("betcode_agent_push_sends_total: want resolved/sent 4 and permission_request/sent 6:\n%s", metrics)
	}

	// The relay carried opaque bytes: no prompt of the machine's (its
	// request id) in its log, nor a subscription's keys, which went to the
	// machine inside the channels: it could neither read a resolution nor
	// forge one.
	relayLog := w.relay.Log()
	for _, tag := range []string{r.Tag, r.PageTag, r.TimeoutTag} {
		if parts := strings.SplitN(tag, "/", 3); len(parts) == 3 && strings.Contains(relayLog, parts[2]) {
			t.Errorf("the relay's log holds the request id of %s", tag)
		}
	}
	for _, s := range []*pushtest.Subscription{subA, subB} {
		if strings.Contains(relayLog, s.Auth) || strings.Contains(relayLog, s.P256dh) {
			t.Errorf("the relay's log holds the keys of subscription %s", s.ID)
		}
	}
}
