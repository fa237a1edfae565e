package router

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/betcode-dev/betcode/relay/auth"
	"github.com/betcode-dev/betcode/relay/peer"
	"github.com/betcode-dev/betcode/relay/pki"
	"github.com/betcode-dev/betcode/relay/registry"
	"github.com/betcode-dev/betcode/relay/store"
	"github.com/betcode-dev/betcode/relay/store/sqlite"
)

// scopeStore is a store where alice owns m-1 and m-2 (her current machine)
// and bob owns m-bob.
func scopeStore(t *testing.T) store.Store {
	t.Helper()
	ctx := t.Context()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "relay.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	for _, u := range []string{"alice", "bob"} {
		if err := st.CreateUser(ctx, store.User{ID: u}); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range []store.Machine{{ID: "m-1", OwnerID: "alice"}, {ID: "m-2", OwnerID: "alice"}, {ID: "m-bob", OwnerID: "bob"}} {
		m.LastSeen = time.Now()
		if err := st.UpsertMachine(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.SetCurrentMachine(ctx, "alice", "m-2"); err != nil {
		t.Fatal(err)
	}
	return st
}

// grpcRequest is a gRPC call to path (one empty message) carrying id.
func grpcRequest(ctx context.Context, path, machine string, id auth.Identity) *http.Request {
	r := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(make([]byte, 5))).WithContext(auth.WithIdentity(ctx, id))
	r.ProtoMajor, r.ProtoMinor, r.Proto = 2, 0, "HTTP/2.0"
	r.Header.Set("Content-Type", "application/grpc")
	if machine != "" {
		r.Header.Set(MachineHeader, machine)
	}
	return r
}

// statusOf returns the grpc-status and message of a recorded answer
// (trailers-only or in trailers).
func statusOf(rec *httptest.ResponseRecorder) (string, string) {
	res := rec.Result()
	code, msg := res.Header.Get("Grpc-Status"), res.Header.Get("Grpc-Message")
	if code == "" {
		code, msg = res.Trailer.Get("Grpc-Status"), res.Trailer.Get("Grpc-Message")
	}
	msg, _ = url.PathUnescape(msg)
	return code, msg
}

// TestScopedRouting: a token scoped to m-1 reaches m-1 whether or not the
// call names it (not the user's current machine); naming another machine
// of its user, another user's, or none that exists answers NOT_FOUND /
// MACHINE_NOT_FOUND, the same answer, audited. An ordinary identity still
// goes to the current machine. (No tunnel is up: a call that reached its
// machine answers MACHINE_OFFLINE, naming it.)
func TestScopedRouting(t *testing.T) {
	st := scopeStore(t)
	authn := auth.New(st, auth.Options{})
	rt := &Router{Auth: authn, Registry: registry.New(), Store: st, Log: slog.New(slog.DiscardHandler)}
	device := auth.Identity{UserID: "alice", TokenID: "tok-dev", Scope: store.ScopeDevice, ScopeMachine: "m-1", Remote: "192.0.2.1:1"}
	ordinary := auth.Identity{UserID: "alice", TokenID: "tok-alice"}
	const open = "/betcode.v1.ChannelService/Open"
	offline := func(m string) string { return `Target machine "` + m + `" is not connected` }
	for _, tc := range []struct {
		name     string
		id       auth.Identity
		machine  string
		code     string
		msg      string
		auditFor string // the denied machine audited
	}{
		{"scoped, no machine named: its own, not the current one", device, "", "14", offline("m-1"), ""},
		{"scoped, its machine named", device, "m-1", "14", offline("m-1"), ""},
		{"scoped, another machine of its user", device, "m-2", "5", `no machine "m-2"`, "m-2"},
		{"scoped, another user's machine", device, "m-bob", "5", `no machine "m-bob"`, "m-bob"},
		{"scoped, no such machine", device, "m-nope", "5", `no machine "m-nope"`, "m-nope"},
		{"ordinary, no machine named: the current one", ordinary, "", "14", offline("m-2"), ""},
		{"ordinary, another user's machine", ordinary, "m-bob", "5", `no machine "m-bob"`, "m-bob"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			rt.ServeHTTP(rec, grpcRequest(t.Context(), open, tc.machine, tc.id))
			if code, msg := statusOf(rec); code != tc.code || !strings.HasPrefix(msg, tc.msg) {
				t.Fatalf("answered %s %q; want %s %q", code, msg, tc.code, tc.msg)
			}
			if tc.auditFor == "" {
				return
			}
			authn.FlushAudit(t.Context())
			events, err := st.ListAudit(t.Context(), store.AuditFilter{Actor: "machine:" + tc.auditFor})
			if err != nil || len(events) == 0 || events[len(events)-1].Action != "access.denied" {
				t.Errorf("audit for machine:%s = %+v, %v; want access.denied", tc.auditFor, events, err)
			}
		})
	}
}

// peerReplica is another replica: an HTTP/2 TLS server that requires a
// relay certificate, with its own Authenticator and Router on the same
// store, recording what it admitted.
type peerReplica struct {
	srv  *httptest.Server
	mu   sync.Mutex
	got  []http.Header
	seen []auth.Identity
}

