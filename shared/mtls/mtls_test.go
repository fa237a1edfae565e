package mtls

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/peer"
)

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func TestMachineID(t *testing.T) {
	cert := func(uris ...string) *x509.Certificate {
		c := &x509.Certificate{Subject: pkix.Name{CommonName: "cn"}}
		for _, u := range uris {
			c.URIs = append(c.URIs, mustURL(t, u))
		}
		return c
	}
	verified := func(c *x509.Certificate) tls.ConnectionState {
		return tls.ConnectionState{PeerCertificates: []*x509.Certificate{c}, VerifiedChains: [][]*x509.Certificate{{c}}}
	}
	tests := []struct {
		name    string
		state   tls.ConnectionState
		want    string
		wantErr string // substring; "" means success
	}{
		{"machine", verified(cert("betcode://machine/m1")), "m1", ""},
		{"machine among other URIs", verified(cert("spiffe://example.org/x", "betcode://machine/m-2.x_y")), "m-2.x_y", ""},
		{"no certificate", tls.ConnectionState{}, "", "no client certificate"},
		{"unverified certificate", tls.ConnectionState{PeerCertificates: []*x509.Certificate{cert("betcode://machine/m1")}}, "", "presented but not verified"},
		{"no machine URI", verified(cert()), "", "not a machine certificate"},
		{"other host", verified(cert("betcode://user/m1")), "", "not a machine certificate"},
		{"two machines", verified(cert("betcode://machine/m1", "betcode://machine/m2")), "", "names 2 machines"},
		{"empty id", verified(cert("betcode://machine/")), "", "malformed machine URI"},
		{"query", verified(cert("betcode://machine/m1?x=y")), "", "malformed machine URI"},
		{"bad id", verified(cert("betcode://machine/a%20b")), "", "invalid machine id"},
		{"path", verified(cert("betcode://machine/a/b")), "", "invalid machine id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := MachineID(tt.state)
			if tt.wantErr == "" {
				if err != nil || got != tt.want {
					t.Fatalf("MachineID = %q, %v; want %q", got, err, tt.want)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("MachineID = %q, %v; want error containing %q", got, err, tt.wantErr)
			}
		})
	}
}

func TestMachineURIRoundTrip(t *testing.T) {
	u := MachineURI("m1")
	if u.String() != "betcode://machine/m1" {
		t.Fatalf("MachineURI = %q", u)
	}
	c := &x509.Certificate{URIs: []*url.URL{mustURL(t, u.String())}}
	if id, err := machineIDFromCert(c); err != nil || id != "m1" {
		t.Fatalf("machineIDFromCert = %q, %v", id, err)
	}
}

func TestValidateMachineID(t *testing.T) {
	for id, ok := range map[string]bool{
		"a": true, "A.b_c-9": true, strings.Repeat("x", 64): true,
		"": false, strings.Repeat("x", 65): false, "a b": false, "a/b": false, "é": false, "a:b": false,
	} {
		if err := ValidateMachineID(id); (err == nil) != ok {
			t.Errorf("ValidateMachineID(%q) = %v, want ok=%v", id, err, ok)
		}
		if err := ValidateMachineID(id); err != nil && !errors.Is(err, ErrInvalidMachineID) {
			t.Errorf("ValidateMachineID(%q) = %v, want ErrInvalidMachineID", id, err)
		}
	}
}

