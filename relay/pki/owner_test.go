package pki_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/betcode-dev/betcode/relay/pki"
	"github.com/betcode-dev/betcode/shared/mtls"
)

// TestIssueMachineOwner issues development certificates with and without
// an owner and reads the owner back, as the relay does, from a real mTLS
// handshake.
func TestIssueMachineOwner(t *testing.T) {
	dir := t.TempDir()
	if _, err := pki.Init(dir, []string{"localhost", "127.0.0.1"}, pki.Options{}); err != nil {
		t.Fatal(err)
	}
	p := testPKIs{a: dir}
	tests := []struct {
		name, id, owner string
		want            mtls.Owner
		wantOK          bool
		wantErr         string // substring of IssueMachine's error
	}{
		{name: "user", id: "m-user", owner: "user:alice", want: mtls.Owner{Kind: mtls.OwnerUser, Name: "alice"}, wantOK: true},
		{name: "team", id: "m-team", owner: "team:infra", want: mtls.Owner{Kind: mtls.OwnerTeam, Name: "infra"}, wantOK: true},
		{name: "email-like user", id: "m-mail", owner: "user:bob@example.com", want: mtls.Owner{Kind: mtls.OwnerUser, Name: "bob@example.com"}, wantOK: true},
		{name: "no owner", id: "m-none"},
		{name: "no kind", id: "m-bad1", owner: "alice", wantErr: "want user:NAME or team:NAME"},
		{name: "unknown kind", id: "m-bad2", owner: "group:x", wantErr: `kind "group"`},
		{name: "bad name", id: "m-bad3", owner: "user:a/b", wantErr: "1 to 64 characters"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := pki.IssueMachine(dir, tt.id, pki.Options{Owner: tt.owner})
			if tt.wantErr != "" {
				if !errors.Is(err, mtls.ErrInvalidOwner) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("IssueMachine err = %v, want ErrInvalidOwner containing %q", err, tt.wantErr)
				}
				if _, err := os.Stat(filepath.Join(dir, pki.MachineCertFile(tt.id))); !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("a refused owner still wrote a certificate (%v)", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			wantURIs := 1
			if tt.wantOK {
				wantURIs = 2
			}
			if len(res.Cert.URIs) != wantURIs {
				t.Errorf("URIs = %v, want %d", res.Cert.URIs, wantURIs)
			}
			cert, key := filepath.Join(dir, pki.MachineCertFile(tt.id)), filepath.Join(dir, pki.MachineKeyFile(tt.id))
			state, srvErr, cliErr := handshake(t, p.serverConfig(t, dir, mtls.RequireClientCert), p.clientConfig(t, cert, key, "localhost"))
			if srvErr != nil || cliErr != nil {
				t.Fatalf("handshake: server %v, client %v", srvErr, cliErr)
			}
			if id, err := mtls.MachineID(state); err != nil || id != tt.id {
				t.Errorf("MachineID = %q, %v; want %q", id, err, tt.id)
			}
			got, ok, err := mtls.MachineOwner(state)
			if err != nil || ok != tt.wantOK || got != tt.want {
				t.Errorf("MachineOwner = %+v, %v, %v; want %+v, %v", got, ok, err, tt.want, tt.wantOK)
			}
		})
	}
}

// TestSignedCSRHandshake signs a CSR with the CA loaded from a PKI
// directory and uses the certificate for a real mTLS handshake.
func TestSignedCSRHandshake(t *testing.T) {
	dir := t.TempDir()
	if _, err := pki.Init(dir, []string{"localhost", "127.0.0.1"}, pki.Options{}); err != nil {
		t.Fatal(err)
	}
	ca, err := pki.LoadCA(filepath.Join(dir, pki.CACertFile), filepath.Join(dir, pki.CAKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	csr, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "whatever"}}, key)
	if err != nil {
		t.Fatal(err)
	}
	_, cert, err := ca.SignMachineCSR(csr, "m-enrolled", time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	p := testPKIs{a: dir}
	cli := p.clientConfig(t, "", "", "localhost")
	cli.Certificates = []tls.Certificate{{Certificate: [][]byte{cert.Raw}, PrivateKey: key, Leaf: cert}}
	state, srvErr, cliErr := handshake(t, p.serverConfig(t, dir, mtls.RequireClientCert), cli)
	if srvErr != nil || cliErr != nil {
		t.Fatalf("handshake: server %v, client %v", srvErr, cliErr)
	}
	if id, err := mtls.MachineID(state); err != nil || id != "m-enrolled" {
		t.Errorf("MachineID = %q, %v; want m-enrolled", id, err)
	}
	if _, ok, err := mtls.MachineOwner(state); ok || err != nil {
		t.Errorf("MachineOwner: ok %v, err %v; want no owner", ok, err)
	}
}
