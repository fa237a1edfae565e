package peer

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/betcode-dev/betcode/relay/pki"
)

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(data)
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestVerifyPeer: a replica dials only relays of its own CA, whatever
// address it dialled.
func TestVerifyPeer(t *testing.T) {
	ours, theirs := t.TempDir(), t.TempDir()
	for _, dir := range []string{ours, theirs} {
		if _, err := pki.Init(dir, []string{"relay.example.com"}, pki.Options{}); err != nil {
			t.Fatal(err)
		}
		if _, err := pki.IssueMachine(dir, "m1", pki.Options{}); err != nil {
			t.Fatal(err)
		}
	}
	roots := x509.NewCertPool()
	roots.AddCert(readCert(t, filepath.Join(ours, pki.CACertFile)))
	tests := []struct {
		name    string
		cert    string
		wantErr string
	}{
		{"our relay", filepath.Join(ours, pki.RelayCertFile), ""},
		{"a machine of ours", filepath.Join(ours, pki.MachineCertFile("m1")), "peer certificate"},
		{"another CA's relay", filepath.Join(theirs, pki.RelayCertFile), "unknown authority"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := verifyPeer(tls.ConnectionState{PeerCertificates: []*x509.Certificate{readCert(t, tt.cert)}}, roots)
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("verifyPeer = %v; want %q", err, tt.wantErr)
			}
		})
	}
	if err := verifyPeer(tls.ConnectionState{}, roots); err == nil {
		t.Fatal("verifyPeer without a certificate succeeded")
	}
	if _, err := New(filepath.Join(ours, pki.RelayCertFile), filepath.Join(ours, pki.RelayKeyFile), filepath.Join(ours, pki.CACertFile)); err != nil {
		t.Fatal(err)
	}
}