func TestDescribeHandshakeError(t *testing.T) {
	client := &x509.Certificate{
		Subject:     pkix.Name{CommonName: "m1"},
		Issuer:      pkix.Name{CommonName: "Other CA"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		NotBefore:   time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC),
		NotAfter:    time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC),
	}
	server := &x509.Certificate{
		Subject:     pkix.Name{CommonName: "relay"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:    []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	verify := func(c *x509.Certificate, err error) error {
		return &tls.CertificateVerificationError{UnverifiedCertificates: []*x509.Certificate{c}, Err: err}
	}
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"nil", nil, ""},
		{"unknown authority", verify(client, x509.UnknownAuthorityError{Cert: client}),
			`client certificate signed by unknown authority (subject "CN=m1", issuer "CN=Other CA")`},
		{"expired", verify(client, x509.CertificateInvalidError{Cert: client, Reason: x509.Expired, Detail: "current time 2032-01-01T00:00:00Z is after 2031-01-01T00:00:00Z"}),
			`client certificate has expired on 2031-01-01T00:00:00Z (subject "CN=m1", issuer "CN=Other CA")`},
		{"not yet valid", verify(client, x509.CertificateInvalidError{Cert: client, Reason: x509.Expired, Detail: "current time 2029-01-01T00:00:00Z is before 2030-01-01T00:00:00Z"}),
			`client certificate is not yet valid: valid from 2030-01-01T00:00:00Z (subject "CN=m1", issuer "CN=Other CA")`},
		{"wrong usage", verify(server, x509.CertificateInvalidError{Cert: server, Reason: x509.IncompatibleUsage}),
			`server certificate is not valid for this use (extended key usage) (subject "CN=relay", issuer "")`},
		{"wrong host", verify(server, x509.HostnameError{Certificate: server, Host: "relay.example.org"}),
			"server certificate is not valid for relay.example.org (valid for localhost, 127.0.0.1)"},
		{"no client certificate, relay side", errors.New("tls: client didn't provide a certificate"), "no client certificate"},
		{"no client certificate, MachineID", fmt.Errorf("open tunnel: %w", ErrNoClientCert), "no client certificate"},
		{"certificate required alert", &net.OpError{Op: "remote error", Err: errors.New("tls: certificate required")}, "no client certificate (the server requires one)"},
		{"unknown CA alert, from gRPC", errors.New(`rpc error: code = Unavailable desc = connection error: desc = "error reading server preface: remote error: tls: unknown certificate authority"`),
			"peer refused our certificate: signed by unknown authority"},
		{"expired alert, from gRPC", errors.New(`connection error: desc = "error reading server preface: remote error: tls: expired certificate"`),
			"peer refused our certificate: certificate has expired"},
		{"other alert", errors.New("remote error: tls: internal error"), "peer sent TLS alert: internal error"},
		{"flattened unknown authority", errors.New("transport: authentication handshake failed: tls: failed to verify certificate: x509: certificate signed by unknown authority"),
			"certificate signed by unknown authority"},
		{"not TLS", tls.RecordHeaderError{Msg: "tls: first record does not look like a TLS handshake"}, "peer does not speak TLS"},
		{"TLS 1.2 peer", errors.New("tls: client offered only unsupported versions: [303]"), "peer does not support TLS 1.3"},
		{"hang up", fmt.Errorf("read: %w", io.EOF), "connection closed during handshake"},
		{"timeout", &net.OpError{Op: "read", Err: os.ErrDeadlineExceeded}, "handshake timed out"},
		{"unknown, two lines", errors.New("something\n  else"), "something else"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := DescribeHandshakeError(tt.err); got != tt.want {
				t.Errorf("DescribeHandshakeError(%v)\n got %q\nwant %q", tt.err, got, tt.want)
			}
		})
	}
}

func TestServerConfig(t *testing.T) {
	p := newTestPKI(t)
	cert, key := p.server(t)
	tests := []struct {
		name string
		ca   string
		auth ClientAuth
		want tls.ClientAuthType
	}{
		{"require", p.caFile, RequireClientCert, tls.RequireAndVerifyClientCert},
		{"if given", p.caFile, VerifyClientCertIfGiven, tls.VerifyClientCertIfGiven},
		{"no client CA", "", VerifyClientCertIfGiven, tls.NoClientCert},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := ServerConfig(cert, key, tt.ca, tt.auth)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.ClientAuth != tt.want || cfg.MinVersion != tls.VersionTLS13 || len(cfg.Certificates) != 1 ||
				strings.Join(cfg.NextProtos, ",") != "h2" || (tt.ca != "") != (cfg.ClientCAs != nil) {
				t.Errorf("config: ClientAuth %v MinVersion %x NextProtos %v ClientCAs set %v",
					cfg.ClientAuth, cfg.MinVersion, cfg.NextProtos, cfg.ClientCAs != nil)
			}
		})
	}
}

