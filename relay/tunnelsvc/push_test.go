package tunnelsvc

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/betcode-dev/betcode/relay/internal/pushtest"
	"github.com/betcode-dev/betcode/relay/push"
	"github.com/betcode-dev/betcode/relay/registry"
	"github.com/betcode-dev/betcode/relay/store/sqlite"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/webpush"
)

// noAuth is push.Authenticator for a service whose web API is not used.
type noAuth struct{}

func (noAuth) Middleware(next http.Handler) http.Handler                      { return next }
func (noAuth) CanReach(context.Context, string, string, string) (bool, error) { return false, nil }

// newPushService is a tunnel service with a real push service on SQLite.
func newPushService(t *testing.T, allowPrivate bool) (*Service, *push.Service, *prometheus.Registry) {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "relay.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	reg := prometheus.NewRegistry()
	ps, err := push.New(ctx, push.Options{Store: st, Auth: noAuth{}, Registerer: reg, Subject: "mailto:ops@example.com",
		AllowPrivateEndpoints: allowPrivate, PruneInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ps.Close() })
	return &Service{Store: st, Registry: registry.New(), Log: slog.New(slog.DiscardHandler), Push: ps}, ps, reg
}

// TestSendPush: a machine's encrypted message reaches the push service
// as it is, with the relay's VAPID signature and the headers asked for; a
// gone subscription says so; only a machine may send, within its rate.
func TestSendPush(t *testing.T) {
	svc, ps, reg := newPushService(t, true)
	srv := pushtest.New(t)
	sub := srv.Subscribe(t)
	m1 := machineCtx(t, "m1")
	plain, _ := json.Marshal(map[string]string{"type": "permission_request", "title": "Bash wants to run"})
	body, err := webpush.Encrypt(webpush.Subscription{Endpoint: sub.Endpoint, P256dh: sub.P256dh, Auth: sub.Auth}, plain)
	if err != nil {
		t.Fatal(err)
	}
	req := &pb.SendPushRequest{Endpoint: sub.Endpoint, Payload: body, TtlSeconds: 3600, Urgency: "high", Topic: "abc_DEF-123"}

	resp, err := svc.SendPush(m1, req)
	if err != nil || resp.Status != http.StatusCreated || resp.Gone {
		t.Fatalf("SendPush = %v, %v; want 201", resp, err)
	}
	msg := srv.Next(t, 5*time.Second)
	_, vapidKey := ps.Info()
	if !bytes.Equal(msg.Payload, plain) || msg.TTL != "3600" || msg.Urgency != "high" || msg.Topic != "abc_DEF-123" ||
		msg.VAPID.PublicKey != vapidKey || msg.VAPID.Subject != "mailto:ops@example.com" {
		t.Fatalf("delivered %+v", msg)
	}

	srv.SetStatus(sub.ID, http.StatusGone)
	resp, err = svc.SendPush(m1, req)
	if err != nil || resp.Status != http.StatusGone || !resp.Gone {
		t.Fatalf("SendPush to a gone subscription = %v, %v; want 410, gone", resp, err)
	}
	if got := relayedSends(t, reg, "sent"); got != 1 {
		t.Errorf("relayed sent = %v, want 1", got)
	}
	if got := relayedSends(t, reg, "expired"); got != 1 {
		t.Errorf("relayed expired = %v, want 1", got)
	}

	t.Run("refused", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			ctx  context.Context
			req  *pb.SendPushRequest
			code codes.Code
		}{
			{"no machine certificate", context.Background(), req, codes.Unauthenticated},
			{"oversize", m1, &pb.SendPushRequest{Endpoint: sub.Endpoint, Payload: make([]byte, 4097)}, codes.InvalidArgument},
			{"empty", m1, &pb.SendPushRequest{Endpoint: sub.Endpoint}, codes.InvalidArgument},
			{"not a URL", m1, &pb.SendPushRequest{Endpoint: "push", Payload: body}, codes.InvalidArgument},
			{"bad urgency", m1, &pb.SendPushRequest{Endpoint: sub.Endpoint, Payload: body, Urgency: "now"}, codes.InvalidArgument},
			{"bad topic", m1, &pb.SendPushRequest{Endpoint: sub.Endpoint, Payload: body, Topic: "a b"}, codes.InvalidArgument},
		} {
			t.Run(tc.name, func(t *testing.T) {
				posts := srv.Posts()
				if _, err := svc.SendPush(tc.ctx, tc.req); status.Code(err) != tc.code {
					t.Fatalf("SendPush: %v, want %v", err, tc.code)
				}
				if srv.Posts() != posts {
					t.Fatal("a refused message reached the push service")
				}
			})
		}
	})
}

// relayedSends is betcode_relay_push_sends_total{kind="relayed",outcome}.
func relayedSends(t *testing.T, reg *prometheus.Registry, outcome string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var v float64
	for _, mf := range mfs {
		if mf.GetName() != "betcode_relay_push_sends_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["kind"] == push.KindRelayed && labels["outcome"] == outcome {
				v = m.GetCounter().GetValue()
			}
		}
	}
	return v
}

// TestSendPushPrivateEndpoints: by default the relay posts only to https
// endpoints on public addresses.
func TestSendPushPrivateEndpoints(t *testing.T) {
	svc, _, _ := newPushService(t, false)
	srv := pushtest.New(t)
	sub := srv.Subscribe(t)
	m1 := machineCtx(t, "m1")
	for _, ep := range []string{sub.Endpoint, "https://10.1.2.3/push/x", "https://192.168.1.1/x", "https://127.0.0.1:443/x",
		"https://[::1]/x", "https://localhost/x", "https://169.254.169.254/latest", "https://[fd00::1]/x"} {
		t.Run(ep, func(t *testing.T) {
			_, err := svc.SendPush(m1, &pb.SendPushRequest{Endpoint: ep, Payload: []byte("x")})
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "endpoint") {
				t.Fatalf("SendPush to %s: %v, want INVALID_ARGUMENT", ep, err)
			}
		})
	}
	if srv.Posts() != 0 {
		t.Fatal("the push service got a post")
	}
}

// TestSendPushRateLimit: a machine over its rate is refused; another
// machine is not.
func TestSendPushRateLimit(t *testing.T) {
	svc, _, _ := newPushService(t, true)
	svc.PushRate, svc.PushBurst = 0.001, 2
	srv := pushtest.New(t)
	sub := srv.Subscribe(t)
	body, err := webpush.Encrypt(webpush.Subscription{P256dh: sub.P256dh, Auth: sub.Auth}, []byte("{}"))
	if err != nil {
		t.Fatal(err)
	}
	req := &pb.SendPushRequest{Endpoint: sub.Endpoint, Payload: body}
	m1, m2 := machineCtx(t, "m1"), machineCtx(t, "m2")
	for range 2 {
		if _, err := svc.SendPush(m1, req); err != nil {
			t.Fatal(err)
		}
		srv.Next(t, 5*time.Second)
	}
	if _, err := svc.SendPush(m1, req); status.Code(err) != codes.ResourceExhausted || reasonOf(err) != CodePushRateLimit {
		t.Fatalf("third SendPush: %v, want RESOURCE_EXHAUSTED %s", err, CodePushRateLimit)
	}
	if _, err := svc.SendPush(m2, req); err != nil {
		t.Fatalf("another machine: %v", err)
	}
	srv.Next(t, 5*time.Second)
}
