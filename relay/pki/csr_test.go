package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"errors"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/betcode-dev/betcode/shared/mtls"
)

// testCA is an in-memory CA made at now.
func testCA(t testing.TB, now time.Time, lifetime time.Duration) *CA {
	t.Helper()
	ca, err := newCA(now, lifetime)
	if err != nil {
		t.Fatal(err)
	}
	return ca.asCA()
}

// newCSR returns a DER CSR for key, asking for whatever tmpl says.
func newCSR(t testing.TB, key crypto.Signer, tmpl *x509.CertificateRequest) []byte {
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

// Keys are slow to make (RSA especially); make each kind once.
var testKeys = struct {
	sync.Mutex
	m map[string]crypto.Signer
}{m: map[string]crypto.Signer{}}

func testKey(t testing.TB, kind string) crypto.Signer {
	t.Helper()
	testKeys.Lock()
	defer testKeys.Unlock()
	if k, ok := testKeys.m[kind]; ok {
		return k
	}
	var (
		k   crypto.Signer
		err error
	)
	switch kind {
	case "p224":
		k, err = ecdsa.GenerateKey(elliptic.P224(), rand.Reader)
	case "p256":
		k, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case "p384":
		k, err = ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	case "p521":
		k, err = ecdsa.GenerateKey(elliptic.P521(), rand.Reader)
	case "ed25519":
		_, k, err = ed25519.GenerateKey(rand.Reader)
	case "rsa1024":
		k, err = rsa.GenerateKey(rand.Reader, 1024)
	case "rsa2048":
		k, err = rsa.GenerateKey(rand.Reader, 2048)
	default:
		t.Fatalf("unknown key kind %q", kind)
	}
	if err != nil {
		t.Fatal(err)
	}
	testKeys.m[kind] = k
	return k
}

func TestSignMachineCSRKeys(t *testing.T) {
	now := time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC)
	ca := testCA(t, now.Add(-time.Hour), DefaultCALifetime)
	tests := []struct {
		key     string
		wantErr string // substring of an ErrBadCSR error; "" means signed
	}{
		{"p256", ""},
		{"p384", ""},
		{"ed25519", ""},
		{"rsa2048", ""},
		{"p224", "ECDSA key on curve P-224"},
		{"p521", "ECDSA key on curve P-521"},
		{"rsa1024", "RSA key of 1024 bits"},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			key := testKey(t, tt.key)
			certPEM, cert, err := ca.SignMachineCSR(newCSR(t, key, nil), "m-abc", 30*24*time.Hour, now)
			if tt.wantErr != "" {
				if !errors.Is(err, ErrBadCSR) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want ErrBadCSR containing %q", err, tt.wantErr)
				}
				if certPEM != nil || cert != nil {
					t.Error("a certificate came back with the error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			checkMachineCert(t, ca, certPEM, cert, "m-abc", key.Public())
			if !cert.NotBefore.Equal(now.Add(-time.Minute)) || !cert.NotAfter.Equal(now.Add(30*24*time.Hour)) {
				t.Errorf("validity %v to %v, want %v to %v", cert.NotBefore, cert.NotAfter, now.Add(-time.Minute), now.Add(30*24*time.Hour))
			}
		})
	}
}

