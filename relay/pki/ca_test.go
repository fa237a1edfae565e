package pki

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestLoadCA(t *testing.T) {
	dir := t.TempDir()
	res := mustInit(t, dir)
	ca, err := LoadCA(filepath.Join(dir, CACertFile), filepath.Join(dir, CAKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	if !ca.Certificate().Equal(res.CA) {
		t.Error("Certificate() is not the CA of the directory")
	}
	file, err := os.ReadFile(filepath.Join(dir, CACertFile))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ca.CertPEM(), file) {
		t.Errorf("CertPEM() = %q, want the file's %q", ca.CertPEM(), file)
	}
	ca.CertPEM()[0] = 'x'
	if !bytes.Equal(ca.CertPEM(), file) {
		t.Error("CertPEM() returns the CA's own buffer")
	}
}

// TestLoadCABundle loads a CA file holding the old and the new CA, as
// during a rotation: the certificate that matches the key signs, and the
// bundle keeps both.
func TestLoadCABundle(t *testing.T) {
	oldDir, newDir := t.TempDir(), t.TempDir()
	mustInit(t, oldDir)
	res := mustInit(t, newDir)
	var bundle []byte
	for _, d := range []string{oldDir, newDir} {
		b, err := os.ReadFile(filepath.Join(d, CACertFile))
		if err != nil {
			t.Fatal(err)
		}
		bundle = append(bundle, b...)
	}
	// Text around PEM blocks (as openssl writes) is dropped.
	bundle = append([]byte("subject=CN = BetCode CA\n"), bundle...)
	bundleFile := filepath.Join(t.TempDir(), "ca-bundle.crt")
	if err := os.WriteFile(bundleFile, bundle, 0o644); err != nil {
		t.Fatal(err)
	}
	ca, err := LoadCA(bundleFile, filepath.Join(newDir, CAKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	if !ca.Certificate().Equal(res.CA) {
		t.Error("the signing certificate is not the one matching the key")
	}
	if got := bytes.Count(ca.CertPEM(), []byte("BEGIN CERTIFICATE")); got != 2 || bytes.Contains(ca.CertPEM(), []byte("subject=")) {
		t.Errorf("CertPEM() holds %d certificates (or stray text), want the 2 of the bundle:\n%s", got, ca.CertPEM())
	}
}

func TestLoadCAErrors(t *testing.T) {
	// Each case gets a fresh PKI in dir and returns the files to load.
	tests := []struct {
		name    string
		files   func(t *testing.T, dir string) (cert, key string)
		want    string
		wantErr error
	}{
		{"missing certificate", func(t *testing.T, dir string) (string, string) {
			return filepath.Join(dir, "nope.crt"), filepath.Join(dir, CAKeyFile)
		}, "read CA certificate", fs.ErrNotExist},
		{"missing key", func(t *testing.T, dir string) (string, string) {
			return filepath.Join(dir, CACertFile), filepath.Join(dir, "nope.key")
		}, "read CA key", fs.ErrNotExist},
		{"certificate is not PEM", func(t *testing.T, dir string) (string, string) {
			return writeTemp(t, dir, "x.crt", []byte("not pem")), filepath.Join(dir, CAKeyFile)
		}, "no PEM CERTIFICATE block", nil},
		{"key is not PEM", func(t *testing.T, dir string) (string, string) {
			return filepath.Join(dir, CACertFile), writeTemp(t, dir, "x.key", []byte("not pem"))
		}, "no PEM block", nil},
		{"key of another CA", func(t *testing.T, dir string) (string, string) {
			other := t.TempDir()
			mustInit(t, other)
			return filepath.Join(dir, CACertFile), filepath.Join(other, CAKeyFile)
		}, "does not match", nil},
		{"not a CA", func(t *testing.T, dir string) (string, string) {
			return filepath.Join(dir, RelayCertFile), filepath.Join(dir, RelayKeyFile)
		}, "is not a CA certificate", nil},
		{"expired", func(t *testing.T, dir string) (string, string) {
			past := func() time.Time { return time.Now().Add(-3 * time.Hour) }
			if _, err := Init(dir, []string{"localhost"}, Options{Now: past, CALifetime: time.Hour, Force: true}); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(dir, CACertFile), filepath.Join(dir, CAKeyFile)
		}, "expired on", nil},
		{"not yet valid", func(t *testing.T, dir string) (string, string) {
			future := func() time.Time { return time.Now().Add(time.Hour) }
			if _, err := Init(dir, []string{"localhost"}, Options{Now: future, Force: true}); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(dir, CACertFile), filepath.Join(dir, CAKeyFile)
		}, "is not valid before", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			mustInit(t, dir)
			cert, key := tt.files(t, dir)
			ca, err := LoadCA(cert, key)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("LoadCA = %v, %v; want an error containing %q", ca, err, tt.want)
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("err = %v, want it to wrap %v", err, tt.wantErr)
			}
			if keyPEM, _ := os.ReadFile(key); len(keyPEM) > 0 && strings.Contains(err.Error(), string(keyPEM)) {
				t.Error("the error quotes the key")
			}
		})
	}
}

// TestLoadCASEC1Key loads a CA whose key is in the SEC 1 "EC PRIVATE KEY"
// form openssl writes.
func TestLoadCASEC1Key(t *testing.T) {
	dir := t.TempDir()
	mustInit(t, dir)
	signer, err := parseKey(mustRead(t, filepath.Join(dir, CAKeyFile)))
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalECPrivateKey(signer.(*ecdsa.PrivateKey))
	if err != nil {
		t.Fatal(err)
	}
	key := writeTemp(t, dir, "sec1.key", pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}))
	if _, err := LoadCA(filepath.Join(dir, CACertFile), key); err != nil {
		t.Fatal(err)
	}
	// An unrelated key of the right type still does not match.
	other, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err = x509.MarshalECPrivateKey(other)
	if err != nil {
		t.Fatal(err)
	}
	key = writeTemp(t, dir, "other.key", pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}))
	if _, err := LoadCA(filepath.Join(dir, CACertFile), key); err == nil || !strings.Contains(err.Error(), "does not match") {
		t.Errorf("LoadCA with another key: err = %v", err)
	}
}

func writeTemp(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
