package e2ee

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"net"
	"strconv"
	"strings"
)

// PairingCode is what `betcode-agent pair` prints (as text and as a QR code)
// and `betcode pair TEXT` reads: everything a device needs to pair with a
// machine through a relay.
type PairingCode struct {
	Relay       string // host:port of the relay
	MachineID   string
	Fingerprint string // the machine key's fingerprint (Fingerprint form)
	Offer       string // the non-secret id of this pairing offer: 16 hex characters; a machine may hold several
	Secret      []byte // the one-time pairing secret, 16 to 64 random bytes; it never goes to the relay
	Ticket      string // the relay credential for ChannelService.Pair (a "bct_" token); the relay knows it
}

const (
	// codePrefix starts every pairing code's text.
	codePrefix = "betcode-pair:"
	// codeVersion is the text's version, after the prefix.
	codeVersion = 1
	// MinSecret and MaxSecret bound a pairing secret's length in bytes.
	MinSecret = 16
	MaxSecret = 64
	// secretLen is NewPairingSecret's length: 256 bits.
	secretLen = 32
	// offerLen is the length of an offer id's bytes.
	offerLen = 8
	// maxCodeField bounds a code's relay, machine id and ticket.
	maxCodeField = 255
	// maxCodeText bounds the text ParsePairingCode decodes (a typical code
	// is about 240 characters).
	maxCodeText = 2048
)

// shareTicketPrefix starts the Ticket of a session share's code: a share
// code carries no relay credential. The teammate's device pairs with its
// user's own relay login, which the relay admits to the machine only while
// the machine shares a session with that user (docs/security.md, "Sharing
// a session"); a third user holding the code reaches nothing.
const shareTicketPrefix = "share:"

// ShareTicket is the Ticket of a code that shares a session with user.
func ShareTicket(user string) string { return shareTicketPrefix + user }

// ShareUser returns the user a share code is for; ok is false for an
// ordinary pairing code.
func (c PairingCode) ShareUser() (user string, ok bool) {
	return strings.CutPrefix(c.Ticket, shareTicketPrefix)
}

// NewPairingSecret returns a new one-time pairing secret of 32 random bytes.
func NewPairingSecret() ([]byte, error) {
	s := make([]byte, secretLen)
	if _, err := rand.Read(s); err != nil {
		return nil, fmt.Errorf("random pairing secret: %w", err)
	}
	return s, nil
}

