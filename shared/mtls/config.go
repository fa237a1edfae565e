package mtls

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// ClientAuth is how a server treats client certificates.
type ClientAuth int

const (
	// RequireClientCert refuses handshakes without a client certificate that
	// chains to the client CA. It is the zero value: the strict mode is the
	// one you get by omission.
	RequireClientCert ClientAuth = iota
	// VerifyClientCertIfGiven accepts handshakes without a client certificate
	// but refuses a presented certificate that does not chain to the client
	// CA. The relay uses it to serve agents and plain clients on one port;
	// whatever needs a machine then calls MachineIDFromPeer.
	VerifyClientCertIfGiven
)

func (a ClientAuth) String() string {
	switch a {
	case RequireClientCert:
		return "require"
	case VerifyClientCertIfGiven:
		return "verify-if-given"
	}
	return fmt.Sprintf("ClientAuth(%d)", int(a))
}

// alpnH2 is the only application protocol: everything over these
// connections is gRPC.
const alpnH2 = "h2"

// ServerConfig returns a TLS 1.3 server configuration serving the certificate
// in certFile with the key in keyFile. With clientCAFile set, client
// certificates are verified against the CA certificates in it, as auth says;
// with clientCAFile empty, client certificates are not asked for and auth is
// ignored.
func ServerConfig(certFile, keyFile, clientCAFile string, auth ClientAuth) (*tls.Config, error) {
	if certFile == "" || keyFile == "" {
		return nil, errors.New("server certificate and key files are both required")
	}
	cert, err := loadKeyPair(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{cert},
		NextProtos:   []string{alpnH2},
		ClientAuth:   tls.NoClientCert,
	}
	if clientCAFile == "" {
		return cfg, nil
	}
	pool, err := loadCertPool(clientCAFile)
	if err != nil {
		return nil, err
	}
	cfg.ClientCAs = pool
	switch auth {
	case RequireClientCert:
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	case VerifyClientCertIfGiven:
		cfg.ClientAuth = tls.VerifyClientCertIfGiven
	default:
		return nil, fmt.Errorf("unknown client auth mode %v", auth)
	}
	return cfg, nil
}

// ClientConfig returns a TLS 1.3 client configuration that verifies the
// server against the CA certificates in caFile (the system roots when caFile
// is empty) under the name serverName (when empty, gRPC uses the host of the
// dial target). Agents pass their machine certificate and key; plain clients
// pass certFile and keyFile empty and present no certificate.
func ClientConfig(caFile, certFile, keyFile, serverName string) (*tls.Config, error) {
	cfg := &tls.Config{
		MinVersion: tls.VersionTLS13,
		NextProtos: []string{alpnH2},
		ServerName: serverName,
	}
	if caFile != "" {
		pool, err := loadCertPool(caFile)
		if err != nil {
			return nil, err
		}
		cfg.RootCAs = pool
	}
	switch {
	case certFile == "" && keyFile == "":
	case certFile == "" || keyFile == "":
		return nil, errors.New("client certificate and key files go together: set both or neither")
	default:
		cert, err := loadKeyPair(certFile, keyFile)
		if err != nil {
			return nil, err
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

func loadKeyPair(certFile, keyFile string) (tls.Certificate, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("load certificate %q and key %q: %w", certFile, keyFile, err)
	}
	return cert, nil
}

func loadCertPool(file string) (*x509.CertPool, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("read CA certificates: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		return nil, fmt.Errorf("read CA certificates %q: no PEM certificate found", file)
	}
	return pool, nil
}
