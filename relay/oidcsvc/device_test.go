package oidcsvc_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/betcode-dev/betcode/relay/admin"
	"github.com/betcode-dev/betcode/relay/internal/oidctest"
	"github.com/betcode-dev/betcode/relay/oidcsvc"
	"github.com/betcode-dev/betcode/relay/store"
	"github.com/betcode-dev/betcode/relay/store/sqlite"
	"github.com/betcode-dev/betcode/shared/authtoken"
)

// deviceFixture is the web device flow of a Service trusting a real
// provider, served over HTTP, with a clock the test moves forward.
type deviceFixture struct {
	st    store.Store
	idp   *oidctest.Provider
	srv   *httptest.Server
	ahead atomic.Int64 // nanoseconds the service's clock is ahead of time.Now
}

func newDeviceFixture(t *testing.T, enabled bool) *deviceFixture {
	return newKeyedDeviceFixture(t, enabled, nil)
}

// newKeyedDeviceFixture is newDeviceFixture whose service seals flows
// with key (see Options.FlowKey).
func newKeyedDeviceFixture(t *testing.T, enabled bool, key []byte) *deviceFixture {
	t.Helper()
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "relay.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.CreateUser(t.Context(), store.User{ID: "alice", Email: "alice@example.com"}); err != nil {
		t.Fatal(err)
	}
	f := &deviceFixture{st: st}
	var cfg oidcsvc.Config
	if enabled {
		f.idp = oidctest.Start(t, oidctest.User{Username: "alice", Password: "alice-pw", Email: "alice@example.com", EmailVerified: true})
		cfg = oidcsvc.Config{Issuer: f.idp.Issuer, ClientID: oidctest.ClientID}
	}
	f.serve(t, cfg, key)
	return f
}

// serve starts f's service for cfg on f's store, sealing flows with key.
func (f *deviceFixture) serve(t *testing.T, cfg oidcsvc.Config, key []byte) {
	t.Helper()
	svc, err := oidcsvc.New(cfg, oidcsvc.Options{Store: f.st, Ops: &admin.Ops{Store: f.st}, FlowKey: key,
		Now: func() time.Time { return time.Now().Add(time.Duration(f.ahead.Load())) }})
	if err != nil {
		t.Fatal(err)
	}
	f.srv = httptest.NewServer(svc.Handler())
	t.Cleanup(f.srv.Close)
}

// replica is another relay replica beside f: the same store and provider,
// its own service and memory, flows sealed with key.
func (f *deviceFixture) replica(t *testing.T, key []byte) *deviceFixture {
	t.Helper()
	r := &deviceFixture{st: f.st, idp: f.idp}
	r.serve(t, oidcsvc.Config{Issuer: f.idp.Issuer, ClientID: oidctest.ClientID}, key)
	return r
}

// TestDeviceFlowAcrossReplicas: replicas sharing the flow key take over
// each other's sign-ins (a phone's polls may reach any replica behind the
// Service); a replica with another key, or a tampered flow id, answers 404;
// a flow that ended stays ended on the replica that ended it.
func TestDeviceFlowAcrossReplicas(t *testing.T) {
	key := bytes.Repeat([]byte{7}, 32)
	a := newKeyedDeviceFixture(t, true, key)
	b := a.replica(t, key)
	other := a.replica(t, bytes.Repeat([]byte{8}, 32))
	ds := a.start(t)
	st, out := b.poll(t, ds.Flow)
	want(t, "first poll, on another replica", st, out, http.StatusAccepted, "status", "pending")
	st, out = other.poll(t, ds.Flow)
	want(t, "poll on a replica with another key", st, out, http.StatusNotFound, "code", "NOT_FOUND")
	tampered := []byte(ds.Flow)
	tampered[len(tampered)/2] ^= 1
	st, out = b.poll(t, string(tampered))
	want(t, "poll of a tampered flow id", st, out, http.StatusNotFound, "code", "NOT_FOUND")
	if err := oidctest.SignIn(t.Context(), ds.VerificationURI, ds.UserCode, "alice", "alice-pw", true); err != nil {
		t.Fatal(err)
	}
	b.wait(ds)
	st, out = b.poll(t, ds.Flow)
	if st != http.StatusOK || out["userId"] != "alice" {
		t.Fatalf("poll after approval, on the other replica = %d %v", st, out)
	}
	b.wait(ds)
	st, out = b.poll(t, ds.Flow)
	want(t, "poll of a finished flow", st, out, http.StatusNotFound, "code", "NOT_FOUND")
}

// post calls path with body and decodes the JSON answer.
func (f *deviceFixture) post(t *testing.T, path string, body any) (int, map[string]any) {
	t.Helper()
	b, _ := json.Marshal(body)
	resp, err := http.Post(f.srv.URL+path, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("POST %s: %d, %v", path, resp.StatusCode, err)
	}
	return resp.StatusCode, out
}