// NewOfferID returns a new random offer id: 8 bytes in hex.
func NewOfferID() (string, error) {
	b := make([]byte, offerLen)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("random offer id: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// validOffer reports whether s has an offer id's form.
func validOffer(s string) bool {
	if len(s) != 2*offerLen {
		return false
	}
	for i := range len(s) {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// String returns the code as compact text, free of spaces and short enough
// for a QR code: "betcode-pair:1:" and the base64url (unpadded) of the binary
// form
//
//	fingerprint, offer, secret, relay, machine id, ticket   each a uvarint length and its bytes
//	CRC-32 (IEEE, big-endian) of the above                  so that a mangled copy is told apart from a wrong code
//
// The text of a code that Validate rejects does not parse.
func (c PairingCode) String() string {
	fp, err := ParseFingerprint(c.Fingerprint)
	if err != nil {
		fp = nil
	}
	offer, err := hex.DecodeString(c.Offer)
	if err != nil || !validOffer(c.Offer) {
		offer = nil
	}
	var b []byte
	for _, f := range [][]byte{fp, offer, c.Secret, []byte(c.Relay), []byte(c.MachineID), []byte(c.Ticket)} {
		b = binary.AppendUvarint(b, uint64(len(f)))
		b = append(b, f...)
	}
	b = binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(b))
	return codePrefix + strconv.Itoa(codeVersion) + ":" + base64.RawURLEncoding.EncodeToString(b)
}

// codeFields names the binary form's fields, in order, for errors.
var codeFields = [...]string{"fingerprint", "offer", "secret", "relay", "machine id", "ticket"}

// ParsePairingCode reads a code's text (see PairingCode.String); space
// around it is ignored. Its errors wrap ErrInvalidPairingCode and say what
// is wrong in words a person who copied the text can act on.
func ParsePairingCode(s string) (PairingCode, error) {
	c, err := parsePairingCode(strings.TrimSpace(s))
	if err != nil {
		return PairingCode{}, fmt.Errorf("%w: %w", ErrInvalidPairingCode, err)
	}
	return c, nil
}

func parsePairingCode(s string) (PairingCode, error) {
	switch {
	case s == "":
		return PairingCode{}, errors.New("it is empty")
	case len(s) > maxCodeText:
		return PairingCode{}, fmt.Errorf("it is %d characters, more than a pairing code's %d", len(s), maxCodeText)
	case !strings.HasPrefix(s, codePrefix):
		return PairingCode{}, fmt.Errorf("it does not start with %q: copy the whole text that `betcode-agent pair` printed", codePrefix)
	}
	version, body, ok := strings.Cut(s[len(codePrefix):], ":")
	if !ok {
		return PairingCode{}, fmt.Errorf("it has no version after %q", codePrefix)
	}
	v, err := strconv.Atoi(version)
	if err != nil || v < 0 {
		return PairingCode{}, fmt.Errorf("its version %q is not a number", version)
	}
	if v != codeVersion {
		return PairingCode{}, fmt.Errorf("it is version %d, and this betcode reads version %d: update betcode and betcode-agent to the same release", v, codeVersion)
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(body)
	if err != nil {
		return PairingCode{}, fmt.Errorf("it is not base64url after the version (was it cut or altered when copied?): %w", err)
	}
	if len(b) < crc32.Size {
		return PairingCode{}, errors.New("it is too short: the text was cut when copied")
	}
	b, sum := b[:len(b)-crc32.Size], binary.BigEndian.Uint32(b[len(b)-crc32.Size:])
	if crc32.ChecksumIEEE(b) != sum {
		return PairingCode{}, errors.New("its checksum does not match: the text was altered when copied")
	}
	var f [len(codeFields)][]byte
	for i, name := range codeFields {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)-k) {
			return PairingCode{}, fmt.Errorf("it ends inside its %s field", name)
		}
		f[i], b = b[k:k+int(n)], b[k+int(n):]
	}
	if len(b) != 0 {
		return PairingCode{}, fmt.Errorf("%d bytes follow its last field", len(b))
	}
	if len(f[0]) != sha256.Size {
		return PairingCode{}, fmt.Errorf("its fingerprint is %d bytes, not %d", len(f[0]), sha256.Size)
	}
	if len(f[1]) != offerLen {
		return PairingCode{}, fmt.Errorf("its offer is %d bytes, not %d", len(f[1]), offerLen)
	}
	c := PairingCode{
		Fingerprint: groupHex(hex.EncodeToString(f[0])),
		Offer:       hex.EncodeToString(f[1]),
		Secret:      append([]byte(nil), f[2]...),
		Relay:       string(f[3]),
		MachineID:   string(f[4]),
		Ticket:      string(f[5]),
	}
	if err := c.validate(); err != nil {
		return PairingCode{}, err
	}
	return c, nil
}

// Validate reports a code that cannot work: a missing or malformed field, or
// a secret shorter than MinSecret. Its errors wrap ErrInvalidPairingCode.
func (c PairingCode) Validate() error {
	if err := c.validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidPairingCode, err)
	}
	return nil
}

func (c PairingCode) validate() error {
	if _, err := ParseFingerprint(c.Fingerprint); err != nil {
		return fmt.Errorf("its machine fingerprint: %w", err)
	}
	if !validOffer(c.Offer) {
		return fmt.Errorf("its offer %q is not %d lower-case hex characters", c.Offer, 2*offerLen)
	}
	switch {
	case len(c.Secret) < MinSecret:
		return fmt.Errorf("its secret is %d bytes; a pairing needs at least %d (%d bits)", len(c.Secret), MinSecret, 8*MinSecret)
	case len(c.Secret) > MaxSecret:
		return fmt.Errorf("its secret is %d bytes, more than %d", len(c.Secret), MaxSecret)
	}
	for _, f := range []struct{ name, v string }{{"relay", c.Relay}, {"machine id", c.MachineID}, {"ticket", c.Ticket}} {
		if err := checkCodeText(f.name, f.v); err != nil {
			return err
		}
	}
	if host, port, err := net.SplitHostPort(c.Relay); err != nil || host == "" || port == "" {
		return fmt.Errorf("its relay %q is not host:port", c.Relay)
	}
	return nil
}

// checkCodeText checks a text field of a code: present, not too long, and
// printable ASCII without spaces (hosts, ids and tokens all are).
func checkCodeText(name, v string) error {
	switch {
	case v == "":
		return fmt.Errorf("it has no %s", name)
	case len(v) > maxCodeField:
		return fmt.Errorf("its %s is %d bytes, more than %d", name, len(v), maxCodeField)
	}
	for i := range len(v) {
		if v[i] <= ' ' || v[i] > '~' {
			return fmt.Errorf("its %s has a character that is not printable ASCII (at byte %d)", name, i)
		}
	}
	return nil
}
