package pki_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/betcode-dev/betcode/relay/pki"
	"github.com/betcode-dev/betcode/shared/mtls"
)

// testPKIs are two independent PKIs: "a", the relay's, and "b", a stranger's.
// Both have machine m1; "a" also has "old", whose certificate has expired.
type testPKIs struct{ a, b string }

func newTestPKIs(t *testing.T) testPKIs {
	t.Helper()
	p := testPKIs{a: t.TempDir(), b: t.TempDir()}
	for _, dir := range []string{p.a, p.b} {
		if _, err := pki.Init(dir, []string{"localhost", "127.0.0.1"}, pki.Options{}); err != nil {
			t.Fatal(err)
		}
		if _, err := pki.IssueMachine(dir, "m1", pki.Options{}); err != nil {
			t.Fatal(err)
		}
	}
	past := func() time.Time { return time.Now().Add(-48 * time.Hour) }
	if _, err := pki.IssueMachine(p.a, "old", pki.Options{Now: past, MachineLifetime: time.Hour}); err != nil {
		t.Fatal(err)
	}
	return p
}

func (p testPKIs) serverConfig(t *testing.T, dir string, auth mtls.ClientAuth) *tls.Config {
	t.Helper()
	cfg, err := mtls.ServerConfig(filepath.Join(dir, pki.RelayCertFile), filepath.Join(dir, pki.RelayKeyFile), filepath.Join(p.a, pki.CACertFile), auth)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// clientConfig trusts the CA of p.a and presents cert/key (relative to
// their directory; both empty for a plain client).
func (p testPKIs) clientConfig(t *testing.T, cert, key, serverName string) *tls.Config {
	t.Helper()
	cfg, err := mtls.ClientConfig(filepath.Join(p.a, pki.CACertFile), cert, key, serverName)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// handshake runs one TLS connection on loopback TCP between srv and cli.
// The client reads a byte after its handshake because in TLS 1.3 the server
// verifies the client's certificate after the client's handshake is done.
func handshake(t *testing.T, srv, cli *tls.Config) (state tls.ConnectionState, srvErr, cliErr error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	type result struct {
		state tls.ConnectionState
		err   error
	}
	done := make(chan result, 1)
	go func() {
		raw, err := ln.Accept()
		if err != nil {
			done <- result{err: err}
			return
		}
		conn := tls.Server(raw, srv)
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(10 * time.Second))
		if err := conn.Handshake(); err != nil {
			done <- result{err: err}
			return
		}
		_, err = conn.Write([]byte{'k'})
		done <- result{state: conn.ConnectionState(), err: err}
	}()

	raw, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	conn := tls.Client(raw, cli)
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	if cliErr = conn.Handshake(); cliErr == nil {
		_, cliErr = io.ReadFull(conn, make([]byte, 1))
	}
	if cliErr != nil {
		conn.Close() // unblock a server still waiting for us
	}
	r := <-done
	return r.state, r.err, cliErr
}

func TestHandshake(t *testing.T) {
	p := newTestPKIs(t)
	machine := func(dir, id string) (string, string) {
		return filepath.Join(dir, pki.MachineCertFile(id)), filepath.Join(dir, pki.MachineKeyFile(id))
	}
	aCert, aKey := machine(p.a, "m1")
	bCert, bKey := machine(p.b, "m1")
	oldCert, oldKey := machine(p.a, "old")
	relayCert, relayKey := filepath.Join(p.a, pki.RelayCertFile), filepath.Join(p.a, pki.RelayKeyFile)

	tests := []struct {
		name       string
		auth       mtls.ClientAuth
		serverDir  string // whose relay certificate the server presents; p.a by default
		cert, key  string
		serverName string // 127.0.0.1 by default
		// wantID is the machine id MachineID returns; empty means it must
		// fail with ErrNoClientCert (if the handshake succeeds at all).
		wantID string
		// wantSrv and wantCli are the starts of DescribeHandshakeError of
		// each side's error; empty means that side succeeds.
		wantSrv, wantCli string
		// wantRelay: the client certificate is a relay's (PeerRelay), and
		// MachineID must refuse it.
		wantRelay bool
	}{
		{name: "machine certificate", auth: mtls.VerifyClientCertIfGiven, cert: aCert, key: aKey, wantID: "m1"},
		{name: "machine certificate, required", auth: mtls.RequireClientCert, cert: aCert, key: aKey, serverName: "localhost", wantID: "m1"},
		{name: "no client certificate", auth: mtls.VerifyClientCertIfGiven},
		{
			name: "no client certificate, required", auth: mtls.RequireClientCert,
			wantSrv: "no client certificate", wantCli: "no client certificate (the server requires one)",
		},
		{
			name: "certificate from another CA", auth: mtls.VerifyClientCertIfGiven, cert: bCert, key: bKey,
			wantSrv: `client certificate signed by unknown authority (subject "CN=m1,OU=machine,O=BetCode", issuer "CN=BetCode CA,O=BetCode")`,
			wantCli: "peer refused our certificate: signed by unknown authority",
		},
		{
			name: "expired machine certificate", auth: mtls.VerifyClientCertIfGiven, cert: oldCert, key: oldKey,
			wantSrv: "client certificate has expired on ", wantCli: "peer refused our certificate: certificate has expired",
		},
		{
			// A relay certificate is a valid client certificate (replicas
			// forward to each other) but names a relay, never a machine.
			name: "relay certificate as client certificate", auth: mtls.VerifyClientCertIfGiven, cert: relayCert, key: relayKey,
			wantRelay: true,
		},
		{
			name: "relay of another CA", auth: mtls.VerifyClientCertIfGiven, serverDir: p.b, cert: aCert, key: aKey,
			wantSrv: "peer refused our certificate", wantCli: "server certificate signed by unknown authority",
		},
		{
			name: "wrong server name", auth: mtls.VerifyClientCertIfGiven, serverName: "relay.example.org",
			wantSrv: "peer refused our certificate",
			wantCli: "server certificate is not valid for relay.example.org (valid for localhost, 127.0.0.1)",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			serverDir, serverName := tt.serverDir, tt.serverName
			if serverDir == "" {
				serverDir = p.a
			}
			if serverName == "" {
				serverName = "127.0.0.1"
			}
			state, srvErr, cliErr := handshake(t, p.serverConfig(t, serverDir, tt.auth), p.clientConfig(t, tt.cert, tt.key, serverName))
			checkSide(t, "server", srvErr, tt.wantSrv)
			checkSide(t, "client", cliErr, tt.wantCli)
			if srvErr != nil {
				return
			}
			if state.NegotiatedProtocol != "h2" || state.Version != tls.VersionTLS13 {
				t.Errorf("ALPN %q, version %x; want h2 over TLS 1.3", state.NegotiatedProtocol, state.Version)
			}
			id, err := mtls.MachineID(state)
			if name, ok := mtls.PeerRelay(&state); ok != tt.wantRelay {
				t.Fatalf("PeerRelay = %q, %v; want %v", name, ok, tt.wantRelay)
			}
			if tt.wantRelay {
				if err == nil || errors.Is(err, mtls.ErrNoClientCert) {
					t.Fatalf("MachineID(relay certificate) = %q, %v; want a not-a-machine error", id, err)
				}
				return
			}
			if tt.wantID == "" {
				if !errors.Is(err, mtls.ErrNoClientCert) {
					t.Fatalf("MachineID = %q, %v; want ErrNoClientCert", id, err)
				}
				if got := mtls.DescribeHandshakeError(err); got != "no client certificate" {
					t.Errorf("DescribeHandshakeError(%v) = %q", err, got)
				}
				return
			}
			if err != nil || id != tt.wantID {
				t.Fatalf("MachineID = %q, %v; want %q", id, err, tt.wantID)
			}
		})
	}
}

