package push

import (
	"bytes"
	"context"
	"crypto/ecdh"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/betcode-dev/betcode/agent/pairing"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/webpush"
)

// browser is a push subscription's private half, as a browser keeps it.
type browser struct {
	key  *ecdh.PrivateKey
	auth []byte
	sub  Subscription
}

func newBrowser(t *testing.T, device, endpoint string) *browser {
	t.Helper()
	key, err := ecdh.P256().GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	auth := make([]byte, 16)
	rand.Read(auth)
	return &browser{key: key, auth: auth, sub: Subscription{DeviceID: device, Endpoint: endpoint,
		P256dh: base64.RawURLEncoding.EncodeToString(key.PublicKey().Bytes()), Auth: base64.RawURLEncoding.EncodeToString(auth)}}
}

// fakeSender records SendPush calls and answers from a script per
// endpoint (then 201).
type fakeSender struct {
	mu      sync.Mutex
	reqs    []*pb.SendPushRequest
	answers map[string][]any // endpoint -> *pb.SendPushResponse or error, in order
}

func (f *fakeSender) SendPush(_ context.Context, req *pb.SendPushRequest) (*pb.SendPushResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reqs = append(f.reqs, req)
	if a := f.answers[req.Endpoint]; len(a) > 0 {
		f.answers[req.Endpoint] = a[1:]
		if err, ok := a[0].(error); ok {
			return nil, err
		}
		return a[0].(*pb.SendPushResponse), nil
	}
	return &pb.SendPushResponse{Status: http.StatusCreated}, nil
}

func (f *fakeSender) sent() []*pb.SendPushRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*pb.SendPushRequest(nil), f.reqs...)
}

type fakeDevices []pairing.Device

func (d fakeDevices) List() []pairing.Device { return d }

// harness is a Notifier fed session updates by the test.
type harness struct {
	n         *Notifier
	store     *Store
	sender    *fakeSender
	updates   chan *pb.SessionUpdate
	delivered chan Notification
}

func newHarness(t *testing.T, devices fakeDevices) *harness {
	t.Helper()
	return newHarnessWith(t, devices, nil)
}

// newHarnessWith is newHarness with the Options changed by opts.
func newHarnessWith(t *testing.T, devices fakeDevices, opts func(*Options)) *harness {
	t.Helper()
	st, err := OpenStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{store: st, sender: &fakeSender{answers: map[string][]any{}}, updates: make(chan *pb.SessionUpdate),
		delivered: make(chan Notification, 10)}
	watch := func(ctx context.Context, send func(*pb.SessionUpdate) error) error {
		for {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case u := <-h.updates:
				if err := send(u); err != nil {
					return err
				}
			}
		}
	}
	opt := Options{MachineID: "m-1", Watch: watch, Store: st, Devices: devices, Sender: h.sender, RetryMin: time.Millisecond}
	if opts != nil {
		opts(&opt)
	}
	h.n, err = New(opt)
	if err != nil {
		t.Fatal(err)
	}
	h.n.delivered = func(n Notification) { h.delivered <- n }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.n.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return h
}

func (h *harness) waitDelivered(t *testing.T) Notification {
	t.Helper()
	select {
	case n := <-h.delivered:
		return n
	case <-time.After(10 * time.Second):
		t.Fatal("no notification delivered within 10s")
		return Notification{}
	}
}

func permissionUpdate(requestID string) *pb.SessionUpdate {
	input, _ := structpb.NewStruct(map[string]any{"command": "echo MARKER-42"})
	return &pb.SessionUpdate{
		Session: &pb.SessionSummary{Id: "s-1", Name: "fix the build"},
		Cause: &pb.AgentEvent{Event: &pb.AgentEvent_PermissionRequest{PermissionRequest: &pb.PermissionRequest{
			RequestId: requestID, ToolName: "Bash", Input: input}}},
	}
}

// withPending sets u's open prompts: permission requests of these ids.
func withPending(u *pb.SessionUpdate, ids ...string) *pb.SessionUpdate {
	u.Pending = nil
	for _, id := range ids {
		u.Pending = append(u.Pending, permissionUpdate(id).Cause)
	}
	return u
}

