package mtls

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
)

// ownerURIHost is the host of the owner URI SAN
// betcode://owner/user/<NAME> or betcode://owner/team/<NAME>, which a
// development machine certificate (betcode-relay certs machine --owner) may
// carry next to its machine URI. Enrolled machines never carry one: the
// relay records their owner when it signs their CSR.
const ownerURIHost = "owner"

// OwnerKind says whether a machine belongs to a user or to a team.
type OwnerKind string

// Owner kinds.
const (
	OwnerUser OwnerKind = "user"
	OwnerTeam OwnerKind = "team"
)

// ErrInvalidOwner is wrapped by the errors of ParseOwner, Owner.Validate and
// a malformed owner URI SAN.
var ErrInvalidOwner = errors.New("invalid owner")

var ownerNameRE = regexp.MustCompile(`^[A-Za-z0-9._@-]{1,64}$`)

// Owner is the user or team a machine certificate names as the machine's
// owner.
type Owner struct {
	Kind OwnerKind
	// Name is a user id or a team id: 1 to 64 characters from A-Z, a-z,
	// 0-9, '.', '_', '@' and '-'.
	Name string
}

// ParseOwner parses "user:NAME" or "team:NAME", the form of the --owner
// flag.
func ParseOwner(s string) (Owner, error) {
	kind, name, ok := strings.Cut(s, ":")
	if !ok {
		return Owner{}, fmt.Errorf("%w %q: want user:NAME or team:NAME", ErrInvalidOwner, s)
	}
	o := Owner{Kind: OwnerKind(kind), Name: name}
	if err := o.Validate(); err != nil {
		return Owner{}, err
	}
	return o, nil
}

// String returns o as ParseOwner reads it.
func (o Owner) String() string { return string(o.Kind) + ":" + o.Name }

// Validate reports whether o has a known kind and a well-formed name.
func (o Owner) Validate() error {
	if o.Kind != OwnerUser && o.Kind != OwnerTeam {
		return fmt.Errorf("%w: kind %q: want user or team", ErrInvalidOwner, o.Kind)
	}
	if !ownerNameRE.MatchString(o.Name) {
		return fmt.Errorf("%w: %s name %q: want 1 to 64 characters from A-Z a-z 0-9 . _ @ -", ErrInvalidOwner, o.Kind, o.Name)
	}
	return nil
}

// OwnerURI returns the URI SAN that names o as the owner of the machine in
// a certificate. o must be valid.
func OwnerURI(o Owner) *url.URL {
	return &url.URL{Scheme: MachineURIScheme, Host: ownerURIHost, Path: "/" + string(o.Kind) + "/" + o.Name}
}

// CertificateOwner returns the owner named by cert's owner URI SAN; ok is
// false when it names none. A malformed owner URI, or more than one, is an
// error. cert must already be verified.
func CertificateOwner(cert *x509.Certificate) (o Owner, ok bool, err error) {
	var owners []Owner
	for _, u := range cert.URIs {
		if u.Scheme != MachineURIScheme || u.Host != ownerURIHost {
			continue
		}
		o, err := ownerFromURI(u)
		if err != nil {
			return Owner{}, false, fmt.Errorf("certificate %q: %w", cert.Subject.CommonName, err)
		}
		owners = append(owners, o)
	}
	switch len(owners) {
	case 0:
		return Owner{}, false, nil
	case 1:
		return owners[0], true, nil
	}
	return Owner{}, false, fmt.Errorf("certificate %q names %d owners, want at most one: %w", cert.Subject.CommonName, len(owners), ErrInvalidOwner)
}

func ownerFromURI(u *url.URL) (Owner, error) {
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" || u.RawPath != "" {
		return Owner{}, fmt.Errorf("%w: malformed owner URI %q", ErrInvalidOwner, u)
	}
	kind, name, ok := strings.Cut(strings.TrimPrefix(u.Path, "/"), "/")
	if !ok || !strings.HasPrefix(u.Path, "/") {
		return Owner{}, fmt.Errorf("%w: malformed owner URI %q: want %s://%s/user/NAME or /team/NAME", ErrInvalidOwner, u, MachineURIScheme, ownerURIHost)
	}
	o := Owner{Kind: OwnerKind(kind), Name: name}
	if err := o.Validate(); err != nil {
		return Owner{}, fmt.Errorf("owner URI %q: %w", u, err)
	}
	return o, nil
}

// MachineOwner returns the owner named by the peer's verified machine
// certificate; ok is false when the certificate names no owner. It fails
// like MachineID when the peer has no verified machine certificate, and
// when the owner URI SAN is malformed.
func MachineOwner(state tls.ConnectionState) (o Owner, ok bool, err error) {
	leaf, err := verifiedLeaf(state)
	if err != nil {
		return Owner{}, false, err
	}
	// An owner means something only next to a machine identity.
	if _, err := machineIDFromCert(leaf); err != nil {
		return Owner{}, false, err
	}
	return CertificateOwner(leaf)
}

// MachineOwnerFromPeer is MachineOwner for the connection of a gRPC call.
func MachineOwnerFromPeer(ctx context.Context) (o Owner, ok bool, err error) {
	state, err := peerTLS(ctx)
	if err != nil {
		return Owner{}, false, err
	}
	return MachineOwner(state)
}
