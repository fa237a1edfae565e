package pki

import (
	"crypto"
	"crypto/x509"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// FuzzSignMachineCSR feeds SignMachineCSR arbitrary bytes. It must never
// panic, must refuse with ErrBadCSR whatever is not a well-signed CSR of an
// accepted key, and whatever it signs must be a plain machine certificate
// for the CSR's key. The seed corpus (testdata/fuzz/FuzzSignMachineCSR)
// holds valid CSRs of each key type, one asking for extra SANs, and
// garbage.
func FuzzSignMachineCSR(f *testing.F) {
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	ca := testCA(f, now.Add(-time.Hour), DefaultCALifetime)
	f.Add(newCSR(f, testKey(f, "p256"), nil))
	f.Fuzz(func(t *testing.T, der []byte) {
		certPEM, cert, err := ca.SignMachineCSR(der, "m-fuzz", time.Hour, now)
		if err != nil {
			if !errors.Is(err, ErrBadCSR) {
				t.Fatalf("error %v does not wrap ErrBadCSR", err)
			}
			if certPEM != nil || cert != nil {
				t.Fatal("a certificate came back with the error")
			}
			return
		}
		csr, perr := x509.ParseCertificateRequest(der)
		if perr != nil {
			t.Fatalf("signed input that is not a CSR: %v", perr)
		}
		if err := csr.CheckSignature(); err != nil {
			t.Fatalf("signed a CSR whose signature does not verify: %v", err)
		}
		if err := checkKey(csr.PublicKey); err != nil {
			t.Fatalf("signed a refused key: %v", err)
		}
		if pk, ok := cert.PublicKey.(interface{ Equal(crypto.PublicKey) bool }); !ok || !pk.Equal(csr.PublicKey) {
			t.Fatal("certificate key is not the CSR's")
		}
		if len(cert.URIs) != 1 || cert.URIs[0].String() != "betcode://machine/m-fuzz" || cert.IsCA ||
			len(cert.DNSNames)+len(cert.IPAddresses)+len(cert.EmailAddresses) != 0 ||
			len(cert.ExtKeyUsage) != 1 || cert.ExtKeyUsage[0] != x509.ExtKeyUsageClientAuth {
			t.Fatalf("certificate is not a plain machine certificate: URIs %v, CA %v, EKU %v", cert.URIs, cert.IsCA, cert.ExtKeyUsage)
		}
		if err := cert.CheckSignatureFrom(ca.Certificate()); err != nil {
			t.Fatalf("certificate not signed by the CA: %v", err)
		}
	})
}

// TestFuzzSeeds checks that the seed corpus still means what its file names
// say: valid-* are signed, everything else is refused.
func TestFuzzSeeds(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzSignMachineCSR")
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) < 5 {
		t.Fatalf("%s holds %d seeds", dir, len(entries))
	}
	now := time.Now()
	ca := testCA(t, now, DefaultCALifetime)
	for _, e := range entries {
		t.Run(e.Name(), func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join(dir, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			der := readSeed(t, string(data))
			_, _, err = ca.SignMachineCSR(der, "m1", time.Hour, now)
			if valid := strings.HasPrefix(e.Name(), "valid-"); valid != (err == nil) {
				t.Errorf("SignMachineCSR err = %v; want signed: %v", err, valid)
			}
		})
	}
}

// readSeed decodes a one-value "go test fuzz v1" file of a []byte.
func readSeed(t *testing.T, s string) []byte {
	t.Helper()
	header, body, ok := strings.Cut(s, "\n")
	body = strings.TrimSpace(body)
	if !ok || header != "go test fuzz v1" || !strings.HasPrefix(body, "[]byte(") || !strings.HasSuffix(body, ")") {
		t.Fatalf("not a one-[]byte fuzz seed: %q", s)
	}
	v, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(body, "[]byte("), ")"))
	if err != nil {
		t.Fatal(err)
	}
	return []byte(v)
}
