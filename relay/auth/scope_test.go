package auth

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/betcode-dev/betcode/relay/pki"
	"github.com/betcode-dev/betcode/relay/store"
	"github.com/betcode-dev/betcode/shared/authtoken"
)

// scopedToken stores a token of alice scoped to machine with scope.
func scopedToken(t *testing.T, st store.Store, machine, scope string, exp time.Time) string {
	t.Helper()
	tok, err := authtoken.New(authtoken.Client)
	if err != nil {
		t.Fatal(err)
	}
	h := authtoken.Hash(tok)
	if err := st.CreateToken(t.Context(), store.Token{ID: authtoken.ID(h), UserID: "alice", Name: scope, Hash: h, MachineID: machine,
		Scope: scope, ExpiresAt: exp}); err != nil {
		t.Fatal(err)
	}
	return tok
}

// answer is a refused call's status as the recorder holds it.
type answer struct {
	code, msg, reason string // reason: the ErrorInfo's (domain betcode.dev)
}

func answerOf(t *testing.T, h http.Header) answer {
	t.Helper()
	a := answer{code: h.Get("Grpc-Status")}
	a.msg, _ = url.PathUnescape(h.Get("Grpc-Message"))
	if d := h.Get("Grpc-Status-Details-Bin"); d != "" {
		b, err := base64.RawStdEncoding.DecodeString(d)
		if err != nil {
			t.Fatalf("grpc-status-details-bin: %v", err)
		}
		var p spb.Status
		if err := proto.Unmarshal(b, &p); err != nil {
			t.Fatal(err)
		}
		for _, d := range status.FromProto(&p).Details() {
			if info, ok := d.(*errdetails.ErrorInfo); ok && info.Domain == "betcode.dev" {
				a.reason = info.Reason
			}
		}
	}
	return a
}

// scopeHarness is an Authenticator over a store where alice (an
// administrator) owns machines m-1 and m-2, and a handler that records what
// it admitted.
type scopeHarness struct {
	st   store.Store
	a    *Authenticator
	h    http.Handler
	mu   sync.Mutex
	seen []Identity
}

func newScopeHarness(t *testing.T, opt Options) *scopeHarness {
	t.Helper()
	st := openStore(t)
	if err := st.CreateUser(t.Context(), store.User{ID: "alice", Admin: true}); err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"m-1", "m-2"} {
		if err := st.UpsertMachine(t.Context(), store.Machine{ID: m, OwnerID: "alice"}); err != nil {
			t.Fatal(err)
		}
	}
	s := &scopeHarness{st: st, a: New(st, opt)}
	runAuth(t, s.a)
	s.h = s.a.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, _ := FromContext(r.Context())
		s.mu.Lock()
		s.seen = append(s.seen, id)
		s.mu.Unlock()
	}))
	return s
}

// call makes one call with tok to path and returns the refusal (zero when
// admitted) and the identity admitted.
func (s *scopeHarness) call(t *testing.T, tok, path string) (answer, Identity) {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, path, nil)
	r.Header.Set("Authorization", "Bearer "+tok)
	s.mu.Lock()
	s.seen = nil
	s.mu.Unlock()
	rec := httptest.NewRecorder()
	s.h.ServeHTTP(rec, r)
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.seen) == 1 {
		return answer{}, s.seen[0]
	}
	return answerOf(t, rec.Header()), Identity{}
}

