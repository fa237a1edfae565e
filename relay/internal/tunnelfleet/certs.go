package tunnelfleet

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
)

// WriteCerts writes each config's certificate and key as PEM (certificate
// then key, repeated), the file ReadCerts reads.
func WriteCerts(path string, cfgs []*tls.Config) error {
	var buf bytes.Buffer
	for _, c := range cfgs {
		crt := c.Certificates[0]
		key, err := x509.MarshalPKCS8PrivateKey(crt.PrivateKey)
		if err != nil {
			return err
		}
		pem.Encode(&buf, &pem.Block{Type: "CERTIFICATE", Bytes: crt.Certificate[0]})
		pem.Encode(&buf, &pem.Block{Type: "PRIVATE KEY", Bytes: key})
	}
	return os.WriteFile(path, buf.Bytes(), 0o600)
}

// ReadCerts reads WriteCerts' file into one client TLS config per agent,
// trusting the relay's CA certificate in caFile.
func ReadCerts(path, caFile string) ([]*tls.Config, error) {
	caPEM, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("read the CA: %w", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		return nil, errors.New("no CA certificate in " + caFile)
	}
	rest, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read the certificates: %w", err)
	}
	var out []*tls.Config
	for {
		var crt, key *pem.Block
		crt, rest = pem.Decode(rest)
		if crt == nil {
			return out, nil
		}
		key, rest = pem.Decode(rest)
		if key == nil {
			return nil, errors.New("certificate without a key in " + path)
		}
		k, err := x509.ParsePKCS8PrivateKey(key.Bytes)
		if err != nil {
			return nil, fmt.Errorf("parse a key in %s: %w", path, err)
		}
		out = append(out, &tls.Config{
			MinVersion: tls.VersionTLS13, NextProtos: []string{"h2"}, ServerName: "127.0.0.1", RootCAs: roots,
			Certificates: []tls.Certificate{{Certificate: [][]byte{crt.Bytes}, PrivateKey: k}},
		})
	}
}