// checkMachineCert checks that cert (and its PEM) is a machine certificate
// for id with key pub that verifies against ca for client auth, and nothing
// more.
func checkMachineCert(t *testing.T, ca *CA, certPEM []byte, cert *x509.Certificate, id string, pub crypto.PublicKey) {
	t.Helper()
	block, rest := pem.Decode(certPEM)
	if block == nil || block.Type != "CERTIFICATE" || len(rest) != 0 {
		t.Fatalf("certPEM is not one PEM certificate: %q", certPEM)
	}
	if parsed, err := x509.ParseCertificate(block.Bytes); err != nil || !parsed.Equal(cert) {
		t.Fatalf("certPEM does not hold cert (%v)", err)
	}
	if pk, ok := cert.PublicKey.(interface{ Equal(crypto.PublicKey) bool }); !ok || !pk.Equal(pub) {
		t.Error("certificate key is not the CSR's")
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.Certificate())
	chains, err := cert.Verify(x509.VerifyOptions{Roots: roots, CurrentTime: cert.NotBefore.Add(time.Minute), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	if err != nil {
		t.Fatalf("certificate does not verify against the CA for client auth: %v", err)
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, CurrentTime: cert.NotBefore.Add(time.Minute), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err == nil {
		t.Error("certificate verifies for server auth")
	}
	got, err := mtls.MachineID(tls.ConnectionState{PeerCertificates: []*x509.Certificate{cert}, VerifiedChains: chains})
	if err != nil || got != id {
		t.Errorf("MachineID = %q, %v; want %q", got, err, id)
	}
	if cert.Subject.CommonName != id || len(cert.Subject.Organization) != 1 || cert.Subject.Organization[0] != organization {
		t.Errorf("subject = %v, want CN %s, O %s", cert.Subject, id, organization)
	}
	if len(cert.URIs) != 1 || cert.URIs[0].String() != "betcode://machine/"+id {
		t.Errorf("URIs = %v, want only betcode://machine/%s", cert.URIs, id)
	}
	if len(cert.DNSNames)+len(cert.IPAddresses)+len(cert.EmailAddresses) != 0 {
		t.Errorf("SANs DNS %v IP %v email %v, want none", cert.DNSNames, cert.IPAddresses, cert.EmailAddresses)
	}
	if len(cert.ExtKeyUsage) != 1 || cert.ExtKeyUsage[0] != x509.ExtKeyUsageClientAuth || len(cert.UnknownExtKeyUsage) != 0 {
		t.Errorf("ExtKeyUsage = %v %v, want clientAuth only", cert.ExtKeyUsage, cert.UnknownExtKeyUsage)
	}
	if cert.KeyUsage != x509.KeyUsageDigitalSignature {
		t.Errorf("KeyUsage = %v, want digitalSignature", cert.KeyUsage)
	}
	if !cert.BasicConstraintsValid || cert.IsCA {
		t.Errorf("BasicConstraintsValid %v IsCA %v, want an explicit CA:FALSE", cert.BasicConstraintsValid, cert.IsCA)
	}
	if bits := cert.SerialNumber.BitLen(); cert.SerialNumber.Sign() <= 0 || bits > 128 || bits < 64 {
		t.Errorf("serial %v: %d bits, want a positive random 128-bit number", cert.SerialNumber, bits)
	}
	if mtls.SerialHex(cert) != strings.ToLower(mtls.SerialHex(cert)) || strings.HasPrefix(mtls.SerialHex(cert), "0") {
		t.Errorf("SerialHex = %q, want lower-case hex without leading zeros", mtls.SerialHex(cert))
	}
}

// TestSignMachineCSRIgnoresRequests sends a CSR that asks for everything a
// machine must not get: other names, a CA, server auth. The certificate
// has none of it.
func TestSignMachineCSRIgnoresRequests(t *testing.T) {
	now := time.Now()
	ca := testCA(t, now, DefaultCALifetime)
	key := testKey(t, "p256")
	ext := func(oid asn1.ObjectIdentifier, critical bool, value any) pkix.Extension {
		der, err := asn1.Marshal(value)
		if err != nil {
			t.Fatal(err)
		}
		return pkix.Extension{Id: oid, Critical: critical, Value: der}
	}
	type basicConstraints struct {
		IsCA       bool `asn1:"optional"`
		MaxPathLen int  `asn1:"optional,default:-1"`
	}
	csr := newCSR(t, key, &x509.CertificateRequest{
		Subject:        pkix.Name{CommonName: "betcode-relay", Organization: []string{"Evil"}},
		DNSNames:       []string{"relay.example.com", "localhost"},
		IPAddresses:    []net.IP{net.IPv4(127, 0, 0, 1)},
		EmailAddresses: []string{"root@example.com"},
		URIs: []*url.URL{
			mtls.MachineURI("someone-else"), mtls.RelayURI("betcode-relay"),
			mtls.OwnerURI(mtls.Owner{Kind: mtls.OwnerTeam, Name: "admins"}),
		},
		ExtraExtensions: []pkix.Extension{
			ext(asn1.ObjectIdentifier{2, 5, 29, 19}, true, basicConstraints{IsCA: true, MaxPathLen: 5}),
			ext(asn1.ObjectIdentifier{2, 5, 29, 37}, false, []asn1.ObjectIdentifier{{1, 3, 6, 1, 5, 5, 7, 3, 1}}),
		},
	})
	parsed, err := x509.ParseCertificateRequest(csr)
	if err != nil {
		t.Fatal(err)
	}
	if len(parsed.Extensions) < 3 {
		t.Fatalf("the CSR asks for %d extensions; the test wants it to ask for SANs, basic constraints and EKU", len(parsed.Extensions))
	}
	certPEM, cert, err := ca.SignMachineCSR(csr, "m-1", time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	checkMachineCert(t, ca, certPEM, cert, "m-1", key.Public())
	if _, ok, err := mtls.CertificateOwner(cert); ok || err != nil {
		t.Errorf("the certificate names an owner (%v)", err)
	}
	if _, err := mtls.RelayName(cert); err == nil {
		t.Error("the certificate names a relay")
	}
	if len(cert.Subject.OrganizationalUnit) != 1 || cert.Subject.OrganizationalUnit[0] != "machine" {
		t.Errorf("subject %v, want OU machine", cert.Subject)
	}
}

func TestSignMachineCSRErrors(t *testing.T) {
	now := time.Now()
	ca := testCA(t, now.Add(-time.Hour), DefaultCALifetime)
	good := newCSR(t, testKey(t, "p256"), nil)
	badSig := append([]byte(nil), good...)
	badSig[len(badSig)-3] ^= 0xff // inside the signature
	pemCSR := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: good})
	expired := testCA(t, now.Add(-3*time.Hour), time.Hour)
	future := testCA(t, now.Add(time.Hour), DefaultCALifetime)
	tests := []struct {
		name     string
		ca       *CA
		csr      []byte
		id       string
		lifetime time.Duration
		badCSR   bool   // the error wraps ErrBadCSR
		want     string // substring of the error
	}{
		{"empty", ca, nil, "m1", time.Hour, true, "empty"},
		{"garbage", ca, []byte("definitely not DER"), "m1", time.Hour, true, "PKCS #10"},
		{"PEM instead of DER", ca, pemCSR, "m1", time.Hour, true, "PKCS #10"},
		{"truncated", ca, good[:len(good)/2], "m1", time.Hour, true, "PKCS #10"},
		{"trailing data", ca, append(append([]byte(nil), good...), 0), "m1", time.Hour, true, "PKCS #10"},
		{"too big", ca, make([]byte, MaxCSRSize+1), "m1", time.Hour, true, "more than"},
		{"bad signature", ca, badSig, "m1", time.Hour, true, "signature does not verify"},
		{"certificate instead of CSR", ca, ca.Certificate().Raw, "m1", time.Hour, true, "PKCS #10"},
		{"bad machine id", ca, good, "a/b", time.Hour, false, "invalid machine id"},
		{"zero lifetime", ca, good, "m1", 0, false, "must be positive"},
		{"negative lifetime", ca, good, "m1", -time.Hour, false, "must be positive"},
		{"expired CA", expired, good, "m1", time.Hour, false, "expired on"},
		{"CA not yet valid", future, good, "m1", time.Hour, false, "not valid before"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			certPEM, cert, err := tt.ca.SignMachineCSR(tt.csr, tt.id, tt.lifetime, now)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tt.want)
			}
			if errors.Is(err, ErrBadCSR) != tt.badCSR {
				t.Errorf("errors.Is(%v, ErrBadCSR) = %v, want %v", err, !tt.badCSR, tt.badCSR)
			}
			if certPEM != nil || cert != nil {
				t.Error("a certificate came back with the error")
			}
		})
	}
}

func TestSignMachineCSRLifetimeCappedByCA(t *testing.T) {
	now := time.Now()
	ca := testCA(t, now, 48*time.Hour)
	_, cert, err := ca.SignMachineCSR(newCSR(t, testKey(t, "ed25519"), nil), "m1", 30*24*time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	if !cert.NotAfter.Equal(ca.Certificate().NotAfter) {
		t.Errorf("NotAfter = %v, want the CA's %v", cert.NotAfter, ca.Certificate().NotAfter)
	}
}

func TestSignMachineCSRSerialsDiffer(t *testing.T) {
	now := time.Now()
	ca := testCA(t, now, DefaultCALifetime)
	csr := newCSR(t, testKey(t, "p256"), nil)
	seen := map[string]bool{}
	for range 20 {
		_, cert, err := ca.SignMachineCSR(csr, "m1", time.Hour, now)
		if err != nil {
			t.Fatal(err)
		}
		s := mtls.SerialHex(cert)
		if seen[s] {
			t.Fatalf("serial %s issued twice", s)
		}
		seen[s] = true
	}
}
