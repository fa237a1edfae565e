package mtls

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/url"
)

// relayURIHost is the host of the relay URI SAN betcode://relay/<NAME>,
// which marks a relay replica's certificate: replicas present it to each
// other (mTLS) when one forwards a call to the replica holding a tunnel.
const relayURIHost = "relay"

// RelayURI returns the URI SAN that marks a relay certificate.
func RelayURI(name string) *url.URL {
	return &url.URL{Scheme: MachineURIScheme, Host: relayURIHost, Path: "/" + name}
}

// RelayName returns the name in cert's relay URI SAN, or an error when cert
// is not a relay certificate. cert must already be verified.
func RelayName(cert *x509.Certificate) (string, error) {
	for _, u := range cert.URIs {
		if u.Scheme == MachineURIScheme && u.Host == relayURIHost && len(u.Path) > 1 && u.Path[0] == '/' {
			return u.Path[1:], nil
		}
	}
	return "", fmt.Errorf("certificate %q is not a relay certificate: no %s://%s/ URI SAN", cert.Subject.CommonName, MachineURIScheme, relayURIHost)
}

// PeerRelay returns the relay name of the connection's verified client
// certificate; ok is false for any other peer (none, unverified, a
// machine's).
func PeerRelay(state *tls.ConnectionState) (name string, ok bool) {
	if state == nil || len(state.VerifiedChains) == 0 || len(state.VerifiedChains[0]) == 0 {
		return "", false
	}
	name, err := RelayName(state.VerifiedChains[0][0])
	return name, err == nil
}