// TestScopedTokens: a device token calls ChannelService's Open and Pair and
// the health check; a pairing ticket Pair only, once; everything else —
// the relay's own services, an agent service in clear, the web API, an open
// method — is refused PERMISSION_DENIED / TOKEN_SCOPE, and audited.
func TestScopedTokens(t *testing.T) {
	s := newScopeHarness(t, Options{})
	device := scopedToken(t, s.st, "m-1", store.ScopeDevice, time.Time{})
	ticket := scopedToken(t, s.st, "m-1", store.ScopePair, time.Now().Add(10*time.Minute))
	expired := scopedToken(t, s.st, "m-1", store.ScopePair, time.Now().Add(-time.Second))
	scoped := answer{"7", "this token is scoped to machine m-1: it opens end-to-end channels to that machine only", CodeTokenScope}
	spent := answer{code: "16", msg: ticketRefusal}

	for _, tc := range []struct {
		name, tok, path string
		want            answer // zero: admitted
	}{
		{"device opens a channel", device, "/betcode.v1.ChannelService/Open", answer{}},
		{"device pairs again", device, "/betcode.v1.ChannelService/Pair", answer{}},
		{"device delivers a sealed envelope", device, "/betcode.v1.ChannelService/Deliver", answer{}},
		{"device, health check", device, "/grpc.health.v1.Health/Check", answer{}},
		{"device, health watch", device, "/grpc.health.v1.Health/Watch", scoped},
		{"device, another ChannelService method", device, "/betcode.v1.ChannelService/Other", scoped},
		{"device, an agent service in clear", device, "/betcode.v1.AgentService/ListSessions", scoped},
		{"device, DeviceService", device, "/betcode.v1.DeviceService/ListDevices", scoped},
		{"device, MachineService", device, "/betcode.v1.MachineService/ListMachines", scoped},
		{"device, SwitchMachine", device, "/betcode.v1.MachineService/SwitchMachine", scoped},
		{"device, AdminService (its owner is an admin)", device, "/betcode.v1.AdminService/CreateToken", scoped},
		{"device, TunnelService", device, "/betcode.v1.TunnelService/IssueDeviceToken", scoped},
		{"device, an open method", device, "/betcode.v1.EnrollService/Enroll", scoped},
		{"device, OIDC exchange", device, "/betcode.v1.OIDCService/ExchangeOIDCToken", scoped},
		{"device, reflection", device, "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo", scoped},
		{"device, the web API", device, "/api/sessions", scoped},
		{"ticket, Open", ticket, "/betcode.v1.ChannelService/Open", scoped},
		{"ticket, Deliver", ticket, "/betcode.v1.ChannelService/Deliver", scoped},
		{"ticket, an agent service", ticket, "/betcode.v1.AgentService/ListSessions", scoped},
		{"ticket, health check (does not spend it)", ticket, "/grpc.health.v1.Health/Check", answer{}},
		{"ticket pairs", ticket, "/betcode.v1.ChannelService/Pair", answer{}},
		{"ticket pairs twice", ticket, "/betcode.v1.ChannelService/Pair", spent},
		{"spent ticket, anything", ticket, "/betcode.v1.AgentService/ListSessions", spent},
		{"expired ticket", expired, "/betcode.v1.ChannelService/Pair", spent},
	} {
		got, id := s.call(t, tc.tok, tc.path)
		if got != tc.want {
			t.Errorf("%s: answered %+v, want %+v", tc.name, got, tc.want)
			continue
		}
		if tc.want == (answer{}) && (id.ScopeMachine != "m-1" || id.Scope == "" || id.Admin || id.TokenID != tokenID(tc.tok)) {
			t.Errorf("%s: admitted as %+v, want scoped to m-1, not an administrator", tc.name, id)
		}
	}
	s.a.FlushAudit(t.Context())
	events, err := s.st.ListAudit(t.Context(), store.AuditFilter{})
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, e := range events {
		count[e.Action]++
		if strings.Contains(e.Detail, device) || strings.Contains(e.Detail, ticket) || strings.Contains(e.Target, device) {
			t.Errorf("audit event %+v holds a token", e)
		}
	}
	if count["access.denied"] != 15 || count["pairing.ticket_used"] != 1 || count["auth.refused"] != 3 {
		t.Errorf("audit actions %v; want 15 access.denied, 1 pairing.ticket_used, 3 auth.refused", count)
	}
}

// TestOrdinaryTokenReachesChannels: an ordinary token is unscoped: it calls
// ChannelService as it calls anything else, and keeps its administrator.
func TestOrdinaryTokenReachesChannels(t *testing.T) {
	s := newScopeHarness(t, Options{})
	tok := scopedToken(t, s.st, "", "", time.Time{})
	for _, path := range []string{"/betcode.v1.ChannelService/Open", "/betcode.v1.ChannelService/Pair", "/betcode.v1.AgentService/ListSessions"} {
		if got, id := s.call(t, tok, path); got != (answer{}) || id.Scope != "" || id.ScopeMachine != "" || !id.Admin {
			t.Errorf("%s with an ordinary token: %+v, %+v", path, got, id)
		}
	}
}

