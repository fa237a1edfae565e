package mtls

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"regexp"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
)

// The machine URI SAN is betcode://machine/<ID>.
const (
	MachineURIScheme = "betcode"
	machineURIHost   = "machine"
)

var (
	// ErrNoClientCert means the connection carries no verified client
	// certificate: the peer is a plain client, not an agent.
	ErrNoClientCert = errors.New("no client certificate")
	// ErrNotTLS means the connection is not a TLS connection at all.
	ErrNotTLS = errors.New("connection is not TLS")
	// ErrInvalidMachineID is wrapped by ValidateMachineID's errors.
	ErrInvalidMachineID = errors.New("invalid machine id")
)

var machineIDRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// ValidateMachineID reports whether id is a well-formed machine id: 1 to 64
// characters from A-Z, a-z, 0-9, '.', '_' and '-'. The set keeps ids safe as
// file names and in URIs without escaping.
func ValidateMachineID(id string) error {
	if !machineIDRE.MatchString(id) {
		return fmt.Errorf("%w %q: want 1 to 64 characters from A-Z a-z 0-9 . _ -", ErrInvalidMachineID, id)
	}
	return nil
}

// MachineURI returns the URI SAN that names machine id in its certificate.
func MachineURI(id string) *url.URL {
	return &url.URL{Scheme: MachineURIScheme, Host: machineURIHost, Path: "/" + id}
}

// MachineID returns the machine id named by the peer's verified client
// certificate. It fails with ErrNoClientCert when the peer presented no
// certificate, or one the handshake did not verify.
func MachineID(state tls.ConnectionState) (string, error) {
	leaf, err := verifiedLeaf(state)
	if err != nil {
		return "", err
	}
	return machineIDFromCert(leaf)
}

// MachineIDFromPeer is MachineID for the connection of a gRPC call.
func MachineIDFromPeer(ctx context.Context) (string, error) {
	state, err := peerTLS(ctx)
	if err != nil {
		return "", err
	}
	return MachineID(state)
}

// verifiedLeaf returns the peer's verified client certificate.
func verifiedLeaf(state tls.ConnectionState) (*x509.Certificate, error) {
	if len(state.VerifiedChains) == 0 || len(state.VerifiedChains[0]) == 0 {
		if len(state.PeerCertificates) > 0 {
			// Only a server that asks for certificates without verifying
			// them gets here; never trust such a certificate.
			return nil, fmt.Errorf("%w: certificate %q was presented but not verified", ErrNoClientCert, state.PeerCertificates[0].Subject.CommonName)
		}
		return nil, ErrNoClientCert
	}
	return state.VerifiedChains[0][0], nil
}

// peerTLS returns the TLS state of a gRPC call's connection.
func peerTLS(ctx context.Context) (tls.ConnectionState, error) {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return tls.ConnectionState{}, errors.New("no gRPC peer in context")
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok {
		return tls.ConnectionState{}, ErrNotTLS
	}
	return info.State, nil
}

// MachineIDOfCert returns the machine id a machine certificate names (its
// machine URI SAN). It does not verify cert: use it on this machine's own
// certificate, never on a peer's.
func MachineIDOfCert(cert *x509.Certificate) (string, error) { return machineIDFromCert(cert) }

// machineIDFromCert reads the machine URI SAN of cert, which must already be
// verified.
func machineIDFromCert(cert *x509.Certificate) (string, error) {
	var ids []string
	for _, u := range cert.URIs {
		if u.Scheme != MachineURIScheme || u.Host != machineURIHost {
			continue
		}
		if u.User != nil || u.RawQuery != "" || u.Fragment != "" || len(u.Path) < 2 || u.Path[0] != '/' {
			return "", fmt.Errorf("certificate %q: malformed machine URI %q", cert.Subject.CommonName, u)
		}
		ids = append(ids, u.Path[1:])
	}
	switch len(ids) {
	case 0:
		return "", fmt.Errorf("certificate %q is not a machine certificate: no %s://%s/ URI SAN", cert.Subject.CommonName, MachineURIScheme, machineURIHost)
	case 1:
	default:
		return "", fmt.Errorf("certificate %q names %d machines, want one", cert.Subject.CommonName, len(ids))
	}
	if err := ValidateMachineID(ids[0]); err != nil {
		return "", fmt.Errorf("certificate %q: %w", cert.Subject.CommonName, err)
	}
	return ids[0], nil
}
