package auth

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/betcode-dev/betcode/relay/store"
	"github.com/betcode-dev/betcode/relay/store/sqlite"
	"github.com/betcode-dev/betcode/relay/store/storetest"
	"github.com/betcode-dev/betcode/shared/authtoken"
)

func openStore(t *testing.T) store.Store { return openStoreTB(t) }

func openStoreTB(t testing.TB) store.Store {
	t.Helper()
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "relay.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func tokenID(tok string) string { return authtoken.ID(authtoken.Hash(tok)) }

func doCall(h http.Handler, token string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, "/betcode.v1.AgentService/ListSessions", nil)
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	return rec
}

func runAuth(t *testing.T, a *Authenticator) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); a.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case <-a.Ready():
	case <-time.After(10 * time.Second):
		t.Fatal("revocations not loaded")
	}
}

// TestRevocationEndsOpenCallInTrailers: a call open when its token is
// revoked ends UNAUTHENTICATED (in trailers, the response having started),
// and the next call with the token is refused; the cache never serves a
// revoked token after the change is seen.
func TestRevocationEndsOpenCallInTrailers(t *testing.T) {
	st := openStore(t)
	a := New(st, Options{})
	runAuth(t, a)
	tok := storetest.UserToken(t, st, "alice")
	started := make(chan struct{})
	h := a.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		close(started)
		<-r.Context().Done() // a long stream
	}))
	rec := httptest.NewRecorder()
	done := make(chan struct{})
	go func() {
		defer close(done)
		r := httptest.NewRequest(http.MethodPost, "/betcode.v1.AgentService/Converse", nil)
		r.Header.Set("Authorization", "Bearer "+tok)
		h.ServeHTTP(rec, r)
	}()
	<-started
	at := time.Now()
	if _, err := st.RevokeToken(t.Context(), tokenID(tok), at); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(time.Second):
		t.Fatal("the open call was not ended within 1s of the revocation")
	}
	t.Logf("ended %s after the revocation", time.Since(at))
	if got := rec.Header().Get(http.TrailerPrefix + "Grpc-Status"); got != "16" {
		t.Fatalf("trailer grpc-status = %q; want 16 (headers %v)", got, rec.Header())
	}
	if got := doCall(a.Middleware(http.NotFoundHandler()), tok).Header().Get("Grpc-Status"); got != "16" {
		t.Fatalf("a call with the revoked token: grpc-status %q", got)
	}
}

func TestCanReach(t *testing.T) {
	st := openStore(t)
	ctx := t.Context()
	for _, u := range []string{"alice", "bob", "carol"} {
		storetest.UserToken(t, st, u)
	}
	if err := st.CreateTeam(ctx, store.Team{ID: "eng"}); err != nil {
		t.Fatal(err)
	}
	if err := st.SetMember(ctx, store.Member{TeamID: "eng", UserID: "carol", Role: store.RoleMember}); err != nil {
		t.Fatal(err)
	}
	if err := st.SetUserDisabled(ctx, "bob", true); err != nil {
		t.Fatal(err)
	}
	a := New(st, Options{})
	tests := []struct {
		user, owner, team string
		want              bool
	}{
		{"alice", "alice", "", true},
		{"alice", "carol", "", false},
		{"carol", "alice", "eng", true},
		{"alice", "alice", "eng", false}, // enrolled by alice, owned by the team
		{"bob", "bob", "", false},        // disabled
		{"nobody", "nobody", "", false},
	}
	for _, tt := range tests {
		got, err := a.CanReach(ctx, tt.user, tt.owner, tt.team)
		if err != nil || got != tt.want {
			t.Errorf("CanReach(%s, owner %s, team %q) = %v, %v; want %v", tt.user, tt.owner, tt.team, got, err, tt.want)
		}
	}
}

func TestMalformedAndUnknownTokensAudited(t *testing.T) {
	st := openStore(t)
	a := New(st, Options{})
	runAuth(t, a)
	h := a.Middleware(http.NotFoundHandler())
	unknown, _ := authtoken.New(authtoken.Client)
	for _, tok := range []string{"", "nonsense", unknown} {
		rec := doCall(h, tok)
		if rec.Header().Get("Grpc-Status") != "16" {
			t.Fatalf("token %q: grpc-status %q", tok, rec.Header().Get("Grpc-Status"))
		}
	}
	a.FlushAudit(t.Context())
	evs, err := st.ListAudit(t.Context(), store.AuditFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 3 {
		t.Fatalf("audit events = %+v; want 3 refusals", evs)
	}
	for _, e := range evs {
		if e.Action != "auth.refused" || strings.Contains(e.Detail+e.Target, unknown) {
			t.Fatalf("audit event %+v", e)
		}
	}
}

// TestExpiryEndsOpenCall: a stream opened with a token that then expires
// ends UNAUTHENTICATED at the expiry.
func TestExpiryEndsOpenCall(t *testing.T) {
	st := openStore(t)
	if err := st.CreateUser(t.Context(), store.User{ID: "alice"}); err != nil {
		t.Fatal(err)
	}
	tok, _ := authtoken.New(authtoken.Client)
	h := authtoken.Hash(tok)
	exp := time.Now().Add(300 * time.Millisecond)
	if err := st.CreateToken(t.Context(), store.Token{ID: authtoken.ID(h), UserID: "alice", Hash: h, ExpiresAt: exp}); err != nil {
		t.Fatal(err)
	}
	a := New(st, Options{})
	rec := httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodPost, "/betcode.v1.AgentService/Converse", nil)
	r.Header.Set("Authorization", "Bearer "+tok)
	a.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
			t.Error("the call outlived its token by 10s")
		}
	})).ServeHTTP(rec, r)
	if time.Now().Before(exp) {
		t.Fatal("the call ended before the token expired")
	}
	if got := rec.Header().Get(http.TrailerPrefix + "Grpc-Status"); got != "16" {
		t.Fatalf("trailer grpc-status = %q; want 16", got)
	}
}

// TestOpenMethodsNeedNoToken: enrollment, OIDC sign-in and the health check
// reach their handler without a token (and carry the caller's address for
// the per-address limits); every other method, even of the same services,
// is refused.
func TestOpenMethodsNeedNoToken(t *testing.T) {
	st := openStore(t)
	a := New(st, Options{})
	runAuth(t, a)
	tests := []struct {
		path string
		open bool
	}{
		{"/betcode.v1.EnrollService/Enroll", true},
		{"/betcode.v1.OIDCService/GetOIDCConfig", true},
		{"/betcode.v1.OIDCService/ExchangeOIDCToken", true},
		{"/grpc.health.v1.Health/Check", true},
		{"/betcode.v1.EnrollService/RenewCertificate", false},
		{"/betcode.v1.OIDCService/Other", false},
		{"/betcode.v1.AdminService/CreateToken", false},
		{"/betcode.v1.MachineService/ListMachines", false},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			var got *Identity
			h := a.Middleware(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
				id, _ := FromContext(r.Context())
				got = &id
			}))
			r := httptest.NewRequest(http.MethodPost, tt.path, nil)
			r.RemoteAddr = "192.0.2.1:1234"
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, r)
			switch {
			case tt.open && (got == nil || got.UserID != "" || got.Remote != "192.0.2.1:1234"):
				t.Fatalf("open method: handler got identity %+v (grpc-status %q)", got, rec.Header().Get("Grpc-Status"))
			case !tt.open && (got != nil || rec.Header().Get("Grpc-Status") != "16"):
				t.Fatalf("closed method: handler reached (%v), grpc-status %q", got != nil, rec.Header().Get("Grpc-Status"))
			}
		})
	}
}