// TestPairingTicketSingleUseUnderRace: many Pair calls at once with one
// ticket, through two Authenticators on one store (two replicas): exactly
// one is admitted.
func TestPairingTicketSingleUseUnderRace(t *testing.T) {
	s := newScopeHarness(t, Options{})
	other := New(s.st, Options{})
	runAuth(t, other)
	var admitted sync.WaitGroup
	var mu sync.Mutex
	n := 0
	handler := http.HandlerFunc(func(http.ResponseWriter, *http.Request) { mu.Lock(); n++; mu.Unlock() })
	replicas := []http.Handler{s.a.Middleware(handler), other.Middleware(handler)}
	for round := range 3 {
		ticket := scopedToken(t, s.st, "m-1", store.ScopePair, time.Now().Add(10*time.Minute))
		n = 0
		start := make(chan struct{})
		for i := range 16 {
			admitted.Go(func() {
				r := httptest.NewRequest(http.MethodPost, "/betcode.v1.ChannelService/Pair", nil)
				r.Header.Set("Authorization", "Bearer "+ticket)
				<-start
				replicas[i%2].ServeHTTP(httptest.NewRecorder(), r)
			})
		}
		close(start)
		admitted.Wait()
		if n != 1 {
			t.Errorf("round %d: %d of 16 concurrent Pair calls with one ticket were admitted; want 1", round, n)
		}
	}
}

// TestRateLimitedPairDoesNotSpendTicket: a Pair call refused before it
// was admitted (the call rate) leaves the ticket for the next try.
func TestRateLimitedPairDoesNotSpendTicket(t *testing.T) {
	var mu sync.Mutex
	refuse := true
	s := newScopeHarness(t, Options{Limit: func(w http.ResponseWriter, _ *http.Request, _ Identity) bool {
		mu.Lock()
		defer mu.Unlock()
		if refuse {
			refuse = false
			http.Error(w, "slow down", http.StatusTooManyRequests)
			return false
		}
		return true
	}})
	ticket := scopedToken(t, s.st, "m-1", store.ScopePair, time.Now().Add(10*time.Minute))
	if _, id := s.call(t, ticket, "/betcode.v1.ChannelService/Pair"); id.UserID != "" {
		t.Fatal("the rate-limited call was admitted")
	}
	if got, id := s.call(t, ticket, "/betcode.v1.ChannelService/Pair"); id.UserID == "" {
		t.Fatalf("after a rate-limited try the ticket was refused: %+v", got)
	}
}

// openCall starts a long call (a stream) with tok to path on machine m-1
// (as the router records it) and returns a channel that yields the
// recorder once the call ended.
func openCall(t *testing.T, a *Authenticator, tok, path string) <-chan *httptest.ResponseRecorder {
	t.Helper()
	started := make(chan struct{})
	h := a.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		Machine(r.Context(), "m-1")
		w.WriteHeader(http.StatusOK)
		close(started)
		<-r.Context().Done()
	}))
	done := make(chan *httptest.ResponseRecorder, 1)
	ctx := t.Context()
	go func() {
		r := httptest.NewRequest(http.MethodPost, path, nil).WithContext(ctx)
		r.Header.Set("Authorization", "Bearer "+tok)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		done <- rec
	}()
	select {
	case <-started:
	case rec := <-done:
		t.Fatalf("the call was refused: %+v", answerOf(t, rec.Header()))
	}
	return done
}

