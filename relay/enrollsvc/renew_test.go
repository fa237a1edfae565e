package enrollsvc_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"

	"github.com/betcode-dev/betcode/relay/enrollsvc"
	"github.com/betcode-dev/betcode/relay/pki"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/mtls"
)

// enroll enrolls a machine of team infra and returns its id and
// certificate.
func (e *env) enroll(t *testing.T) (string, *x509.Certificate) {
	t.Helper()
	token := e.joinToken(t, "infra", "alice", e.now.Add(time.Hour))
	resp, err := e.svc.Enroll(plainCtx(t), &pb.EnrollRequest{JoinToken: token, CsrDer: newCSR(t, machineKey(t), nil), Name: "laptop"})
	if err != nil {
		t.Fatal(err)
	}
	return resp.GetMachineId(), parseCert(t, resp.GetCertificatePem())
}

func readCertFile(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return parseCert(t, data)
}

func TestRenewCertificate(t *testing.T) {
	type revokedCall struct{ id, serial string }
	tests := []struct {
		name string
		// ctx is the call's context for machine id with certificate cert.
		ctx func(t *testing.T, e *env, id string, cert *x509.Certificate) context.Context
		// setup changes the world after the enrollment.
		setup     func(t *testing.T, e *env, id string)
		csr       func(t *testing.T) []byte
		isRevoked bool // install an IsRevoked that says yes
		noCA      bool

		code    codes.Code
		betcode string
		msg     string
	}{
		{name: "renew", code: codes.OK},
		{
			name: "revoked machine",
			setup: func(t *testing.T, e *env, id string) {
				if err := e.st.RevokeMachine(t.Context(), id, e.now.Add(-time.Minute)); err != nil {
					t.Fatal(err)
				}
			},
			code: codes.PermissionDenied, betcode: enrollsvc.CodeMachineRevoked, msg: "was revoked at " + time.Now().UTC().Format("2006-01-02"),
		},
		{
			name: "revoked in the cache", isRevoked: true,
			code: codes.PermissionDenied, betcode: enrollsvc.CodeMachineRevoked, msg: "was revoked; enroll it again with a new join token",
		},
		{
			name: "deleted machine",
			setup: func(t *testing.T, e *env, id string) {
				if err := e.st.DeleteMachine(t.Context(), id, e.now); err != nil {
					t.Fatal(err)
				}
			},
			code: codes.NotFound, betcode: enrollsvc.CodeMachineNotFound, msg: "is not registered on this relay",
		},
		{
			name: "development certificate of an unknown machine",
			ctx: func(t *testing.T, e *env, _ string, _ *x509.Certificate) context.Context {
				if _, err := pki.IssueMachine(e.dir, "m1", pki.Options{}); err != nil {
					t.Fatal(err)
				}
				return certCtx(t, readCertFile(t, filepath.Join(e.dir, pki.MachineCertFile("m1"))), e.ca.Certificate())
			},
			code: codes.NotFound, betcode: enrollsvc.CodeMachineNotFound, msg: `machine "m1" is not registered`,
		},
		{
			name: "no client certificate",
			ctx:  func(t *testing.T, _ *env, _ string, _ *x509.Certificate) context.Context { return plainCtx(t) },
			code: codes.Unauthenticated, betcode: enrollsvc.CodeNoClientCert, msg: "no client certificate",
		},
		{
			name: "unverified certificate",
			ctx: func(t *testing.T, _ *env, _ string, cert *x509.Certificate) context.Context {
				state := tls.ConnectionState{PeerCertificates: []*x509.Certificate{cert}}
				return peer.NewContext(t.Context(), &peer.Peer{Addr: testRemote, AuthInfo: credentials.TLSInfo{State: state}})
			},
			code: codes.Unauthenticated, betcode: enrollsvc.CodeNoClientCert, msg: "presented but not verified",
		},
		{
			name: "relay certificate",
			ctx: func(t *testing.T, e *env, _ string, _ *x509.Certificate) context.Context {
				return certCtx(t, readCertFile(t, filepath.Join(e.dir, pki.RelayCertFile)), e.ca.Certificate())
			},
			code: codes.Unauthenticated, betcode: enrollsvc.CodeNoClientCert, msg: "not a machine certificate",
		},
		{
			name: "not TLS",
			ctx: func(t *testing.T, _ *env, _ string, _ *x509.Certificate) context.Context {
				return peer.NewContext(t.Context(), &peer.Peer{Addr: testRemote})
			},
			code: codes.Unauthenticated, betcode: enrollsvc.CodeNoClientCert, msg: "not TLS",
		},
		{
			name: "bad CSR",
			csr:  func(t *testing.T) []byte { return []byte("nope") },
			code: codes.InvalidArgument, betcode: enrollsvc.CodeInvalidCSR, msg: "csr_der: bad certificate signing request",
		},
		{
			name: "no CA key", noCA: true,
			code: codes.FailedPrecondition, betcode: enrollsvc.CodeNoCAKey, msg: "no CA key",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			id, old := e.enroll(t)
			var asked []revokedCall
			if tt.isRevoked {
				e.svc.IsRevoked = func(id, serial string) bool {
					asked = append(asked, revokedCall{id, serial})
					return true
				}
			}
			if tt.setup != nil {
				tt.setup(t, e, id)
			}
			if tt.noCA {
				e.svc.CA = nil
			}
			ctx := certCtx(t, old, e.ca.Certificate())
			if tt.ctx != nil {
				ctx = tt.ctx(t, e, id, old)
			}
			csr := newCSR(t, machineKey(t), nil)
			if tt.csr != nil {
				csr = tt.csr(t)
			}
			e.now = e.now.Add(20 * 24 * time.Hour)
			resp, err := e.svc.RenewCertificate(ctx, &pb.RenewCertificateRequest{CsrDer: csr})
			if tt.isRevoked && (len(asked) != 1 || asked[0] != (revokedCall{id, mtls.SerialHex(old)})) {
				t.Errorf("IsRevoked asked %v, want once for %s and serial %s", asked, id, mtls.SerialHex(old))
			}
			if tt.code != codes.OK {
				checkStatus(t, err, tt.code, tt.betcode, tt.msg)
				ev := e.audit(t, enrollsvc.ActionRenewRefused)
				if len(ev) != 1 || ev[0].Outcome != "denied" || ev[0].Remote != testRemote.String() {
					t.Errorf("audit %+v, want one denied %s from %s", ev, enrollsvc.ActionRenewRefused, testRemote)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			cert := parseCert(t, resp.GetCertificatePem())
			chains, err := cert.Verify(x509.VerifyOptions{Roots: e.roots(), CurrentTime: e.now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
			if err != nil {
				t.Fatalf("renewed certificate does not verify: %v", err)
			}
			if got := chains[0][0].URIs; len(got) != 1 || got[0].String() != "betcode://machine/"+id {
				t.Errorf("renewed certificate URIs %v, want the machine's", got)
			}
			if mtls.SerialHex(cert) == mtls.SerialHex(old) {
				t.Error("renewal reused the serial")
			}
			if got := cert.NotAfter.Sub(e.now); got != enrollsvc.DefaultLifetime || !resp.GetNotAfter().AsTime().Equal(cert.NotAfter) {
				t.Errorf("lifetime %v (not_after %v), want %v", got, resp.GetNotAfter().AsTime(), enrollsvc.DefaultLifetime)
			}
			ev := e.audit(t, enrollsvc.ActionRenewed)
			if len(ev) != 1 || ev[0].Actor != "machine:"+id || ev[0].Target != id || ev[0].Outcome != "ok" ||
				!strings.Contains(ev[0].Detail, mtls.SerialHex(cert)) || !strings.Contains(ev[0].Detail, mtls.SerialHex(old)) {
				t.Errorf("audit %+v, want one %s by machine:%s naming both serials", ev, enrollsvc.ActionRenewed, id)
			}
			checkRecorded(t, e, id, cert)
		})
	}
}

// TestEnrollAndRenewOverTLS runs the service on a real gRPC server over
// TLS on loopback, as the relay does (client certificates verified if
// given): a plain client enrolls, the machine then renews over mTLS with
// the certificate it got, and is refused once revoked.
func TestEnrollAndRenewOverTLS(t *testing.T) {
	e := newEnv(t)
	e.svc.Now = nil // real time: TLS checks validity against it
	addr := serve(t, e)
	token := e.joinToken(t, "infra", "alice", time.Now().Add(time.Hour))
	key := machineKey(t)

	caFile := filepath.Join(e.dir, pki.CACertFile)
	dial := func(cert *tls.Certificate) pb.EnrollServiceClient {
		cfg, err := mtlsClientConfig(caFile)
		if err != nil {
			t.Fatal(err)
		}
		if cert != nil {
			cfg.Certificates = []tls.Certificate{*cert}
		}
		return pb.NewEnrollServiceClient(dialTLS(t, addr, cfg))
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()

	resp, err := dial(nil).Enroll(ctx, &pb.EnrollRequest{JoinToken: token, CsrDer: newCSR(t, key, nil), Name: "laptop"})
	if err != nil {
		t.Fatalf("Enroll: %v", err)
	}
	id := resp.GetMachineId()
	ev := e.audit(t, enrollsvc.ActionEnrolled)
	if len(ev) != 1 || !strings.HasPrefix(ev[0].Remote, "127.0.0.1:") {
		t.Errorf("audit %+v, want the loopback caller's address", ev)
	}
	if got := newCertPool(t, resp.GetCaPem()); !got.Equal(e.roots()) {
		t.Error("ca_pem is not the relay's CA")
	}

	cert := parseCert(t, resp.GetCertificatePem())
	machine := dial(&tls.Certificate{Certificate: [][]byte{cert.Raw}, PrivateKey: key, Leaf: cert})
	renewed, err := machine.RenewCertificate(ctx, &pb.RenewCertificateRequest{CsrDer: newCSR(t, key, nil)})
	if err != nil {
		t.Fatalf("RenewCertificate: %v", err)
	}
	next := parseCert(t, renewed.GetCertificatePem())
	if next.Subject.CommonName != id {
		t.Errorf("renewed certificate for %q, want %q", next.Subject.CommonName, id)
	}

	// The renewed certificate works as well.
	machine = dial(&tls.Certificate{Certificate: [][]byte{next.Raw}, PrivateKey: key, Leaf: next})
	if _, err := machine.RenewCertificate(ctx, &pb.RenewCertificateRequest{CsrDer: newCSR(t, key, nil)}); err != nil {
		t.Fatalf("RenewCertificate with the renewed certificate: %v", err)
	}

	if err := e.st.RevokeMachine(ctx, id, time.Now()); err != nil {
		t.Fatal(err)
	}
	_, err = machine.RenewCertificate(ctx, &pb.RenewCertificateRequest{CsrDer: newCSR(t, key, nil)})
	checkStatus(t, err, codes.PermissionDenied, enrollsvc.CodeMachineRevoked, "was revoked")

	_, err = dial(nil).RenewCertificate(ctx, &pb.RenewCertificateRequest{CsrDer: newCSR(t, key, nil)})
	checkStatus(t, err, codes.Unauthenticated, enrollsvc.CodeNoClientCert, "no client certificate")
}

func newCertPool(t *testing.T, pemData []byte) *x509.CertPool {
	t.Helper()
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(pemData) {
		t.Fatalf("no certificate in %q", pemData)
	}
	return p
}