func checkSide(t *testing.T, side string, err error, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Errorf("%s: unexpected error %v (%s)", side, err, mtls.DescribeHandshakeError(err))
	case want != "" && err == nil:
		t.Errorf("%s: succeeded, want %q", side, want)
	case want != "":
		if got := mtls.DescribeHandshakeError(err); !strings.HasPrefix(got, want) {
			t.Errorf("%s: DescribeHandshakeError(%v)\n got %q\nwant %q...", side, err, got, want)
		}
	}
}

// TestMachineIDOverGRPC serves the gRPC health service on one port for
// agents and plain clients, with an interceptor that, as the tunnel service
// will, takes the machine from the peer's certificate.
func TestMachineIDOverGRPC(t *testing.T) {
	p := newTestPKIs(t)
	var logs syncBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	srv := grpc.NewServer(
		grpc.Creds(mtls.ServerCredentials(p.serverConfig(t, p.a, mtls.VerifyClientCertIfGiven), log)),
		grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
			id, err := mtls.MachineIDFromPeer(ctx)
			if err != nil {
				return nil, status.Error(codes.Unauthenticated, mtls.DescribeHandshakeError(err))
			}
			if err := grpc.SetHeader(ctx, metadata.Pairs("x-machine-id", id)); err != nil {
				return nil, err
			}
			return handler(ctx, req)
		}),
	)
	healthpb.RegisterHealthServer(srv, health.NewServer())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	t.Cleanup(func() {
		srv.Stop()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})

	tests := []struct {
		name, dir, id string
		wantCode      codes.Code
		wantMachine   string
		wantLog       string // the reason the server logs for a refused handshake
	}{
		{name: "agent", dir: p.a, id: "m1", wantCode: codes.OK, wantMachine: "m1"},
		{name: "plain client", wantCode: codes.Unauthenticated},
		{name: "agent of another CA", dir: p.b, id: "m1", wantCode: codes.Unavailable, wantLog: `reason="client certificate signed by unknown authority`},
		{name: "expired agent", dir: p.a, id: "old", wantCode: codes.Unavailable, wantLog: `reason="client certificate has expired on `},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var cert, key string
			if tt.id != "" {
				cert, key = filepath.Join(tt.dir, pki.MachineCertFile(tt.id)), filepath.Join(tt.dir, pki.MachineKeyFile(tt.id))
			}
			// No server name: gRPC checks the relay certificate against
			// the dialled 127.0.0.1, which is one of its IP SANs.
			conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(credentials.NewTLS(p.clientConfig(t, cert, key, ""))))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			var md metadata.MD
			_, err = healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Header(&md))
			if got := status.Code(err); got != tt.wantCode {
				t.Fatalf("Check: code %v (%v), want %v", got, err, tt.wantCode)
			}
			if tt.wantCode == codes.Unauthenticated && status.Convert(err).Message() != "no client certificate" {
				t.Errorf("Check: message %q, want %q", status.Convert(err).Message(), "no client certificate")
			}
			if got := strings.Join(md.Get("x-machine-id"), ","); got != tt.wantMachine {
				t.Errorf("machine id = %q, want %q", got, tt.wantMachine)
			}
			if tt.wantLog != "" && !logs.waitFor(tt.wantLog, 5*time.Second) {
				t.Errorf("server log lacks %q:\n%s", tt.wantLog, logs.String())
			}
		})
	}
}

// syncBuffer is a log sink that tests can read while the server writes.
type syncBuffer struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	changed chan struct{} // closed and replaced on every write
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.changed != nil {
		close(b.changed)
		b.changed = nil
	}
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// waitFor reports whether s appears in the buffer within d: the server logs
// a refused handshake after it has sent the client its alert.
func (b *syncBuffer) waitFor(s string, d time.Duration) bool {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for {
		b.mu.Lock()
		if strings.Contains(b.buf.String(), s) {
			b.mu.Unlock()
			return true
		}
		if b.changed == nil {
			b.changed = make(chan struct{})
		}
		ch := b.changed
		b.mu.Unlock()
		select {
		case <-ch:
		case <-deadline.C:
			return false
		}
	}
}
