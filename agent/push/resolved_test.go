package push

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/e2ee"
	"github.com/betcode-dev/betcode/shared/webpush"
)

// decryptFor decrypts the message req carries for browser b.
func decryptFor(t *testing.T, b *browser, req *pb.SendPushRequest) Notification {
	t.Helper()
	plain, err := webpush.Decrypt(req.Payload, b.key, b.auth)
	if err != nil {
		t.Fatal(err)
	}
	var n Notification
	if err := json.Unmarshal(plain, &n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestNotifierResolved: a prompt answered by one device is withdrawn from
// the others' browsers by an encrypted "resolved" message with the
// prompt's tag and topic, and none goes to the device that answered; a
// prompt that times out (no device answered) or whose session is deleted
// is withdrawn everywhere; a subscription that did not get the prompt
// (it wants other kinds) gets no resolution either.
func TestNotifierResolved(t *testing.T) {
	paired := time.Now().Add(-time.Hour)
	answers := NewAnswers()
	reg := prometheus.NewRegistry()
	h := newHarnessWith(t, fakeDevices{
		{ID: "phone", Fingerprint: "fp-phone", PairedAt: paired},
		{ID: "laptop", Fingerprint: "fp-laptop", PairedAt: paired},
		{ID: "watch", Fingerprint: "fp-watch", PairedAt: paired},
	}, func(o *Options) { o.Answers, o.Registerer = answers, reg })
	browsers := map[string]*browser{}
	for _, d := range []string{"phone", "laptop", "watch"} {
		b := newBrowser(t, d, "https://push.example/"+d)
		if d == "watch" {
			b.sub.Kinds = []string{KindTurnComplete}
		}
		sub, err := h.store.Add(b.sub)
		if err != nil {
			t.Fatal(err)
		}
		b.sub = sub
		browsers[sub.Endpoint] = b
	}
	// sendsOf returns the sends after the first skip, by device.
	sendsOf := func(skip int) map[string]*pb.SendPushRequest {
		out := map[string]*pb.SendPushRequest{}
		for _, r := range h.sender.sent()[skip:] {
			out[browsers[r.Endpoint].sub.DeviceID] = r
		}
		return out
	}
	status := func(st pb.AgentStatus) *pb.SessionUpdate {
		return &pb.SessionUpdate{Session: &pb.SessionSummary{Id: "s-1"},
			Cause: &pb.AgentEvent{Event: &pb.AgentEvent_StatusChange{StatusChange: &pb.StatusChange{Status: st}}}}
	}

	// Answered on the phone.
	h.updates <- withPending(permissionUpdate("r-1"), "r-1")
	h.waitDelivered(t)
	prompt := sendsOf(0)
	if len(prompt) != 2 || prompt["phone"] == nil || prompt["laptop"] == nil {
		t.Fatalf("the prompt went to %v, want phone and laptop", prompt)
	}
	answers.Note("r-1", "fp-phone")
	h.updates <- status(pb.AgentStatus_EXECUTING_TOOL) // the prompt left the open list
	if n := h.waitDelivered(t); n.Type != KindResolved {
		t.Fatalf("delivered %+v, want the resolution", n)
	}
	res := sendsOf(2)
	if len(res) != 1 || res["laptop"] == nil {
		t.Fatalf("the resolution went to %v, want the laptop only", res)
	}
	got := decryptFor(t, browsers[res["laptop"].Endpoint], res["laptop"])
	want := Notification{Type: KindResolved, MachineID: "m-1", SessionID: "s-1", RequestID: "r-1", Tag: "m-1/s-1/r-1"}
	if got != want {
		t.Fatalf("resolution %+v, want %+v", got, want)
	}
	if r := res["laptop"]; r.Topic != prompt["laptop"].Topic || r.Urgency != "high" || bytes.Contains(r.Payload, []byte("m-1/s-1")) {
		t.Fatalf("resolution topic %q urgency %q (prompt's topic %q), or its payload in clear", r.Topic, r.Urgency, prompt["laptop"].Topic)
	}
	// The same state again resolves nothing more.
	h.updates <- status(pb.AgentStatus_THINKING)

	// Timed out: nobody answered, every browser that got it is told.
	h.updates <- withPending(permissionUpdate("r-2"), "r-2")
	h.waitDelivered(t)
	h.updates <- status(pb.AgentStatus_THINKING)
	h.waitDelivered(t)
	if res := sendsOf(5); len(res) != 2 || res["phone"] == nil || res["laptop"] == nil ||
		decryptFor(t, browsers[res["phone"].Endpoint], res["phone"]).RequestID != "r-2" {
		t.Fatalf("the timed-out prompt's resolution went to %v, want phone and laptop", res)
	}

	// The session deleted with a prompt open.
	h.updates <- withPending(permissionUpdate("r-3"), "r-3")
	h.waitDelivered(t)
	h.updates <- &pb.SessionUpdate{Session: &pb.SessionSummary{Id: "s-1"}, Deleted: true}
	if n := h.waitDelivered(t); n.Type != KindResolved || n.RequestID != "r-3" {
		t.Fatalf("delivered %+v, want r-3's resolution", n)
	}
	if n := len(h.sender.sent()); n != 11 {
		t.Fatalf("%d sends, want 11 (2 per prompt, 1+2+2 resolutions)", n)
	}
	if v := testutil.ToFloat64(h.n.metrics.sends.WithLabelValues(KindResolved, OutcomeSent)); v != 5 {
		t.Errorf("betcode_agent_push_sends_total{kind=resolved,outcome=sent} = %v, want 5", v)
	}
}

// TestAnswersInterceptors: the device answering through its channel (an
// e2ee.Addr peer) is noted, unless the call fails; a local client is not.
func TestAnswersInterceptors(t *testing.T) {
	a := NewAnswers()
	device := peer.NewContext(context.Background(), &peer.Peer{Addr: e2ee.Addr{Role: e2ee.RoleDevice, Fingerprint: "fp-a"}})
	local := peer.NewContext(context.Background(), &peer.Peer{Addr: &net.UnixAddr{Name: "/run/agent.sock", Net: "unix"}})
	ok := func(context.Context, any) (any, error) { return &pb.AnswerPermissionResponse{}, nil }
	stale := func(context.Context, any) (any, error) { return nil, status.Error(codes.FailedPrecondition, "stale") }
	perm := func(id string) *pb.AnswerPermissionRequest {
		return &pb.AnswerPermissionRequest{SessionId: "s", Response: &pb.PermissionResponse{RequestId: id}}
	}
	if _, err := a.UnaryInterceptor(device, perm("r-1"), nil, ok); err != nil {
		t.Fatal(err)
	}
	if got := a.Take("r-1"); !got["fp-a"] || len(got) != 1 {
		t.Fatalf("r-1 answered by %v, want fp-a", got)
	}
	if got := a.Take("r-1"); len(got) != 0 {
		t.Fatalf("taken twice: %v", got)
	}
	_, _ = a.UnaryInterceptor(device, perm("r-2"), nil, stale)
	_, _ = a.UnaryInterceptor(local, perm("r-3"), nil, ok)
	// A peer that is not a paired device's channel (the machine's own
	// address, as a relay-made call could claim) is no answerer either.
	machine := peer.NewContext(context.Background(), &peer.Peer{Addr: e2ee.Addr{Role: e2ee.RoleMachine, Fingerprint: "fp-m"}})
	_, _ = a.UnaryInterceptor(machine, perm("r-5"), nil, ok)
	if got := a.Take("r-5"); len(got) != 0 {
		t.Fatalf("a machine-role peer noted as answerer: %v", got)
	}
	_, _ = a.UnaryInterceptor(device, &pb.AnswerQuestionRequest{Response: &pb.UserQuestionResponse{QuestionId: "q-1"}}, nil, ok)
	if r2, r3, q1 := a.Take("r-2"), a.Take("r-3"), a.Take("q-1"); len(r2) != 0 || len(r3) != 0 || !q1["fp-a"] {
		t.Fatalf("refused answer noted %v, local answer noted %v, question answer noted %v", r2, r3, q1)
	}

	// A Converse stream's answers.
	ss := &fakeStream{ctx: device, msgs: []*pb.AgentRequest{
		{Request: &pb.AgentRequest_Permission{Permission: &pb.PermissionResponse{RequestId: "r-4"}}},
		{Request: &pb.AgentRequest_QuestionResponse{QuestionResponse: &pb.UserQuestionResponse{QuestionId: "q-2"}}},
	}}
	err := a.StreamInterceptor(nil, ss, nil, func(_ any, s grpc.ServerStream) error {
		for {
			if err := s.RecvMsg(new(pb.AgentRequest)); err != nil {
				return err
			}
		}
	})
	if !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	if r4, q2 := a.Take("r-4"), a.Take("q-2"); !r4["fp-a"] || !q2["fp-a"] {
		t.Fatalf("stream answers noted %v %v", r4, q2)
	}
}

type fakeStream struct {
	ctx  context.Context
	msgs []*pb.AgentRequest
}

func (s *fakeStream) Context() context.Context     { return s.ctx }
func (s *fakeStream) SetHeader(metadata.MD) error  { return nil }
func (s *fakeStream) SendHeader(metadata.MD) error { return nil }
func (s *fakeStream) SetTrailer(metadata.MD)       {}
func (s *fakeStream) SendMsg(any) error            { return nil }
func (s *fakeStream) RecvMsg(m any) error {
	if len(s.msgs) == 0 {
		return io.EOF
	}
	m.(*pb.AgentRequest).Request = s.msgs[0].Request
	s.msgs = s.msgs[1:]
	return nil
}

// httpSender delivers as the relay's SendRelayed does, to an httptest
// push service: the body as it is, the push service's status back, 404
// and 410 as gone, a failed connection as UNAVAILABLE.
type httpSender struct{ client *http.Client }

func (s httpSender) SendPush(ctx context.Context, req *pb.SendPushRequest) (*pb.SendPushResponse, error) {
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, req.Endpoint, bytes.NewReader(req.Payload))
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	hr.Header.Set("Content-Encoding", "aes128gcm")
	resp, err := s.client.Do(hr)
	if err != nil {
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	resp.Body.Close()
	return &pb.SendPushResponse{Status: int32(resp.StatusCode), Gone: resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusGone}, nil
}

// TestDeliveryAgainstPushService: against a push service (httptest), a
// message answered 503, 429 and a dropped connection is tried again with
// growing waits until taken; one answered 410 is not retried and its
// subscription is dropped; one refused (400) is given up at once; the
// counters say so.
func TestDeliveryAgainstPushService(t *testing.T) {
	const retryMin = 40 * time.Millisecond
	var mu sync.Mutex
	arrivals := map[string][]time.Time{}
	script := map[string][]int{"/flaky": {503, 429, -1, 201}, "/gone": {410}, "/bad": {400}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		arrivals[r.URL.Path] = append(arrivals[r.URL.Path], time.Now())
		code := 201
		if s := script[r.URL.Path]; len(s) > 0 {
			code, script[r.URL.Path] = s[0], s[1:]
		}
		mu.Unlock()
		if len(body) == 0 || r.Header.Get("Content-Encoding") != "aes128gcm" {
			code = 400
		}
		if code == -1 { // a network error: the connection dropped
			hj, _ := w.(http.Hijacker)
			c, _, _ := hj.Hijack()
			c.Close()
			return
		}
		w.WriteHeader(code)
	}))
	defer srv.Close()
	reg := prometheus.NewRegistry()
	h := newHarnessWith(t, fakeDevices{{ID: "phone", PairedAt: time.Now().Add(-time.Hour)}}, func(o *Options) {
		o.Sender, o.RetryMin, o.Retries, o.Registerer = httpSender{client: srv.Client()}, retryMin, 5, reg
	})
	for _, p := range []string{"/flaky", "/gone", "/bad"} {
		if _, err := h.store.Add(newBrowser(t, "phone", srv.URL+p).sub); err != nil {
			t.Fatal(err)
		}
	}
	h.updates <- withPending(permissionUpdate("r-1"), "r-1")
	h.waitDelivered(t)

	mu.Lock()
	defer mu.Unlock()
	flaky := arrivals["/flaky"]
	if len(flaky) != 4 || len(arrivals["/gone"]) != 1 || len(arrivals["/bad"]) != 1 {
		t.Fatalf("attempts: flaky %d, gone %d, bad %d; want 4, 1, 1", len(flaky), len(arrivals["/gone"]), len(arrivals["/bad"]))
	}
	// Exponential backoff (randomized by ±50 %): the n-th wait is at least
	// half of retryMin·1.5ⁿ.
	lower := retryMin / 2
	for i := 1; i < len(flaky); i++ {
		if gap := flaky[i].Sub(flaky[i-1]); gap < lower {
			t.Errorf("wait %d was %v, want at least %v", i, gap, lower)
		}
		lower = lower * 3 / 2
	}
	t.Logf("waits between attempts: %v, %v, %v", flaky[1].Sub(flaky[0]), flaky[2].Sub(flaky[1]), flaky[3].Sub(flaky[2]))
	for _, s := range h.store.List() {
		if strings.HasSuffix(s.Endpoint, "/gone") {
			t.Error("the gone subscription was kept")
		}
	}
	for outcome, want := range map[string]float64{OutcomeSent: 1, OutcomeRetried: 3, OutcomeGone: 1, OutcomeFailed: 1} {
		if v := testutil.ToFloat64(h.n.metrics.sends.WithLabelValues(KindPermission, outcome)); v != want {
			t.Errorf("betcode_agent_push_sends_total{kind=permission_request,outcome=%s} = %v, want %v", outcome, v, want)
		}
	}
	if n, err := testutil.GatherAndCount(reg, "betcode_agent_push_sends_total"); err != nil || n != 4 {
		t.Errorf("registered series: %d, %v; want 4", n, err)
	}
}

