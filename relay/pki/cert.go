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
	"io/fs"
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
// mtls.MachineID reads, and its owner, when given, as the URI SAN that
// mtls.MachineOwner reads. clientAuth only and not a CA, so a machine
// certificate can neither serve as the relay nor sign.
func machineTemplate(id string, owner *mtls.Owner) *x509.Certificate {
	uris := []*url.URL{mtls.MachineURI(id)}
	if owner != nil {
		uris = append(uris, mtls.OwnerURI(*owner))
	}
	return &x509.Certificate{
		Subject:               pkix.Name{Organization: []string{organization}, OrganizationalUnit: []string{"machine"}, CommonName: id},
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true,
		URIs:                  uris,
	}
}

// issue signs tmpl with a fresh key, valid from now for lifetime but never
// beyond the CA.
func (ca *CA) issue(tmpl *x509.Certificate, now time.Time, lifetime time.Duration) (*issued, error) {
	return sign(tmpl, ca, now, ca.capNotAfter(now.Add(lifetime)))
}

// sign completes tmpl and signs it with parent, or self-signs it when parent
// is nil.
func sign(tmpl *x509.Certificate, parent *CA, now, notAfter time.Time) (*issued, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate key: %w", err)
	}
	serial, err := newSerial()
	if err != nil {
		return nil, err
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

// newSerial returns 128 random bits: unique without keeping a serial
// counter.
func newSerial() (*big.Int, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, fmt.Errorf("generate serial number: %w", err)
	}
	return serial, nil
}

// loadCA reads the CA of dir and checks that it can sign at now.
func loadCA(dir string, now time.Time) (*CA, error) {
	certPath, keyPath := filepath.Join(dir, CACertFile), filepath.Join(dir, CAKeyFile)
	if _, err := os.Stat(certPath); errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("no CA in %s: run `betcode-relay certs init` first: %w", dir, err)
	}
	ca, err := loadCAFiles(certPath, keyPath)
	if err != nil {
		return nil, err
	}
	if err := ca.checkExpiry(now); err != nil {
		return nil, fmt.Errorf("%s: %w", certPath, err)
	}
	return ca, nil
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
	case "RSA PRIVATE KEY":
		key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
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
