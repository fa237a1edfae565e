package pki

import (
	"bytes"
	"crypto"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"time"
)

// CA is a certificate authority that can sign: a CA certificate and its
// private key. The relay holds one when it runs with --ca-key, to sign the
// certificates of enrolling machines. A CA is safe for concurrent use.
type CA struct {
	cert *x509.Certificate
	key  crypto.Signer
	// bundlePEM is every certificate of the file cert was read from: the
	// trust bundle handed to enrolling machines, which during a CA
	// rotation holds the old CA and the new.
	bundlePEM []byte
}

// LoadCA reads a CA certificate file (PEM; it may hold several
// certificates, as during a rotation: the one matching the key signs) and
// its private key (PEM: PKCS #8, SEC 1 or PKCS #1), and checks that they
// make a CA that can sign now.
func LoadCA(certFile, keyFile string) (*CA, error) {
	ca, err := loadCAFiles(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	if err := ca.checkValid(time.Now()); err != nil {
		return nil, fmt.Errorf("%s: %w", certFile, err)
	}
	return ca, nil
}

// Certificate returns the CA certificate that signs. The caller must not
// modify it.
func (ca *CA) Certificate() *x509.Certificate { return ca.cert }

// CertPEM returns the CA certificates in PEM, as read: what a machine needs
// to verify the relay and what the relay verifies machines with.
func (ca *CA) CertPEM() []byte { return bytes.Clone(ca.bundlePEM) }

// capNotAfter cuts notAfter at the CA's expiry: no leaf outlives its CA.
func (ca *CA) capNotAfter(notAfter time.Time) time.Time {
	if notAfter.After(ca.cert.NotAfter) {
		return ca.cert.NotAfter
	}
	return notAfter
}

// checkValid reports a CA that cannot sign at now.
func (ca *CA) checkValid(now time.Time) error {
	if now.Before(ca.cert.NotBefore) {
		return fmt.Errorf("CA %q is not valid before %s (is the clock right?)", ca.cert.Subject.CommonName, ca.cert.NotBefore.UTC().Format(time.RFC3339))
	}
	return ca.checkExpiry(now)
}

// checkExpiry reports a CA that expired at now. The development commands
// check only this: they may backdate a certificate (Options.Now) to before
// the CA.
func (ca *CA) checkExpiry(now time.Time) error {
	if !now.Before(ca.cert.NotAfter) {
		return fmt.Errorf("CA %q expired on %s: create a new PKI (certs init --force) and reissue every certificate", ca.cert.Subject.CommonName, ca.cert.NotAfter.UTC().Format(time.RFC3339))
	}
	return nil
}

// asCA is the CA view of a freshly made CA certificate.
func (i *issued) asCA() *CA {
	return &CA{cert: i.cert, key: i.key, bundlePEM: i.certPEM}
}

// loadCAFiles reads a CA as LoadCA does, without checking its validity
// period.
func loadCAFiles(certPath, keyPath string) (*CA, error) {
	certPEM, err := os.ReadFile(certPath)
	if err != nil {
		return nil, fmt.Errorf("read CA certificate: %w", err)
	}
	keyPEM, err := os.ReadFile(keyPath)
	if err != nil {
		return nil, fmt.Errorf("read CA key: %w", err)
	}
	certs, bundle, err := parseCertificates(certPEM)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", certPath, err)
	}
	key, err := parseKey(keyPEM)
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", keyPath, err)
	}
	pub, ok := key.Public().(interface{ Equal(crypto.PublicKey) bool })
	if !ok {
		return nil, fmt.Errorf("%s: key of type %T is not supported", keyPath, key)
	}
	var cert *x509.Certificate
	for _, c := range certs {
		if pub.Equal(c.PublicKey) {
			cert = c
			break
		}
	}
	if cert == nil {
		return nil, fmt.Errorf("%s does not match %s", keyPath, certPath)
	}
	if !cert.IsCA || (cert.KeyUsage != 0 && cert.KeyUsage&x509.KeyUsageCertSign == 0) {
		return nil, fmt.Errorf("%s is not a CA certificate", certPath)
	}
	return &CA{cert: cert, key: key, bundlePEM: bundle}, nil
}

// parseCertificates returns every CERTIFICATE block of data, parsed and
// re-encoded as a bundle without whatever else the file held.
func parseCertificates(data []byte) ([]*x509.Certificate, []byte, error) {
	var (
		certs  []*x509.Certificate
		bundle []byte
	)
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, nil, fmt.Errorf("parse certificate %d: %w", len(certs)+1, err)
		}
		certs = append(certs, cert)
		bundle = append(bundle, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: block.Bytes})...)
	}
	if len(certs) == 0 {
		return nil, nil, errors.New("no PEM CERTIFICATE block")
	}
	return certs, bundle, nil
}