// TestNotifierResolvesAfterRestart: a prompt notified before the agent
// stopped (its CLI went with it) is withdrawn by the first snapshot after
// the restart, from OpenFile, which keeps no prompt's text.
func TestNotifierResolvesAfterRestart(t *testing.T) {
	devices := fakeDevices{{ID: "phone", Fingerprint: "fp-phone", PairedAt: time.Now().Add(-time.Hour)}}
	file := filepath.Join(t.TempDir(), OpenFile)
	opts := func(o *Options) { o.OpenFile = file }
	before := newHarnessWith(t, devices, opts)
	b := newBrowser(t, "phone", "https://push.example/phone")
	if _, err := before.store.Add(b.sub); err != nil {
		t.Fatal(err)
	}
	before.updates <- withPending(permissionUpdate("r-1"), "r-1")
	before.waitDelivered(t)
	// The update after the delivery is handled once the file holds r-1.
	before.updates <- withPending(&pb.SessionUpdate{Session: &pb.SessionSummary{Id: "s-1"}}, "r-1")
	saved, err := os.ReadFile(file)
	if err != nil || !bytes.Contains(saved, []byte(`"requestId":"r-1"`)) || bytes.Contains(saved, []byte("MARKER-42")) {
		t.Fatalf("%s: %v %s; want r-1 without the prompt's text", OpenFile, err, saved)
	}

	after := newHarnessWith(t, devices, opts)
	if _, err := after.store.Add(b.sub); err != nil {
		t.Fatal(err)
	}
	after.updates <- &pb.SessionUpdate{Session: &pb.SessionSummary{Id: "s-1"}} // not loaded: no open prompts
	after.updates <- &pb.SessionUpdate{SnapshotDone: true}
	n := after.waitDelivered(t)
	if n.Type != KindResolved || n.Tag != "m-1/s-1/r-1" {
		t.Fatalf("delivered %+v after the restart, want r-1's resolution", n)
	}
	if got := decryptFor(t, b, after.sender.sent()[0]); got.Type != KindResolved || got.RequestID != "r-1" {
		t.Fatalf("sent %+v", got)
	}
}
