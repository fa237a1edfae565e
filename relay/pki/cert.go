package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/betcode-dev/betcode/shared/mtls"
)

const organization = "BetCode"

// issued is a certificate with its key, parsed and in PEM.
type issued struct {
	cert    *x509.Certificate
	key     crypto.Signer
	certPEM []byte
	keyPEM  []byte
}

func newCA(now time.Time, lifetime time.Duration) (*issued, error) {
	tmpl := &x509.Certificate{
		Subject:               pkix.Name{Organization: []string{organization}, CommonName: "BetCode CA"},
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		// The CA signs leaves only, never another CA.
		MaxPathLenZero: true,
	}
	return sign(tmpl, nil, now, now.Add(lifetime))
}

// serverTemplate is the relay's certificate. It also serves as a client
// certificate (clientAuth, URI SAN betcode://relay/betcode-relay) when a
// replica forwards a call to the replica that holds the machine's tunnel:
// the peer trusts the forwarded user only from such a certificate.
func serverTemplate(dns []string, ips []net.IP) *x509.Certificate {
	return &x509.Certificate{
		Subject:     pkix.Name{Organization: []string{organization}, CommonName: "betcode-relay"},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		DNSNames:    dns,
		IPAddresses: ips,
		URIs:        []*url.URL{mtls.RelayURI("betcode-relay")},
	}
}

// machineTemplate names the machine as CN and as the URI SAN that
// mtls.MachineID reads. clientAuth only, so a machine certificate cannot
// serve as the relay.
func machineTemplate(id string) *x509.Certificate {
	return &x509.Certificate{
		Subject:     pkix.Name{Organization: []string{organization}, OrganizationalUnit: []string{"machine"}, CommonName: id},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		URIs:        []*url.URL{mtls.MachineURI(id)},
	}
}

// issue signs tmpl with a fresh key, valid from now for lifetime but never
// beyond the CA.
func (ca *issued) issue(tmpl *x509.Certificate, now time.Time, lifetime time.Duration) (*issued, error) {
	notAfter := now.Add(lifetime)
	if notAfter.After(ca.cert.NotAfter) {
		notAfter = ca.cert.NotAfter
	}
	return sign(tmpl, ca, now, notAfter)
}

// sign completes tmpl and signs it with parent, or self-signs it when parent
// is nil.
func sign(tmpl *x509.Certificate, parent *issued, now, notAfter time.Time) (*issued, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate key: %w", err)
	}
	// 128 random bits: unique without keeping a serial counter.
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, fmt.Errorf("generate serial number: %w", err)
	}
	tmpl.SerialNumber = serial
	tmpl.NotBefore = now.Add(-backdate).UTC()
	tmpl.NotAfter = notAfter.UTC()
	parentCert, signer := tmpl, crypto.Signer(key)
	if parent != nil {
		parentCert, signer = parent.cert, parent.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parentCert, key.Public(), signer)
	if err != nil {
		return nil, fmt.Errorf("sign certificate %q: %w", tmpl.Subject.CommonName, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parse new certificate: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encode key: %w", err)
	}
	return &issued{
		cert:    cert,
		key:     key,
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

// loadCA reads the CA of dir and checks that it can sign at now.
func loadCA(dir string, now time.Time) (*issued, error) {
	certPath, keyPath := filepath.Join(dir, CACertFile), filepath.Join(dir, CAKeyFile)
	certPEM, err := os.ReadFile(certPath)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("no CA in %s: run `betcode-relay certs init` first: %w", dir, err)
	}
	if err != nil {
		return nil, fmt.Errorf("read CA certificate: %w", err)
	}
	keyPEM, err := os.ReadFile(keyPath)
	if err != nil {
		return nil, fmt.Errorf("read CA key: %w", err)
	}
	block, _ := pem.Decode(certPEM)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("%s: no PEM CERTIFICATE block", certPath)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", certPath, err)
	}
	if !cert.IsCA {
		return nil, fmt.Errorf("%s is not a CA certificate", certPath)
	}
	if now.After(cert.NotAfter) {
		return nil, fmt.Errorf("CA %s expired on %s: create a new PKI (certs init --force) and reissue every certificate", certPath, cert.NotAfter.UTC().Format(time.RFC3339))
	}
	key, err := parseKey(keyPEM)
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", keyPath, err)
	}
	pub, ok := key.Public().(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !pub.Equal(cert.PublicKey) {
		return nil, fmt.Errorf("%s does not match %s", keyPath, certPath)
	}
	return &issued{cert: cert, key: key, certPEM: certPEM, keyPEM: keyPEM}, nil
}

func parseKey(data []byte) (crypto.Signer, error) {
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, errors.New("no PEM block")
	}
	var (
		key any
		err error
	)
	switch block.Type {
	case "PRIVATE KEY":
		key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(block.Bytes)
	default:
		return nil, fmt.Errorf("unexpected PEM block %q", block.Type)
	}
	if err != nil {
		return nil, err
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("key of type %T cannot sign", key)
	}
	return signer, nil
}
