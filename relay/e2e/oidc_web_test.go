package e2e

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/betcode-dev/betcode/relay/internal/oidctest"
	"github.com/betcode-dev/betcode/relay/store"
)

// deviceStart is the answer of POST /api/oidc/device.
type deviceStart struct {
	Flow                    string `json:"flow"`
	UserCode                string `json:"userCode"`
	VerificationURI         string `json:"verificationUri"`
	VerificationURIComplete string `json:"verificationUriComplete"`
	Interval                int    `json:"interval"`
	ExpiresIn               int    `json:"expiresIn"`
}

// devicePoll is any answer of POST /api/oidc/device/poll.
type devicePoll struct {
	Status    string `json:"status"`
	Token     string `json:"token"`
	UserID    string `json:"userId"`
	ExpiresAt string `json:"expiresAt"`
	Error     string `json:"error"`
	Code      string `json:"code"`
}

// TestOIDCWebSignIn: the web app's single sign-on through a real relay and
// a real provider. /api/info offers it; the relay starts the device flow,
// answers pending until the person approves on the provider's pages, then
// a client token that works on GET /api/me; a denial is 403; a relay
// without OIDC says no and answers 404. No token reaches the relay's log.
func TestOIDCWebSignIn(t *testing.T) {
	idp := oidctest.Start(t, oidctest.User{Username: "alice", Password: "alice-pw", Email: "alice@example.com", EmailVerified: true})
	w := newWorldOf(t, &world{t: t, pki: t.TempDir(), dataDir: t.TempDir(), extraArgs: []string{
		"--oidc-issuer", idp.Issuer, "--oidc-client-id", oidctest.ClientID,
	}})
	ctx := ctxT(t, 120*time.Second)
	if err := w.store().CreateUser(ctx, store.User{ID: "alice", Email: "alice@example.com"}); err != nil {
		t.Fatal(err)
	}
	anon := w.browser("")
	var info struct {
		OIDC bool `json:"oidc"`
	}
	if st := anon.do("GET", "/api/info", nil, &info); st != http.StatusOK || !info.OIDC {
		t.Fatalf("GET /api/info = %d, oidc %v; want true", st, info.OIDC)
	}
	start := func(t *testing.T) deviceStart {
		t.Helper()
		var ds deviceStart
		if st := anon.do("POST", "/api/oidc/device", nil, &ds); st != http.StatusOK || ds.Flow == "" || ds.UserCode == "" || ds.Interval <= 0 {
			t.Fatalf("POST /api/oidc/device = %d %+v", st, ds)
		}
		if !strings.Contains(ds.VerificationURIComplete, ds.UserCode) {
			t.Fatalf("verificationUriComplete %q does not carry the code %q", ds.VerificationURIComplete, ds.UserCode)
		}
		return ds
	}
	poll := func(flow string) (int, devicePoll) {
		var p devicePoll
		st := anon.do("POST", "/api/oidc/device/poll", map[string]string{"flow": flow}, &p)
		return st, p
	}

	t.Run("approved", func(t *testing.T) {
		ds := start(t)
		st, p := poll(ds.Flow)
		if st != http.StatusAccepted || p.Status != "pending" {
			t.Fatalf("first poll = %d %+v; want 202 pending", st, p)
		}
		// Polling again at once is too soon: the relay slows the client
		// down without asking the provider.
		if st, p := poll(ds.Flow); st != http.StatusAccepted || p.Status != "slow_down" {
			t.Fatalf("second poll = %d %+v; want 202 slow_down", st, p)
		}
		next := time.Now().Add(time.Duration(ds.Interval) * time.Second)
		if err := oidctest.SignIn(ctx, ds.VerificationURI, ds.UserCode, "alice", "alice-pw", true); err != nil {
			t.Fatal(err)
		}
		// The protocol's own deadline: the next poll may come an interval
		// after the last one.
		select {
		case <-time.After(time.Until(next) + 50*time.Millisecond):
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		}
		st, p = poll(ds.Flow)
		if st != http.StatusOK || p.Token == "" || p.UserID != "alice" || p.ExpiresAt == "" {
			t.Fatalf("poll after approval = %d %+v", st, p)
		}
		var me struct {
			UserID string `json:"userId"`
		}
		if st := w.browser(p.Token).do("GET", "/api/me", nil, &me); st != http.StatusOK || me.UserID != "alice" {
			t.Fatalf("GET /api/me with the web token = %d %+v", st, me)
		}
		if st, p := poll(ds.Flow); st != http.StatusNotFound || p.Code != "NOT_FOUND" {
			t.Fatalf("poll of the finished flow = %d %+v; want 404", st, p)
		}
		if strings.Contains(w.relay.Log(), p.Token[len(p.Token)-20:]) {
			t.Fatal("the web token is in the relay's log")
		}
	})
	t.Run("denied", func(t *testing.T) {
		ds := start(t)
		if err := oidctest.SignIn(ctx, ds.VerificationURI, ds.UserCode, "alice", "alice-pw", false); err != nil {
			t.Fatal(err)
		}
		if st, p := poll(ds.Flow); st != http.StatusForbidden || p.Code != "ACCESS_DENIED" {
			t.Fatalf("poll after denial = %d %+v; want 403 ACCESS_DENIED", st, p)
		}
	})
	t.Run("unknown flow", func(t *testing.T) {
		if st, p := poll("no-such-flow"); st != http.StatusNotFound || p.Code != "NOT_FOUND" {
			t.Fatalf("poll = %d %+v; want 404", st, p)
		}
	})
	t.Run("relay without OIDC", func(t *testing.T) {
		plain := newWorld(t, "")
		b := plain.browser("")
		info.OIDC = true
		if st := b.do("GET", "/api/info", nil, &info); st != http.StatusOK || info.OIDC {
			t.Fatalf("GET /api/info = %d, oidc %v; want false", st, info.OIDC)
		}
		var e devicePoll
		if st := b.do("POST", "/api/oidc/device", nil, &e); st != http.StatusNotFound || e.Code != "NOT_FOUND" {
			t.Fatalf("POST /api/oidc/device = %d %+v; want 404", st, e)
		}
	})
}