// TestNotifierSendsEncrypted: a permission request reaches every
// subscription of the paired devices, encrypted for each browser (the
// payload decrypts with its private key to the relay's JSON); a revoked
// device's subscription is dropped, not sent to; a repeated prompt is sent
// once.
func TestNotifierSendsEncrypted(t *testing.T) {
	paired := time.Now().Add(-time.Hour)
	h := newHarness(t, fakeDevices{
		{ID: "phone", PairedAt: paired},
		{ID: "laptop", PairedAt: paired},
		{ID: "stolen", PairedAt: paired, RevokedAt: time.Now()},
	})
	browsers := map[string]*browser{}
	for _, d := range []string{"phone", "laptop", "stolen"} {
		b := newBrowser(t, d, "https://push.example/"+d)
		sub, err := h.store.Add(b.sub)
		if err != nil {
			t.Fatal(err)
		}
		b.sub = sub
		browsers[b.sub.Endpoint] = b
	}
	h.updates <- permissionUpdate("r-1")
	h.waitDelivered(t)
	reqs := h.sender.sent()
	if len(reqs) != 2 {
		t.Fatalf("%d sends, want 2 (phone, laptop)", len(reqs))
	}
	want := Notification{Type: KindPermission, MachineID: "m-1", SessionID: "s-1", RequestID: "r-1",
		Title: "Bash wants to run", Body: "echo MARKER-42", Tag: "m-1/s-1/r-1", URL: "/#/m/m-1/s/s-1"}
	for _, req := range reqs {
		if bytes.Contains(req.Payload, []byte("MARKER-42")) {
			t.Fatal("the payload is in clear")
		}
		b := browsers[req.Endpoint]
		if b == nil || b.sub.DeviceID == "stolen" {
			t.Fatalf("sent to %s", req.Endpoint)
		}
		plain, err := webpush.Decrypt(req.Payload, b.key, b.auth)
		if err != nil {
			t.Fatal(err)
		}
		var got Notification
		if err := json.Unmarshal(plain, &got); err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Fatalf("payload %+v\nwant %+v", got, want)
		}
		if req.Urgency != "high" || req.TtlSeconds != 3600 || len(req.Topic) != 32 {
			t.Fatalf("request headers %q %d %q", req.Urgency, req.TtlSeconds, req.Topic)
		}
	}
	for _, s := range h.store.List() {
		if s.DeviceID == "stolen" {
			t.Fatal("the revoked device's subscription was kept")
		}
	}

	// The same prompt again (a snapshot after a restart of the watch) is
	// not sent twice; a new one is.
	h.updates <- &pb.SessionUpdate{Session: &pb.SessionSummary{Id: "s-1"}, Pending: []*pb.AgentEvent{permissionUpdate("r-1").Cause}}
	h.updates <- withPending(permissionUpdate("r-2"), "r-1", "r-2")
	if n := h.waitDelivered(t); n.RequestID != "r-2" {
		t.Fatalf("delivered %s, want r-2", n.RequestID)
	}
	if got := len(h.sender.sent()); got != 4 {
		t.Fatalf("%d sends, want 4", got)
	}
}

// TestNotifierGoneAndRetries: a subscription answered gone is dropped; a
// busy push service or an unreachable relay is tried again; a refusal is
// not.
func TestNotifierGoneAndRetries(t *testing.T) {
	h := newHarness(t, fakeDevices{{ID: "phone", PairedAt: time.Now().Add(-time.Hour)}})
	gone, busy, refused := newBrowser(t, "phone", "https://push.example/gone"), newBrowser(t, "phone", "https://push.example/busy"),
		newBrowser(t, "phone", "https://push.example/refused")
	for _, b := range []*browser{gone, busy, refused} {
		if _, err := h.store.Add(b.sub); err != nil {
			t.Fatal(err)
		}
	}
	h.sender.answers[gone.sub.Endpoint] = []any{&pb.SendPushResponse{Status: http.StatusGone, Gone: true}}
	h.sender.answers[busy.sub.Endpoint] = []any{&pb.SendPushResponse{Status: http.StatusServiceUnavailable},
		status.Error(codes.Unavailable, "not connected"), &pb.SendPushResponse{Status: http.StatusTooManyRequests}}
	h.sender.answers[refused.sub.Endpoint] = []any{status.Error(codes.InvalidArgument, "endpoint is not on a public address")}
	h.updates <- permissionUpdate("r-1")
	h.waitDelivered(t)
	count := map[string]int{}
	for _, r := range h.sender.sent() {
		count[r.Endpoint]++
	}
	if count[gone.sub.Endpoint] != 1 || count[busy.sub.Endpoint] != 4 || count[refused.sub.Endpoint] != 1 {
		t.Fatalf("sends per endpoint %v; want gone 1, busy 4 (three retries), refused 1", count)
	}
	for _, s := range h.store.List() {
		if s.Endpoint == gone.sub.Endpoint {
			t.Fatal("the gone subscription was kept")
		}
	}
	if len(h.store.List()) != 2 {
		t.Fatalf("%d subscriptions left, want 2", len(h.store.List()))
	}
}

// TestNotifierRepairedDevice: a device revoked and paired again does not
// get its earlier pairing's subscriptions back.
func TestNotifierRepairedDevice(t *testing.T) {
	devices := fakeDevices{{ID: "phone", PairedAt: time.Now().Add(time.Hour)}} // paired after the subscription
	h := newHarness(t, devices)
	if _, err := h.store.Add(newBrowser(t, "phone", "https://push.example/old").sub); err != nil {
		t.Fatal(err)
	}
	h.updates <- permissionUpdate("r-1")
	h.waitDelivered(t)
	if n := len(h.sender.sent()); n != 0 || len(h.store.List()) != 0 {
		t.Fatalf("%d sends, %d subscriptions; want none", n, len(h.store.List()))
	}
}

