package oidcsvc_test

import (
	"context"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/betcode-dev/betcode/relay/admin"
	"github.com/betcode-dev/betcode/relay/auth"
	"github.com/betcode-dev/betcode/relay/internal/oidctest"
	"github.com/betcode-dev/betcode/relay/oidcsvc"
	"github.com/betcode-dev/betcode/relay/store"
	"github.com/betcode-dev/betcode/relay/store/sqlite"
	"github.com/betcode-dev/betcode/shared/authtoken"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// fixture is a store with users and teams, and a Service trusting a real
// provider.
type fixture struct {
	st    store.Store
	idp   *oidctest.Provider
	svc   *oidcsvc.Service
	ctx   context.Context
	mu    sync.Mutex
	audit []store.AuditEvent // what the service sent to Options.Audit
}

const remote = "192.0.2.7:5555"

// newFixture makes a store and a Service for cfg; with idp, cfg trusts a
// new provider (f.idp) with oidctest.ClientID.
func newFixture(t *testing.T, cfg oidcsvc.Config, idp bool) *fixture {
	t.Helper()
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "relay.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	f := &fixture{st: st, ctx: auth.WithIdentity(t.Context(), auth.Identity{Remote: remote})}
	for _, u := range []store.User{
		{ID: "alice", Email: "alice@example.com"},
		{ID: "bob", Email: "bob@example.com"},
		{ID: "carol", Email: "carol@example.com"},
	} {
		if err := st.CreateUser(t.Context(), u); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.SetUserDisabled(t.Context(), "carol", true); err != nil {
		t.Fatal(err)
	}
	for _, team := range []string{"eng", "ops"} {
		if err := st.CreateTeam(t.Context(), store.Team{ID: team}); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.SetMember(t.Context(), store.Member{TeamID: "ops", UserID: "alice", Role: store.RoleAdmin}); err != nil {
		t.Fatal(err)
	}
	if idp {
		f.idp = oidctest.Start(t)
		cfg.Issuer, cfg.ClientID = f.idp.Issuer, oidctest.ClientID
	}
	f.svc, err = oidcsvc.New(cfg, oidcsvc.Options{Store: st, Ops: &admin.Ops{Store: st}, Audit: func(e store.AuditEvent) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.audit = append(f.audit, e)
	}})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fixture) refusals() []store.AuditEvent {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]store.AuditEvent(nil), f.audit...)
}