// start starts a flow and returns its answer.
func (f *deviceFixture) start(t *testing.T) oidcsvc.DeviceStart {
	t.Helper()
	st, out := f.post(t, "/api/oidc/device", nil)
	var ds oidcsvc.DeviceStart
	b, _ := json.Marshal(out)
	_ = json.Unmarshal(b, &ds)
	if st != http.StatusOK || ds.Flow == "" || ds.UserCode == "" || ds.VerificationURI == "" || ds.Interval <= 0 || ds.ExpiresIn <= 0 {
		t.Fatalf("start = %d %v", st, out)
	}
	return ds
}

func (f *deviceFixture) poll(t *testing.T, flow string) (int, map[string]any) {
	t.Helper()
	return f.post(t, "/api/oidc/device/poll", map[string]string{"flow": flow})
}

// wait moves the service's clock past a flow's polling interval, as a
// client waiting the interval would.
func (f *deviceFixture) wait(ds oidcsvc.DeviceStart) {
	f.ahead.Add(int64(time.Duration(ds.Interval)*time.Second + time.Millisecond))
}

func want(t *testing.T, what string, st int, out map[string]any, wantStatus int, key, value string) {
	t.Helper()
	if st != wantStatus || out[key] != value {
		t.Fatalf("%s = %d %v; want %d with %s %q", what, st, out, wantStatus, key, value)
	}
}

// TestDeviceFlow: the relay runs the device flow for a browser against a
// real provider: pending until the person approves on the provider's
// pages, polls faster than the interval slowed down, then a client token
// named "web" of the user with the ID token's email; a denial is 403, an
// expired flow 410, an unknown or spent one 404, a relay without OIDC 404.
func TestDeviceFlow(t *testing.T) {
	f := newDeviceFixture(t, true)
	t.Run("approved", func(t *testing.T) {
		ds := f.start(t)
		st, out := f.poll(t, ds.Flow)
		want(t, "first poll", st, out, http.StatusAccepted, "status", "pending")
		st, out = f.poll(t, ds.Flow)
		want(t, "poll within the interval", st, out, http.StatusAccepted, "status", "slow_down")
		uri := ds.VerificationURI
		if err := oidctest.SignIn(t.Context(), uri, ds.UserCode, "alice", "alice-pw", true); err != nil {
			t.Fatal(err)
		}
		f.wait(ds)
		st, out = f.poll(t, ds.Flow)
		if st != http.StatusOK || out["userId"] != "alice" || out["expiresAt"] == "" {
			t.Fatalf("poll after approval = %d %v", st, out)
		}
		secret, _ := out["token"].(string)
		tok, err := f.st.TokenByHash(t.Context(), authtoken.Hash(secret))
		if err != nil || tok.UserID != "alice" || tok.Name != oidcsvc.WebTokenName || !tok.Live(time.Now()) {
			t.Fatalf("stored token %+v, %v", tok, err)
		}
		f.wait(ds)
		st, out = f.poll(t, ds.Flow)
		want(t, "poll of a finished flow", st, out, http.StatusNotFound, "code", "NOT_FOUND")
	})
	t.Run("denied", func(t *testing.T) {
		ds := f.start(t)
		if err := oidctest.SignIn(t.Context(), ds.VerificationURI, ds.UserCode, "alice", "alice-pw", false); err != nil {
			t.Fatal(err)
		}
		st, out := f.poll(t, ds.Flow)
		want(t, "poll after denial", st, out, http.StatusForbidden, "code", oidcsvc.CodeAccessDenied)
	})
	t.Run("expired", func(t *testing.T) {
		ds := f.start(t)
		f.ahead.Add(int64(time.Duration(ds.ExpiresIn)*time.Second + time.Second))
		st, out := f.poll(t, ds.Flow)
		want(t, "poll after expiry", st, out, http.StatusGone, "code", oidcsvc.CodeExpiredToken)
		st, out = f.poll(t, ds.Flow)
		want(t, "poll of a forgotten flow", st, out, http.StatusNotFound, "code", "NOT_FOUND")
	})
	t.Run("unknown flow", func(t *testing.T) {
		st, out := f.poll(t, "no-such-flow")
		want(t, "poll", st, out, http.StatusNotFound, "code", "NOT_FOUND")
		st, out = f.post(t, "/api/oidc/device/poll", map[string]string{})
		want(t, "poll without a flow", st, out, http.StatusBadRequest, "code", "INVALID_ARGUMENT")
	})
	t.Run("OIDC disabled", func(t *testing.T) {
		off := newDeviceFixture(t, false)
		st, out := off.post(t, "/api/oidc/device", nil)
		want(t, "start", st, out, http.StatusNotFound, "code", "NOT_FOUND")
		st, out = off.poll(t, "x")
		want(t, "poll", st, out, http.StatusNotFound, "code", "NOT_FOUND")
	})
}