// TestStore: subscriptions per device, kept 0600 across a restart.
func TestStore(t *testing.T) {
	dir := t.TempDir()
	st, err := OpenStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	a, err := st.Add(Subscription{DeviceID: "phone", Endpoint: "https://push.example/1", P256dh: "k", Auth: "a"})
	if err != nil {
		t.Fatal(err)
	}
	// The same endpoint again replaces it.
	a2, err := st.Add(Subscription{DeviceID: "phone", Endpoint: "https://push.example/1", P256dh: "k2", Auth: "a"})
	if err != nil || a2.ID == a.ID || len(st.List()) != 1 {
		t.Fatalf("re-subscribe: %v, %d subscriptions", err, len(st.List()))
	}
	if err := st.Delete("laptop", a2.ID); err != ErrNotFound {
		t.Fatalf("another device deleting it: %v, want ErrNotFound", err)
	}
	fi, err := os.Stat(filepath.Join(dir, File))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("file mode %v, %v; want 0600", fi.Mode(), err)
	}
	st2, err := OpenStore(dir)
	if err != nil || len(st2.List()) != 1 || st2.List()[0].P256dh != "k2" {
		t.Fatalf("reopened: %v, %+v", err, st2.List())
	}
	if err := st2.Delete("phone", a2.ID); err != nil || len(st2.List()) != 0 {
		t.Fatalf("delete: %v", err)
	}
}

// TestHandler: a device adds, lists and deletes its own subscriptions; a
// caller that is no device, bad keys and another device's id are refused.
func TestHandler(t *testing.T) {
	st, err := OpenStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	h := NewHandler(st, func(r *http.Request) (string, bool) {
		d := r.Header.Get("X-Test-Device")
		return d, d != ""
	}, nil)
	b := newBrowser(t, "phone", "https://fcm.googleapis.com/fcm/send/abc")
	do := func(method, path, device, body string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(method, path, strings.NewReader(body))
		if device != "" {
			r.Header.Set("X-Test-Device", device)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	good := `{"endpoint":"` + b.sub.Endpoint + `","keys":{"p256dh":"` + b.sub.P256dh + `","auth":"` + b.sub.Auth + `"},"name":"Pixel","kinds":["permission_request"]}`
	if w := do("POST", "/push/subscriptions", "", good); w.Code != http.StatusUnauthorized {
		t.Fatalf("no device: %d", w.Code)
	}
	for name, body := range map[string]string{
		"bad p256dh":  `{"endpoint":"https://x.example/1","keys":{"p256dh":"AAAA","auth":"` + b.sub.Auth + `"}}`,
		"bad auth":    `{"endpoint":"https://x.example/1","keys":{"p256dh":"` + b.sub.P256dh + `","auth":"AAAA"}}`,
		"no endpoint": `{"keys":{"p256dh":"` + b.sub.P256dh + `","auth":"` + b.sub.Auth + `"}}`,
		"bad kind":    `{"endpoint":"https://x.example/1","keys":{"p256dh":"` + b.sub.P256dh + `","auth":"` + b.sub.Auth + `"},"kinds":["x"]}`,
		"not JSON":    `{`,
	} {
		if w := do("POST", "/push/subscriptions", "phone", body); w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), CodeInvalidArgument) {
			t.Errorf("%s: %d %s", name, w.Code, w.Body)
		}
	}
	w := do("POST", "/push/subscriptions", "phone", good)
	var got APISubscription
	if w.Code != http.StatusCreated || json.Unmarshal(w.Body.Bytes(), &got) != nil || got.EndpointHost != "fcm.googleapis.com" ||
		got.Name != "Pixel" || got.ID == "" || strings.Contains(w.Body.String(), b.sub.Auth) {
		t.Fatalf("POST: %d %s", w.Code, w.Body)
	}
	if subs := st.List(); len(subs) != 1 || subs[0].DeviceID != "phone" || subs[0].Auth != b.sub.Auth {
		t.Fatalf("stored %+v", subs)
	}
	if w := do("GET", "/push/subscriptions", "laptop", ""); w.Code != http.StatusOK || strings.Contains(w.Body.String(), got.ID) {
		t.Fatalf("another device's list: %d %s", w.Code, w.Body)
	}
	if w := do("DELETE", "/push/subscriptions/"+got.ID, "laptop", ""); w.Code != http.StatusNotFound {
		t.Fatalf("another device's DELETE: %d", w.Code)
	}
	if w := do("DELETE", "/push/subscriptions/"+got.ID, "phone", ""); w.Code != http.StatusNoContent || len(st.List()) != 0 {
		t.Fatalf("DELETE: %d", w.Code)
	}
}