// TestRevokedDeviceTokenEndsItsChannels: revoking a device token ends its
// open Open calls within a second; the Pair call a ticket admitted is not
// ended by the ticket's own spending; revoking the machine ends both, and
// its scoped tokens are refused from then on.
func TestRevokedDeviceTokenEndsItsChannels(t *testing.T) {
	s := newScopeHarness(t, Options{})
	device := scopedToken(t, s.st, "m-1", store.ScopeDevice, time.Time{})
	open := openCall(t, s.a, device, "/betcode.v1.ChannelService/Open")
	at := time.Now()
	if _, err := s.st.RevokeToken(t.Context(), tokenID(device), at); err != nil {
		t.Fatal(err)
	}
	select {
	case rec := <-open:
		got := rec.Header().Get(http.TrailerPrefix + "Grpc-Status")
		msg, _ := url.PathUnescape(rec.Header().Get(http.TrailerPrefix + "Grpc-Message"))
		if got != "16" || !strings.Contains(msg, "device's credential for machine m-1 was revoked") {
			t.Errorf("the revoked device's channel ended %s %q; want 16, the device's credential revoked", got, msg)
		}
		t.Logf("ended %s after the revocation", time.Since(at))
	case <-time.After(time.Second):
		t.Fatal("the revoked device's Open call is still open 1s after the revocation")
	}
	if got, _ := s.call(t, device, "/betcode.v1.ChannelService/Open"); got.code != "16" {
		t.Errorf("a revoked device token's next call: %+v", got)
	}

	ticket := scopedToken(t, s.st, "m-1", store.ScopePair, time.Now().Add(10*time.Minute))
	device2 := scopedToken(t, s.st, "m-1", store.ScopeDevice, time.Time{})
	pair := openCall(t, s.a, ticket, "/betcode.v1.ChannelService/Pair")
	open2 := openCall(t, s.a, device2, "/betcode.v1.ChannelService/Open")
	select {
	case <-pair:
		t.Fatal("spending the ticket ended the Pair call it admitted")
	case <-time.After(1500 * time.Millisecond): // the spend's change notification came and went
	}
	if err := s.st.RevokeMachine(t.Context(), "m-1", time.Now()); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]<-chan *httptest.ResponseRecorder{"Pair": pair, "Open": open2} {
		select {
		case rec := <-c:
			if got := rec.Header().Get(http.TrailerPrefix + "Grpc-Status"); got != "16" && got != "5" {
				t.Errorf("%s on a revoked machine ended with %q", name, got)
			}
		case <-time.After(time.Second):
			t.Fatalf("%s is still open 1s after its machine was revoked", name)
		}
	}
	if got, _ := s.call(t, device2, "/betcode.v1.ChannelService/Open"); got.code != "16" || !strings.Contains(got.msg, "machine m-1 was revoked") {
		t.Errorf("a revoked machine's device token: %+v", got)
	}
	// The other machine's tokens still work.
	if got, _ := s.call(t, scopedToken(t, s.st, "m-2", store.ScopeDevice, time.Time{}), "/betcode.v1.ChannelService/Open"); got != (answer{}) {
		t.Errorf("another machine's device token after m-1's revocation: %+v", got)
	}
}

