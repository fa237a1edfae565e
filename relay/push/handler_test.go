package push

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/betcode-dev/betcode/relay/internal/grpcerr"
	"github.com/betcode-dev/betcode/relay/store/storetest"
	"github.com/betcode-dev/betcode/shared/authtoken"
)

// call makes one request to h and returns the status and decoded JSON
// body (nil when empty).
func call(t *testing.T, h http.Handler, method, path, token, body string) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	r := httptest.NewRequestWithContext(t.Context(), method, path, rd)
	r.RemoteAddr = "127.0.0.1:5555"
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	r.Header.Set("User-Agent", "Mozilla/5.0 (Android 15; Pixel 8)")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	var out map[string]any
	if w.Body.Len() > 0 {
		if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil {
			t.Fatalf("%s %s: body %q is not JSON: %v", method, path, w.Body, err)
		}
		if ct := w.Header().Get("Content-Type"); ct != "application/json" {
			t.Errorf("%s %s: Content-Type %q", method, path, ct)
		}
	}
	return w.Code, out
}

func TestHandler(t *testing.T) {
	backends(t, func(t *testing.T, open opener) {
		e := newEnv(t, open)
		h := e.svc.Handler()
		bob := storetest.UserToken(t, e.st, "bob")
		ps := e.push.Subscribe(t)
		defer noSecretsLogged(t, ps)
		unknown, err := authtoken.New(authtoken.Client)
		if err != nil {
			t.Fatal(err)
		}
		subBody := `{"endpoint":"` + ps.Endpoint + `","keys":{"p256dh":"` + ps.P256dh + `","auth":"` + ps.Auth + `"}}`

		code, created := call(t, h, "POST", "/api/push/subscriptions", e.token, subBody)
		if code != http.StatusCreated || created["id"] == "" || created["endpointHost"] != strings.TrimPrefix(e.push.URL, "http://") ||
			created["name"] != "Mozilla/5.0 (Android 15; Pixel 8)" || created["createdAt"] == "" || created["lastStatus"] != nil {
			t.Fatalf("POST subscription = %d %v", code, created)
		}
		for _, secret := range []string{ps.P256dh, ps.Auth, ps.Endpoint} {
			if b, _ := json.Marshal(created); strings.Contains(string(b), secret) {
				t.Errorf("the answer shows a secret of the subscription: %s", b)
			}
		}
		id := created["id"].(string)

		tests := []struct {
			name, method, path, token, body string
			status                          int
			code                            string // the error's code; "" for success
		}{
			{"no token", "GET", "/api/push", "", "", 401, "UNAUTHENTICATED"},
			{"malformed token", "GET", "/api/push", "nope", "", 401, "UNAUTHENTICATED"},
			{"unknown token", "POST", "/api/push/test", unknown, "", 401, "UNAUTHENTICATED"},
			{"another user's subscription", "DELETE", "/api/push/subscriptions/" + id, bob, "", 404, CodeSubscriptionNotFound},
			{"unknown subscription", "DELETE", "/api/push/subscriptions/ps_nope", e.token, "", 404, CodeSubscriptionNotFound},
			{"malformed JSON", "POST", "/api/push/subscriptions", e.token, "{", 400, "INVALID_ARGUMENT"},
			{"not https", "POST", "/api/push/subscriptions", e.token, strings.Replace(subBody, e.push.URL, "http://push.example", 1), 400, "INVALID_ARGUMENT"},
			{"bad p256dh", "POST", "/api/push/subscriptions", e.token, strings.Replace(subBody, ps.P256dh, "AAAA", 1), 400, "INVALID_ARGUMENT"},
			{"bad auth", "POST", "/api/push/subscriptions", e.token, strings.Replace(subBody, ps.Auth, "AAAA", 1), 400, "INVALID_ARGUMENT"},
			{"unknown kind", "POST", "/api/push/subscriptions", e.token, strings.Replace(subBody, `}}`, `},"kinds":["everything"]}`, 1), 400, "INVALID_ARGUMENT"},
			{"unknown resource", "GET", "/api/push/nope", e.token, "", 404, "NOT_FOUND"},
			{"wrong method", "PUT", "/api/push/subscriptions", e.token, "", 404, "NOT_FOUND"},
		}
		for _, tt := range tests {
			code, body := call(t, h, tt.method, tt.path, tt.token, tt.body)
			if code != tt.status || body["code"] != tt.code || body["error"] == "" {
				t.Errorf("%s: %s %s = %d %v; want %d code %s", tt.name, tt.method, tt.path, code, body, tt.status, tt.code)
			}
		}

		code, got := call(t, h, "GET", "/api/push", e.token, "")
		_, key := e.svc.Info()
		subs, _ := got["subscriptions"].([]any)
		if code != 200 || got["enabled"] != true || got["vapidPublicKey"] != key || len(subs) != 1 || subs[0].(map[string]any)["id"] != id {
			t.Errorf("GET /api/push = %d %v; want enabled, the key and subscription %s", code, got, id)
		}
		if code, got := call(t, h, "GET", "/api/push", bob, ""); code != 200 || len(got["subscriptions"].([]any)) != 0 {
			t.Errorf("GET /api/push as bob = %d %v; want no subscriptions", code, got)
		}

		// The test notification reaches the subscription and its outcome
		// shows in the listing.
		if code, _ := call(t, h, "POST", "/api/push/test", e.token, ""); code != http.StatusAccepted {
			t.Errorf("POST /api/push/test = %d; want 202", code)
		}
		m := e.push.Next(t, 30*time.Second)
		e.waitDelivered(t, 1)
		var n Notification
		if err := json.Unmarshal(m.Payload, &n); err != nil || n.Type != KindTest {
			t.Errorf("test notification = %s, %v", m.Payload, err)
		}
		_, got = call(t, h, "GET", "/api/push", e.token, "")
		if s := got["subscriptions"].([]any)[0].(map[string]any); s["lastStatus"] != "sent" || s["lastAt"] == nil {
			t.Errorf("after the test subscription = %v; want lastStatus sent", s)
		}

		if code, body := call(t, h, "DELETE", "/api/push/subscriptions/"+id, e.token, ""); code != http.StatusNoContent || body != nil {
			t.Errorf("DELETE own subscription = %d %v; want 204", code, body)
		}

		// A relay without --push-subject reports push off and refuses
		// subscriptions.
		off := e.service(t, e.st, "").Handler()
		if code, got := call(t, off, "GET", "/api/push", e.token, ""); code != 200 || got["enabled"] != false || got["vapidPublicKey"] != "" {
			t.Errorf("disabled GET /api/push = %d %v", code, got)
		}
		if code, got := call(t, off, "POST", "/api/push/subscriptions", e.token, subBody); code != http.StatusConflict || got["code"] != CodePushDisabled {
			t.Errorf("disabled POST subscription = %d %v; want 409 %s", code, got, CodePushDisabled)
		}
	})
}

