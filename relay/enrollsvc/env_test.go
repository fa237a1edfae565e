package enrollsvc_test

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/betcode-dev/betcode/relay/enrollsvc"
	"github.com/betcode-dev/betcode/relay/internal/grpcerr"
	"github.com/betcode-dev/betcode/relay/pki"
	"github.com/betcode-dev/betcode/relay/store"
	"github.com/betcode-dev/betcode/relay/store/sqlite"
	"github.com/betcode-dev/betcode/shared/authtoken"
)

// env is a relay's worth of enrollment: a PKI directory with its CA
// loaded, a SQLite store holding users alice and bob and team infra (alice
// owns it), and the service, whose clock stands still at now.
type env struct {
	svc  *enrollsvc.Service
	st   *sqlite.Store
	ca   *pki.CA
	dir  string
	now  time.Time
	logs *lockedBuffer
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{dir: t.TempDir(), now: time.Now().Truncate(time.Second), logs: &lockedBuffer{}}
	if _, err := pki.Init(e.dir, []string{"localhost", "127.0.0.1"}, pki.Options{}); err != nil {
		t.Fatal(err)
	}
	ca, err := pki.LoadCA(filepath.Join(e.dir, pki.CACertFile), filepath.Join(e.dir, pki.CAKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	e.ca = ca
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "relay.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Errorf("close store: %v", err)
		}
	})
	e.st = st
	ctx := t.Context()
	for _, u := range []string{"alice", "bob"} {
		if err := st.CreateUser(ctx, store.User{ID: u}); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.CreateTeam(ctx, store.Team{ID: "infra"}); err != nil {
		t.Fatal(err)
	}
	if err := st.SetMember(ctx, store.Member{TeamID: "infra", UserID: "alice", Role: store.RoleOwner}); err != nil {
		t.Fatal(err)
	}
	e.svc = &enrollsvc.Service{
		Store: st,
		CA:    ca,
		Log:   slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Now:   func() time.Time { return e.now },
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("service log:\n%s", e.logs.String())
		}
	})
	return e
}

// joinToken stores a join token for team (or, with team empty, user) that
// expires at expires, and returns it.
func (e *env) joinToken(t *testing.T, team, user string, expires time.Time) string {
	t.Helper()
	secret, err := authtoken.New(authtoken.Join)
	if err != nil {
		t.Fatal(err)
	}
	hash := authtoken.Hash(secret)
	tok := store.EnrollToken{ID: authtoken.ID(hash), Hash: hash, TeamID: team, UserID: user, CreatedAt: e.now.Add(-time.Minute), ExpiresAt: expires}
	if err := e.st.CreateEnrollToken(t.Context(), tok); err != nil {
		t.Fatal(err)
	}
	return secret
}

// audit returns the store's audit events with action.
func (e *env) audit(t *testing.T, action string) []store.AuditEvent {
	t.Helper()
	all, err := e.st.ListAudit(t.Context(), store.AuditFilter{})
	if err != nil {
		t.Fatal(err)
	}
	var out []store.AuditEvent
	for _, ev := range all {
		if ev.Action == action {
			out = append(out, ev)
		}
	}
	return out
}

func (e *env) machines(t *testing.T) []store.Machine {
	t.Helper()
	ms, err := e.st.AllMachines(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return ms
}

// roots is a pool of the CA's certificates.
func (e *env) roots() *x509.CertPool {
	p := x509.NewCertPool()
	p.AppendCertsFromPEM(e.ca.CertPEM())
	return p
}

// testRemote is the address the fake peers of unit tests call from.
var testRemote = &net.TCPAddr{IP: net.IPv4(192, 0, 2, 7), Port: 40123}

// plainCtx is a call over TLS without a client certificate.
func plainCtx(t *testing.T) context.Context {
	return peer.NewContext(t.Context(), &peer.Peer{Addr: testRemote, AuthInfo: credentials.TLSInfo{State: tls.ConnectionState{}}})
}

// certCtx is a call whose connection verified cert against the CA.
func certCtx(t *testing.T, cert *x509.Certificate, ca *x509.Certificate) context.Context {
	state := tls.ConnectionState{PeerCertificates: []*x509.Certificate{cert}, VerifiedChains: [][]*x509.Certificate{{cert, ca}}}
	return peer.NewContext(t.Context(), &peer.Peer{Addr: testRemote, AuthInfo: credentials.TLSInfo{State: state}})
}

// Making keys is slow enough to share one across the tests.
var (
	keyOnce sync.Once
	testKey *ecdsa.PrivateKey
)

func machineKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	keyOnce.Do(func() {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			panic(err)
		}
		testKey = k
	})
	return testKey
}

// newCSR returns a DER CSR for key asking for tmpl (a plain one when nil).
func newCSR(t *testing.T, key crypto.Signer, tmpl *x509.CertificateRequest) []byte {
	t.Helper()
	if tmpl == nil {
		tmpl = &x509.CertificateRequest{Subject: pkix.Name{CommonName: "laptop"}}
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

func parseCert(t *testing.T, certPEM []byte) *x509.Certificate {
	t.Helper()
	block, rest := pem.Decode(certPEM)
	if block == nil || block.Type != "CERTIFICATE" || len(bytes.TrimSpace(rest)) != 0 {
		t.Fatalf("not one PEM certificate: %q", certPEM)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

// checkStatus checks err's gRPC code, BetCode code and message.
func checkStatus(t *testing.T, err error, code codes.Code, betcode, msg string) {
	t.Helper()
	st, ok := status.FromError(err)
	if !ok {
		t.Fatalf("err = %v, not a status", err)
	}
	if st.Code() != code {
		t.Errorf("code = %v (%q), want %v", st.Code(), st.Message(), code)
	}
	if !strings.Contains(st.Message(), msg) {
		t.Errorf("message = %q, want it to contain %q", st.Message(), msg)
	}
	var reason string
	for _, d := range st.Details() {
		if ei, ok := d.(*errdetails.ErrorInfo); ok && ei.Domain == grpcerr.Domain {
			reason = ei.Reason
		}
	}
	if reason != betcode {
		t.Errorf("BetCode code = %q, want %q", reason, betcode)
	}
}

// lockedBuffer is a log sink safe for concurrent calls.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
