package pki

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"time"

	"github.com/betcode-dev/betcode/shared/mtls"
)

// ErrBadCSR is wrapped by SignMachineCSR's errors about the certificate
// signing request itself: the caller sent something the relay will not
// sign (gRPC INVALID_ARGUMENT).
var ErrBadCSR = errors.New("bad certificate signing request")

// MaxCSRSize is the largest DER CSR SignMachineCSR reads. A CSR with an
// RSA-8192 key and no extensions is about 1.2 KB.
const MaxCSRSize = 16 << 10

// RSA key sizes SignMachineCSR accepts. The upper bound keeps an
// unauthenticated caller from making the relay verify huge signatures.
const (
	minRSABits = 2048
	maxRSABits = 8192
)

// csrBackdate is subtracted from the NotBefore of certificates signed from a
// CSR. It is shorter than the development PKI's backdate: an enrolled
// machine just talked to the relay, so their clocks roughly agree.
const csrBackdate = time.Minute

// SignMachineCSR signs a client certificate for machine machineID with the
// public key of the PKCS #10 request csrDER, valid from now for lifetime but
// never beyond the CA.
//
// The relay decides everything but the key: the CSR's subject, SANs and
// requested extensions are ignored. The certificate has CN machineID, the
// URI SAN betcode://machine/<machineID>, extended key usage clientAuth only,
// is not a CA, and has a random 128-bit serial. Only ECDSA P-256 and P-384,
// Ed25519 and RSA keys of 2048 to 8192 bits are accepted, and the CSR must
// be signed by its key (proof that the caller holds it).
//
// Errors about the CSR wrap ErrBadCSR; others (a bad machine id or
// lifetime, a CA that cannot sign at now) are the caller's.
func (ca *CA) SignMachineCSR(csrDER []byte, machineID string, lifetime time.Duration, now time.Time) (certPEM []byte, cert *x509.Certificate, err error) {
	if err := mtls.ValidateMachineID(machineID); err != nil {
		return nil, nil, err
	}
	if lifetime <= 0 {
		return nil, nil, fmt.Errorf("certificate lifetime %v: must be positive", lifetime)
	}
	if err := ca.checkValid(now); err != nil {
		return nil, nil, err
	}
	csr, err := parseCSR(csrDER)
	if err != nil {
		return nil, nil, err
	}
	serial, err := newSerial()
	if err != nil {
		return nil, nil, err
	}
	tmpl := machineTemplate(machineID, nil)
	tmpl.SerialNumber = serial
	tmpl.NotBefore = now.Add(-csrBackdate).UTC()
	tmpl.NotAfter = ca.capNotAfter(now.Add(lifetime)).UTC()
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, csr.PublicKey, ca.key)
	if err != nil {
		return nil, nil, fmt.Errorf("sign certificate for machine %q: %w", machineID, err)
	}
	cert, err = x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, fmt.Errorf("parse new certificate: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), cert, nil
}

// parseCSR parses a DER PKCS #10 request and checks what SignMachineCSR
// needs of it: an accepted key type and a valid self-signature. Its errors
// wrap ErrBadCSR.
func parseCSR(der []byte) (*x509.CertificateRequest, error) {
	if len(der) == 0 {
		return nil, fmt.Errorf("%w: empty", ErrBadCSR)
	}
	if len(der) > MaxCSRSize {
		return nil, fmt.Errorf("%w: %d bytes, more than %d", ErrBadCSR, len(der), MaxCSRSize)
	}
	csr, err := x509.ParseCertificateRequest(der)
	if err != nil {
		return nil, fmt.Errorf("%w: want a DER PKCS #10 request: %w", ErrBadCSR, err)
	}
	// The key check comes first: it is cheap, and it bounds the cost of
	// the signature check.
	if err := checkKey(csr.PublicKey); err != nil {
		return nil, err
	}
	if err := csr.CheckSignature(); err != nil {
		return nil, fmt.Errorf("%w: signature does not verify with its key: %w", ErrBadCSR, err)
	}
	return csr, nil
}

// checkKey accepts the key types machines may hold.
func checkKey(pub any) error {
	const want = "want ECDSA P-256 or P-384, Ed25519, or RSA of 2048 to 8192 bits"
	switch k := pub.(type) {
	case *ecdsa.PublicKey:
		if k.Curve != elliptic.P256() && k.Curve != elliptic.P384() {
			return fmt.Errorf("%w: ECDSA key on curve %s: %s", ErrBadCSR, k.Params().Name, want)
		}
	case ed25519.PublicKey:
	case *rsa.PublicKey:
		if bits := k.N.BitLen(); bits < minRSABits || bits > maxRSABits {
			return fmt.Errorf("%w: RSA key of %d bits: %s", ErrBadCSR, bits, want)
		}
	case nil:
		return fmt.Errorf("%w: unsupported public key algorithm: %s", ErrBadCSR, want)
	default:
		return fmt.Errorf("%w: %T key: %s", ErrBadCSR, pub, want)
	}
	return nil
}