// TestExchange: a verified email becomes a client token of its user that
// the store knows; the groups claim adds memberships without demoting;
// every other token is refused with the right code, and audited.
func TestExchange(t *testing.T) {
	f := newFixture(t, oidcsvc.Config{GroupsClaim: "groups", TokenTTL: 48 * time.Hour}, true)
	t.Run("verified email", func(t *testing.T) {
		start := time.Now()
		id := f.idp.SignIDToken(t, map[string]any{"email": "Alice@Example.com", "email_verified": true, "groups": []string{"eng", "ops", "nope"}})
		resp, err := f.svc.ExchangeOIDCToken(f.ctx, &pb.ExchangeOIDCTokenRequest{IdToken: id, TokenName: "laptop"})
		if err != nil {
			t.Fatal(err)
		}
		if resp.UserId != "alice" || resp.Info.GetUserId() != "alice" || resp.Info.GetName() != "laptop" {
			t.Fatalf("response %+v", resp)
		}
		tok, err := f.st.TokenByHash(t.Context(), authtoken.Hash(resp.Token))
		if err != nil || tok.UserID != "alice" || tok.ID != resp.Info.GetId() || !tok.Live(time.Now()) {
			t.Fatalf("stored token %+v, %v", tok, err)
		}
		if exp := tok.ExpiresAt.Sub(start); exp < 48*time.Hour-time.Minute || exp > 48*time.Hour+time.Minute {
			t.Fatalf("token lives %s; want the configured 48h", exp)
		}
		ms, err := f.st.Memberships(t.Context(), "alice")
		if err != nil {
			t.Fatal(err)
		}
		roles := map[string]store.Role{}
		for _, m := range ms {
			roles[m.TeamID] = m.Role
		}
		if len(roles) != 2 || roles["eng"] != store.RoleMember || roles["ops"] != store.RoleAdmin {
			t.Fatalf("alice's teams %v; want eng as member (from the claim) and ops still admin", roles)
		}
		evs, err := f.st.ListAudit(t.Context(), store.AuditFilter{})
		if err != nil {
			t.Fatal(err)
		}
		var created, joined bool
		via := ", via OIDC from " + f.idp.Issuer
		for _, e := range evs {
			switch {
			case e.Action == admin.ActionTokenCreated:
				created = e.Actor == "alice" && e.Remote == remote && e.Outcome == admin.OutcomeOK && strings.HasSuffix(e.Detail, via)
			case e.Action == admin.ActionMemberAdded:
				joined = e.Actor == oidcsvc.SystemActor && e.Target == "alice" && strings.Contains(e.Detail, "team eng as member") && strings.HasSuffix(e.Detail, via)
			}
		}
		if !created || !joined {
			t.Fatalf("audit log %+v; want token.created by alice and team.member_added by oidc, via OIDC", evs)
		}
		// The same ID token again: refused, it was exchanged.
		_, err = f.svc.ExchangeOIDCToken(f.ctx, &pb.ExchangeOIDCTokenRequest{IdToken: id})
		if status.Code(err) != codes.Unauthenticated || !strings.Contains(status.Convert(err).Message(), "already exchanged") {
			t.Fatalf("replayed ID token: %v; want UNAUTHENTICATED", err)
		}
		// Signing in again changes no membership.
		id = f.idp.SignIDToken(t, map[string]any{"email": "alice@example.com", "email_verified": true, "groups": []string{"eng"}})
		if _, err := f.svc.ExchangeOIDCToken(f.ctx, &pb.ExchangeOIDCTokenRequest{IdToken: id}); err != nil {
			t.Fatal(err)
		}
		if evs2, _ := f.st.ListAudit(t.Context(), store.AuditFilter{}); countAction(evs2, admin.ActionMemberAdded) != 1 {
			t.Fatalf("a second sign-in added memberships again: %+v", evs2)
		}
	})

	other := oidctest.Start(t) // another provider: its keys are not the trusted one's
	tests := []struct {
		name    string
		token   func() string
		code    codes.Code
		message string
	}{
		{"garbage", func() string { return "not.a.jwt" }, codes.Unauthenticated, "the ID token was refused: malformed jwt"},
		{"another audience", func() string {
			return f.idp.SignIDToken(t, map[string]any{"aud": []string{oidctest.OtherClientID}, "azp": oidctest.OtherClientID, "email": "alice@example.com", "email_verified": true})
		}, codes.Unauthenticated, `expected audience "betcode"`},
		{"issued to another client among audiences", func() string {
			return f.idp.SignIDToken(t, map[string]any{"aud": []string{oidctest.OtherClientID, oidctest.ClientID}, "azp": oidctest.OtherClientID, "email": "alice@example.com", "email_verified": true})
		}, codes.Unauthenticated, `issued to client "other-app" (azp)`},
		{"expired", func() string {
			return f.idp.SignIDToken(t, map[string]any{"exp": time.Now().Add(-time.Minute).Unix(), "email": "alice@example.com", "email_verified": true})
		}, codes.Unauthenticated, "token is expired"},
		{"another issuer", func() string {
			return f.idp.SignIDToken(t, map[string]any{"iss": other.Issuer, "email": "alice@example.com", "email_verified": true})
		}, codes.Unauthenticated, "issued by a different provider"},
		{"another provider's key", func() string {
			return other.SignIDToken(t, map[string]any{"iss": f.idp.Issuer, "email": "alice@example.com", "email_verified": true})
		}, codes.Unauthenticated, "failed to verify signature"},
		{"unverified email", func() string {
			return f.idp.SignIDToken(t, map[string]any{"email": "alice@example.com", "email_verified": false})
		}, codes.PermissionDenied, "has not verified the email alice@example.com"},
		{"unknown email", func() string {
			return f.idp.SignIDToken(t, map[string]any{"email": "mallory@example.com", "email_verified": true})
		}, codes.PermissionDenied, "no BetCode user has the email mallory@example.com; ask an administrator to create one (betcode-relay admin user create NAME --email mallory@example.com)"},
		{"disabled user", func() string {
			return f.idp.SignIDToken(t, map[string]any{"email": "carol@example.com", "email_verified": true})
		}, codes.PermissionDenied, "carol (carol@example.com) is disabled"},
		{"bad claim type", func() string {
			return f.idp.SignIDToken(t, map[string]any{"email": "bob@example.com", "email_verified": "maybe"})
		}, codes.PermissionDenied, "claims cannot be used"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(f.refusals())
			tokens, _ := f.st.ListTokens(t.Context(), "")
			raw := tt.token()
			_, err := f.svc.ExchangeOIDCToken(f.ctx, &pb.ExchangeOIDCTokenRequest{IdToken: raw})
			if status.Code(err) != tt.code || !strings.Contains(status.Convert(err).Message(), tt.message) {
				t.Fatalf("got %v; want %s mentioning %q", err, tt.code, tt.message)
			}
			after, _ := f.st.ListTokens(t.Context(), "")
			if len(after) != len(tokens) {
				t.Fatal("a refused exchange created a token")
			}
			evs := f.refusals()
			if len(evs) != before+1 {
				t.Fatalf("audit events %+v; want one refusal more", evs)
			}
			e := evs[len(evs)-1]
			if e.Action != oidcsvc.ActionRefused || e.Remote != remote || e.Outcome != admin.OutcomeDenied || strings.Contains(e.Detail, raw) {
				t.Fatalf("refusal audited as %+v", e)
			}
		})
	}
	t.Run("empty", func(t *testing.T) {
		_, err := f.svc.ExchangeOIDCToken(f.ctx, &pb.ExchangeOIDCTokenRequest{})
		if status.Code(err) != codes.InvalidArgument {
			t.Fatalf("got %v; want INVALID_ARGUMENT", err)
		}
	})
	t.Run("too long", func(t *testing.T) {
		_, err := f.svc.ExchangeOIDCToken(f.ctx, &pb.ExchangeOIDCTokenRequest{IdToken: strings.Repeat("a", 65<<10)})
		if status.Code(err) != codes.InvalidArgument {
			t.Fatalf("got %v; want INVALID_ARGUMENT", err)
		}
	})
	t.Run("bad token name", func(t *testing.T) {
		id := f.idp.SignIDToken(t, map[string]any{"email": "bob@example.com", "email_verified": true})
		_, err := f.svc.ExchangeOIDCToken(f.ctx, &pb.ExchangeOIDCTokenRequest{IdToken: id, TokenName: "tab\there"})
		if status.Code(err) != codes.InvalidArgument {
			t.Fatalf("got %v; want INVALID_ARGUMENT", err)
		}
	})
	t.Run("config", func(t *testing.T) {
		c, err := f.svc.GetOIDCConfig(f.ctx, &pb.GetOIDCConfigRequest{})
		if err != nil || !c.Enabled || c.Issuer != f.idp.Issuer || c.ClientId != oidctest.ClientID || strings.Join(c.Scopes, " ") != "openid email profile" {
			t.Fatalf("GetOIDCConfig = %+v, %v", c, err)
		}
	})
}