func TestConfigErrors(t *testing.T) {
	p := newTestPKI(t)
	cert, key := p.server(t)
	mcert, mkey := p.machine(t, "m1")
	notPEM := filepath.Join(t.TempDir(), "empty.crt")
	if err := os.WriteFile(notPEM, []byte("not a certificate\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(t.TempDir(), "missing.crt")
	tests := []struct {
		name string
		call func() error
		want string
	}{
		{"server without key", func() error { _, err := ServerConfig(cert, "", "", RequireClientCert); return err }, "both required"},
		{"server key mismatch", func() error { _, err := ServerConfig(cert, mkey, "", RequireClientCert); return err }, "load certificate"},
		{"server CA missing", func() error { _, err := ServerConfig(cert, key, missing, RequireClientCert); return err }, "missing.crt"},
		{"server CA not PEM", func() error { _, err := ServerConfig(cert, key, notPEM, RequireClientCert); return err }, "no PEM certificate"},
		{"unknown mode", func() error { _, err := ServerConfig(cert, key, p.caFile, ClientAuth(7)); return err }, "ClientAuth(7)"},
		{"client cert without key", func() error { _, err := ClientConfig(p.caFile, mcert, "", "relay"); return err }, "set both or neither"},
		{"client key without cert", func() error { _, err := ClientConfig(p.caFile, "", mkey, "relay"); return err }, "set both or neither"},
		{"client CA missing", func() error { _, err := ClientConfig(missing, "", "", "relay"); return err }, "missing.crt"},
		{"client key missing", func() error { _, err := ClientConfig(p.caFile, mcert, missing, "relay"); return err }, "missing.crt"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestClientConfig(t *testing.T) {
	p := newTestPKI(t)
	mcert, mkey := p.machine(t, "m1")
	agent, err := ClientConfig(p.caFile, mcert, mkey, "relay.example.org")
	if err != nil {
		t.Fatal(err)
	}
	if len(agent.Certificates) != 1 || agent.RootCAs == nil || agent.ServerName != "relay.example.org" ||
		agent.MinVersion != tls.VersionTLS13 || strings.Join(agent.NextProtos, ",") != "h2" {
		t.Errorf("agent config: %d certificates, RootCAs set %v, ServerName %q, MinVersion %x, NextProtos %v",
			len(agent.Certificates), agent.RootCAs != nil, agent.ServerName, agent.MinVersion, agent.NextProtos)
	}
	plain, err := ClientConfig("", "", "", "")
	if err != nil {
		t.Fatal(err)
	}
	if len(plain.Certificates) != 0 || plain.RootCAs != nil {
		t.Errorf("plain client: %d certificates, RootCAs set %v; want none and the system roots", len(plain.Certificates), plain.RootCAs != nil)
	}
}

func TestMachineIDFromPeerWithoutTLS(t *testing.T) {
	if _, err := MachineIDFromPeer(context.Background()); err == nil || !strings.Contains(err.Error(), "no gRPC peer") {
		t.Errorf("no peer: err = %v", err)
	}
	ctx := peer.NewContext(context.Background(), &peer.Peer{Addr: &net.TCPAddr{}})
	if _, err := MachineIDFromPeer(ctx); !errors.Is(err, ErrNotTLS) {
		t.Errorf("plaintext peer: err = %v, want ErrNotTLS", err)
	}
}

// TestMachineIDFromPeer runs a gRPC health server over TLS on loopback in
// VerifyClientCertIfGiven mode and asks it, from an agent and from a plain
// client, who is calling.
func TestMachineIDFromPeer(t *testing.T) {
	p := newTestPKI(t)
	cert, key := p.server(t)
	cfg, err := ServerConfig(cert, key, p.caFile, VerifyClientCertIfGiven)
	if err != nil {
		t.Fatal(err)
	}
	type seen struct {
		id  string
		err error
	}
	calls := make(chan seen, 1)
	srv := grpc.NewServer(
		grpc.Creds(credentials.NewTLS(cfg)),
		grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
			id, err := MachineIDFromPeer(ctx)
			calls <- seen{id, err}
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

	mcert, mkey := p.machine(t, "laptop-7")
	tests := []struct {
		name      string
		cert, key string
		wantID    string
		wantErr   error
	}{
		{"agent", mcert, mkey, "laptop-7", nil},
		{"plain client", "", "", "", ErrNoClientCert},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ccfg, err := ClientConfig(p.caFile, tt.cert, tt.key, "")
			if err != nil {
				t.Fatal(err)
			}
			conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(credentials.NewTLS(ccfg)))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			if _, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
				t.Fatalf("Check: %v", err)
			}
			got := <-calls
			if got.id != tt.wantID || !errors.Is(got.err, tt.wantErr) {
				t.Errorf("MachineIDFromPeer = %q, %v; want %q, %v", got.id, got.err, tt.wantID, tt.wantErr)
			}
		})
	}
}

func TestLoopback(t *testing.T) {
	for _, tt := range []struct {
		addr string
		want bool
	}{
		{"127.0.0.1:7819", true}, {"[::1]:443", true}, {"localhost:80", true}, {"127.8.9.10:1", true},
		{"0.0.0.0:7819", false}, {"192.168.1.2:80", false}, {"example.com:443", false}, {"127.0.0.1", false}, {"", false}, {":80", false},
	} {
		if got := LoopbackAddr(tt.addr); got != tt.want {
			t.Errorf("LoopbackAddr(%q) = %v, want %v", tt.addr, got, tt.want)
		}
	}
	if !LoopbackHost("::1") || LoopbackHost("10.0.0.1") {
		t.Error("LoopbackHost")
	}
}