// refusingAuth answers every call with a gRPC status, as the relay's
// middleware does when it refuses one.
type refusingAuth struct {
	code       codes.Code
	betcode    string
	retryAfter string
}

func (a refusingAuth) Middleware(http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if a.retryAfter != "" {
			w.Header().Set("Retry-After", a.retryAfter)
		}
		grpcerr.Write(w, a.code, a.betcode, "refused: 100% sure, ünïcode", nil)
	})
}

func (refusingAuth) CanReach(context.Context, string, string, string) (bool, error) {
	return false, nil
}

// TestRefusals turns the middleware's gRPC refusals into the web API's
// JSON errors.
func TestRefusals(t *testing.T) {
	tests := []struct {
		name       string
		auth       refusingAuth
		status     int
		code       string
		retryAfter string
	}{
		{"rate limited", refusingAuth{codes.ResourceExhausted, "RATE_LIMITED", "3"}, 429, "RATE_LIMITED", "3"},
		{"store down", refusingAuth{code: codes.Unavailable}, 503, "UNAVAILABLE", ""},
		{"bad token", refusingAuth{code: codes.Unauthenticated}, 401, "UNAUTHENTICATED", ""},
		{"denied", refusingAuth{code: codes.PermissionDenied, betcode: "ACCESS_DENIED"}, 403, "ACCESS_DENIED", ""},
	}
	path := filepath.Join(t.TempDir(), "relay.db")
	st := openSQLite(t, path)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			svc, err := New(t.Context(), Options{Store: st, Auth: tt.auth, Log: testLog(t), Subject: "mailto:ops@example.com"})
			if err != nil {
				t.Fatal(err)
			}
			defer svc.Close()
			r := httptest.NewRequestWithContext(t.Context(), "GET", "/api/push", nil)
			w := httptest.NewRecorder()
			svc.Handler().ServeHTTP(w, r)
			var body map[string]string
			if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
				t.Fatalf("body %q: %v", w.Body, err)
			}
			if w.Code != tt.status || body["code"] != tt.code || body["error"] != "refused: 100% sure, ünïcode" || w.Header().Get("Retry-After") != tt.retryAfter {
				t.Errorf("= %d %v Retry-After %q; want %d %s %q", w.Code, body, w.Header().Get("Retry-After"), tt.status, tt.code, tt.retryAfter)
			}
		})
	}
}