func countAction(evs []store.AuditEvent, action string) int {
	n := 0
	for _, e := range evs {
		if e.Action == action {
			n++
		}
	}
	return n
}

// TestDisabled: without configuration the service says so and refuses.
func TestDisabled(t *testing.T) {
	f := newFixture(t, oidcsvc.Config{}, false)
	c, err := f.svc.GetOIDCConfig(f.ctx, &pb.GetOIDCConfigRequest{})
	if err != nil || c.Enabled || c.Issuer != "" {
		t.Fatalf("GetOIDCConfig = %+v, %v; want enabled = false", c, err)
	}
	_, err = f.svc.ExchangeOIDCToken(f.ctx, &pb.ExchangeOIDCTokenRequest{IdToken: "x"})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(status.Convert(err).Message(), "this relay has no OIDC sign-in; log in with a token") {
		t.Fatalf("got %v; want FAILED_PRECONDITION", err)
	}
}

// TestDiscoveryRetried: a relay whose provider is down starts, answers
// UNAVAILABLE (not a refusal of the caller's token), keeps the failure for
// RetryAfter, then discovers the provider once it is up.
func TestDiscoveryRetried(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	// The provider's address is held, but it answers nothing until up.
	gate := &gatedListener{Listener: ln}
	idp := oidctest.Serve(t, gate)
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "relay.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.CreateUser(t.Context(), store.User{ID: "alice", Email: "alice@example.com"}); err != nil {
		t.Fatal(err)
	}
	svc, err := oidcsvc.New(oidcsvc.Config{Issuer: "http://" + addr, ClientID: oidctest.ClientID, RetryAfter: time.Minute},
		oidcsvc.Options{Store: st, Ops: &admin.Ops{Store: st}, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	exchange := func(id string) error {
		_, err := svc.ExchangeOIDCToken(t.Context(), &pb.ExchangeOIDCTokenRequest{IdToken: id})
		return err
	}
	if err := exchange("a.b.c"); status.Code(err) != codes.Unavailable || !strings.Contains(status.Convert(err).Message(), "cannot reach its identity provider") {
		t.Fatalf("provider down: %v; want UNAVAILABLE", err)
	}
	gate.up.Store(true)
	id := idp.SignIDToken(t, map[string]any{"email": "alice@example.com", "email_verified": true, "exp": now.Add(time.Hour).Unix()})
	if err := exchange(id); status.Code(err) != codes.Unavailable {
		t.Fatalf("within RetryAfter: %v; want the remembered UNAVAILABLE", err)
	}
	mu.Lock()
	now = now.Add(time.Minute)
	mu.Unlock()
	if err := exchange(id); err != nil {
		t.Fatalf("after RetryAfter, with the provider up: %v", err)
	}
}

// gatedListener closes every connection it accepts until up: a provider
// that is down, at an address that stays reserved.
type gatedListener struct {
	net.Listener
	up atomic.Bool
}

func (g *gatedListener) Accept() (net.Conn, error) {
	for {
		c, err := g.Listener.Accept()
		if err != nil || g.up.Load() {
			return c, err
		}
		c.Close()
	}
}