// TestForwardedScope: a call forwarded by another replica keeps its scope
// (ScopeHeader), which this replica checks again; a malformed scope is
// refused; and nobody but a relay can set the header, so a client cannot
// shed its token's scope by posing as a forwarded call.
func TestForwardedScope(t *testing.T) {
	dir := t.TempDir()
	if _, err := pki.Init(dir, []string{"localhost"}, pki.Options{}); err != nil {
		t.Fatal(err)
	}
	relay := readCert(t, filepath.Join(dir, pki.RelayCertFile))
	relayTLS := &tls.ConnectionState{PeerCertificates: []*x509.Certificate{relay}, VerifiedChains: [][]*x509.Certificate{{relay}}}
	s := newScopeHarness(t, Options{})
	device := scopedToken(t, s.st, "m-1", store.ScopeDevice, time.Time{})
	hop := func(scope string) http.Header {
		return http.Header{ForwardedByHeader: {"10.0.0.1:8443"}, UserHeader: {"alice"}, ScopeHeader: {scope}}
	}
	for _, tc := range []struct {
		name    string
		tls     *tls.ConnectionState
		headers http.Header
		path    string
		want    answer
		id      Identity
	}{
		{"forwarded device call", relayTLS, hop("device:m-1"), "/betcode.v1.ChannelService/Open", answer{},
			Identity{UserID: "alice", ForwardedBy: "10.0.0.1:8443", Scope: store.ScopeDevice, ScopeMachine: "m-1"}},
		{"forwarded, scope refuses the method", relayTLS, hop("device:m-1"), "/betcode.v1.AgentService/ListSessions",
			answer{"7", "this token is scoped to machine m-1: it opens end-to-end channels to that machine only", CodeTokenScope}, Identity{}},
		{"forwarded ticket, Open", relayTLS, hop("pair:m-1"), "/betcode.v1.ChannelService/Open",
			answer{"7", "this token is scoped to machine m-1: it opens end-to-end channels to that machine only", CodeTokenScope}, Identity{}},
		{"forwarded ticket, Pair (spent by the first replica, not here)", relayTLS, hop("pair:m-1"), "/betcode.v1.ChannelService/Pair", answer{},
			Identity{UserID: "alice", ForwardedBy: "10.0.0.1:8443", Scope: store.ScopePair, ScopeMachine: "m-1"}},
		{"forwarded, unknown scope", relayTLS, hop("admin:m-1"), "/betcode.v1.ChannelService/Open", answer{code: "16", msg: "malformed forwarded token scope"}, Identity{}},
		{"forwarded, scope without machine", relayTLS, hop("device:"), "/betcode.v1.ChannelService/Open", answer{code: "16", msg: "malformed forwarded token scope"}, Identity{}},
		{"client posing as a forwarded unscoped call", &tls.ConnectionState{},
			http.Header{ForwardedByHeader: {"x"}, UserHeader: {"alice"}, "Authorization": {"Bearer " + device}}, "/betcode.v1.AgentService/ListSessions",
			answer{"7", "this token is scoped to machine m-1: it opens end-to-end channels to that machine only", CodeTokenScope}, Identity{}},
		{"client sending an empty scope header", &tls.ConnectionState{},
			http.Header{ScopeHeader: {""}, "Authorization": {"Bearer " + device}}, "/betcode.v1.AgentService/ListSessions",
			answer{"7", "this token is scoped to machine m-1: it opens end-to-end channels to that machine only", CodeTokenScope}, Identity{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got Identity
			var scopeSeen string
			h := s.a.Middleware(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
				got, _ = FromContext(r.Context())
				scopeSeen = r.Header.Get(ScopeHeader)
			}))
			r := httptest.NewRequest(http.MethodPost, tc.path, nil)
			r.TLS = tc.tls
			for k, v := range tc.headers {
				r.Header[k] = v
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, r)
			got.Remote = ""
			if tc.want != (answer{}) {
				if a := answerOf(t, rec.Header()); a != tc.want || got.UserID != "" {
					t.Errorf("answered %+v (identity %+v); want %+v", a, got, tc.want)
				}
				return
			}
			if got != tc.id || scopeSeen != "" {
				t.Errorf("identity %+v, scope header passed on %q; want %+v and none", got, scopeSeen, tc.id)
			}
		})
	}
	if _, err := s.st.TokenByHash(t.Context(), authtoken.Hash(device)); err != nil {
		t.Fatal(err)
	}
}

func TestScopeAllows(t *testing.T) {
	for _, tc := range []struct {
		scope, path string
		want        bool
	}{
		{"", "/betcode.v1.AdminService/ListUsers", true},
		{"device", "/betcode.v1.ChannelService/Open", true},
		{"device", "/betcode.v1.ChannelService/Pair", true},
		{"device", "/betcode.v1.ChannelService/Open/", false},
		{"device", "/betcode.v1.ChannelService/", false},
		{"pair", "/betcode.v1.ChannelService/Pair", true},
		{"pair", "/betcode.v1.ChannelService/Open", false},
		{"pair", "/grpc.health.v1.Health/Check", true},
		{"admin", "/grpc.health.v1.Health/Check", false},
		{"share", "/betcode.v1.ChannelService/Open", true},
		{"share", "/betcode.v1.ChannelService/Pair", false},
		{"share", "/betcode.v1.ChannelService/Deliver", false},
		{"share", "/betcode.v1.AgentService/StartSession", false},
		{"share", "/grpc.health.v1.Health/Check", true},
	} {
		if got := ScopeAllows(tc.scope, tc.path); got != tc.want {
			t.Errorf("ScopeAllows(%q, %q) = %v; want %v", tc.scope, tc.path, got, tc.want)
		}
	}
}