func startPeerReplica(t *testing.T, dir string, st store.Store) *peerReplica {
	t.Helper()
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, pki.RelayCertFile), filepath.Join(dir, pki.RelayKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(filepath.Join(dir, pki.CACertFile))
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	authn := auth.New(st, auth.Options{})
	rt := &Router{Auth: authn, Registry: registry.New(), Store: st, Log: slog.New(slog.DiscardHandler)}
	p := &peerReplica{}
	record := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, _ := auth.FromContext(r.Context())
		p.mu.Lock()
		p.seen = append(p.seen, id)
		p.mu.Unlock()
		rt.ServeHTTP(w, r)
	})
	mw := authn.Middleware(record)
	p.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.got = append(p.got, r.Header.Clone())
		p.mu.Unlock()
		mw.ServeHTTP(w, r)
	}))
	p.srv.EnableHTTP2 = true
	p.srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: roots, ClientAuth: tls.RequireAndVerifyClientCert}
	p.srv.StartTLS()
	t.Cleanup(p.srv.Close)
	return p
}

// TestForwardedHopKeepsScope: a scoped call for a machine held by another
// replica goes there with its machine and its scope; that replica admits
// it as scoped, and refuses what the scope does not allow even when the
// forwarding replica (wrongly) sends it: the hop cannot widen a scope.
func TestForwardedHopKeepsScope(t *testing.T) {
	dir := t.TempDir()
	if _, err := pki.Init(dir, []string{"localhost", "127.0.0.1"}, pki.Options{}); err != nil {
		t.Fatal(err)
	}
	st := scopeStore(t)
	other := startPeerReplica(t, dir, st)
	addr := strings.TrimPrefix(other.srv.URL, "https://")
	if err := st.SetMachineReplica(t.Context(), "m-1", addr, time.Now()); err != nil {
		t.Fatal(err)
	}
	fw, err := peer.New(filepath.Join(dir, pki.RelayCertFile), filepath.Join(dir, pki.RelayKeyFile), filepath.Join(dir, pki.CACertFile))
	if err != nil {
		t.Fatal(err)
	}
	defer fw.Close()
	rt := &Router{Auth: auth.New(st, auth.Options{}), Registry: registry.New(), Store: st, Log: slog.New(slog.DiscardHandler),
		Self: "10.0.0.1:8443", Peers: fw, PresenceTTL: time.Minute}
	device := auth.Identity{UserID: "alice", TokenID: "tok-dev", Scope: store.ScopeDevice, ScopeMachine: "m-1"}

	rec := httptest.NewRecorder()
	rt.ServeHTTP(rec, grpcRequest(t.Context(), "/betcode.v1.ChannelService/Open", "", device))
	// The other replica holds no tunnel either (its record is stale to
	// it): it answers MACHINE_OFFLINE for m-1, having admitted the call.
	if code, msg := statusOf(rec); code != "14" || !strings.Contains(msg, `"m-1"`) {
		t.Fatalf("forwarded scoped call answered %s %q; want 14 for m-1", code, msg)
	}
	other.mu.Lock()
	if len(other.got) != 1 || other.got[0].Get(auth.ScopeHeader) != "device:m-1" || other.got[0].Get(MachineHeader) != "m-1" ||
		other.got[0].Get(auth.UserHeader) != "alice" || other.got[0].Get(auth.ForwardedByHeader) != "10.0.0.1:8443" {
		t.Fatalf("the other replica received %v", other.got)
	}
	if len(other.seen) != 1 || other.seen[0].Scope != store.ScopeDevice || other.seen[0].ScopeMachine != "m-1" {
		t.Fatalf("the other replica admitted %+v; want the device scope on m-1", other.seen)
	}
	other.got, other.seen = nil, nil
	other.mu.Unlock()

	// A forwarding replica that would widen the scope: the other replica
	// refuses another method, and another machine.
	for _, tc := range []struct {
		name, path, machine, code, msg string
	}{
		{"another method", "/betcode.v1.AgentService/ListSessions", "m-1", "7", "this token is scoped to machine m-1"},
		{"another machine", "/betcode.v1.ChannelService/Open", "m-2", "5", `no machine "m-2"`},
	} {
		rec := httptest.NewRecorder()
		r := grpcRequest(t.Context(), tc.path, "", device)
		headers := http.Header{auth.UserHeader: {"alice"}, auth.ForwardedByHeader: {"10.0.0.1:8443"}, MachineHeader: {tc.machine},
			auth.ScopeHeader: {"device:m-1"}}
		if err := fw.Forward(t.Context(), addr, rec, r, headers, nil); err != nil {
			t.Fatal(err)
		}
		if code, msg := statusOf(rec); code != tc.code || !strings.Contains(msg, tc.msg) {
			t.Errorf("%s through the hop: %s %q; want %s %q", tc.name, code, msg, tc.code, tc.msg)
		}
	}
}
