package e2ee

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"

	"github.com/flynn/noise"
)

// Sealed envelopes (docs/e2ee-wire.md §3): one Noise_X handshake message
// from a device to a machine whose key it pinned at pairing. X encrypts to
// the machine's static key and authenticates the device's (ss), like HPKE's
// auth mode; being one-way, it has no forward secrecy against a later theft
// of the machine's key, and a recorded envelope opens again: the payload's
// id and time (Sealed) are what stop a replay, on the machine.

// sealOverhead is what Noise_X adds to a payload: e (32), s encrypted (32
// and a tag), the payload's tag.
const sealOverhead = KeyLen + KeyLen + tagLen + tagLen

// MaxSealedPayload bounds the payload of one envelope.
const MaxSealedPayload = noise.MaxMsgLen - sealOverhead

// ErrSealedInvalid is wrapped by OpenSealed's errors: the envelope is not
// one this machine can open (malformed, altered, sealed to another key or
// another machine id).
var ErrSealedInvalid = errors.New("sealed envelope does not open")

// Seal seals payload (at most MaxSealedPayload bytes) for machine
// machineID, whose static key is machinePub, as the device whose key pair
// is device.
func Seal(device KeyPair, machineID string, machinePub []byte, payload []byte) ([]byte, error) {
	return seal(device, machineID, machinePub, payload, nil)
}

// seal is Seal with the ephemeral key's randomness (nil: crypto/rand).
func seal(device KeyPair, machineID string, machinePub, payload []byte, rng io.Reader) ([]byte, error) {
	switch {
	case machineID == "":
		return nil, errors.New("seal: no machine id")
	case len(machinePub) != KeyLen:
		return nil, fmt.Errorf("seal: the machine's key is %d bytes, not %d", len(machinePub), KeyLen)
	case len(payload) > MaxSealedPayload:
		return nil, fmt.Errorf("seal: payload of %d bytes is over the limit of %d", len(payload), MaxSealedPayload)
	}
	if err := device.check(); err != nil {
		return nil, fmt.Errorf("seal: device key: %w", err)
	}
	hs, err := noise.NewHandshakeState(noise.Config{
		CipherSuite:   suite,
		Random:        rng,
		Pattern:       noise.HandshakeX,
		Initiator:     true,
		Prologue:      []byte(sealPrologue + machineID),
		StaticKeypair: device.dh(),
		PeerStatic:    machinePub,
	})
	if err != nil {
		return nil, fmt.Errorf("seal: start handshake: %w", err)
	}
	msg, _, _, err := hs.WriteMessage(nil, payload)
	if err != nil {
		return nil, fmt.Errorf("seal: %w", err)
	}
	return msg, nil
}

// OpenSealed opens an envelope sealed to machine (this machine's key pair,
// id machineID): it returns the sender's authenticated static key and the
// payload. Whether that key is a paired device, and whether the payload is
// fresh, is the caller's to decide. Every failure wraps ErrSealedInvalid.
func OpenSealed(machine KeyPair, machineID string, sealed []byte) (devicePub, payload []byte, err error) {
	if machineID == "" {
		return nil, nil, errors.New("open sealed envelope: no machine id")
	}
	if err := machine.check(); err != nil {
		return nil, nil, fmt.Errorf("open sealed envelope: machine key: %w", err)
	}
	if len(sealed) < sealOverhead || len(sealed) > noise.MaxMsgLen {
		return nil, nil, fmt.Errorf("%w: %d bytes is not the size of an envelope", ErrSealedInvalid, len(sealed))
	}
	hs, err := noise.NewHandshakeState(noise.Config{
		CipherSuite:   suite,
		Pattern:       noise.HandshakeX,
		Prologue:      []byte(sealPrologue + machineID),
		StaticKeypair: machine.dh(),
	})
	if err != nil {
		return nil, nil, fmt.Errorf("open sealed envelope: start handshake: %w", err)
	}
	payload, _, _, err = hs.ReadMessage(nil, sealed)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: it was altered, or sealed to another machine's key or id: %w", ErrSealedInvalid, err)
	}
	return bytes.Clone(hs.PeerStatic()), payload, nil
}

// Kinds of sealed payloads.
const (
	SealedQueue      = "queue"      // queue a message to a session
	SealedPermission = "permission" // answer a pending permission request
)

// Limits of a sealed payload's fields.
const (
	// MaxSealedText bounds a queued message's text, in bytes.
	MaxSealedText = 32 << 10
	// maxSealedRef bounds a session or request id.
	maxSealedRef = 256
)

// Sealed is the JSON payload of an envelope, version 1.
type Sealed struct {
	V  int    `json:"v"`
	ID string `json:"id"` // idempotency key: 128 random bits, lower-case hex
	At int64  `json:"at"` // the sender's clock, Unix milliseconds
	// Kind is SealedQueue or SealedPermission.
	Kind      string `json:"kind"`
	SessionID string `json:"session_id"`
	Text      string `json:"text,omitempty"`       // queue
	RequestID string `json:"request_id,omitempty"` // permission
	Behavior  string `json:"behavior,omitempty"`   // permission: allow or deny
}

// NewSealedID returns a new envelope id: 128 random bits in hex.
func NewSealedID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("sealed envelope id: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// Validate checks the fields of version 1 (not the time: that is the
// machine's clock's to judge).
func (s Sealed) Validate() error {
	switch {
	case s.V != 1:
		return fmt.Errorf("sealed payload version %d is not 1", s.V)
	case len(s.ID) != 32 || !isLowerHex(s.ID):
		return errors.New("sealed payload id is not 32 lower-case hex digits")
	case s.At <= 0:
		return errors.New("sealed payload has no time")
	case s.SessionID == "" || len(s.SessionID) > maxSealedRef || !utf8.ValidString(s.SessionID):
		return errors.New("sealed payload needs a session_id of at most 256 bytes")
	}
	switch s.Kind {
	case SealedQueue:
		switch {
		case s.Text == "":
			return errors.New("sealed queue payload has no text")
		case len(s.Text) > MaxSealedText:
			return fmt.Errorf("sealed queue payload's text is %d bytes, over the limit of %d", len(s.Text), MaxSealedText)
		case !utf8.ValidString(s.Text):
			return errors.New("sealed queue payload's text is not UTF-8")
		case s.RequestID != "" || s.Behavior != "":
			return errors.New("sealed queue payload carries permission fields")
		}
	case SealedPermission:
		switch {
		case s.RequestID == "" || len(s.RequestID) > maxSealedRef || !utf8.ValidString(s.RequestID):
			return errors.New("sealed permission payload needs a request_id of at most 256 bytes")
		case s.Behavior != "allow" && s.Behavior != "deny":
			return fmt.Errorf("sealed permission payload's behavior %q is not allow or deny", s.Behavior)
		case s.Text != "":
			return errors.New("sealed permission payload carries text")
		}
	default:
		return fmt.Errorf("sealed payload kind %q is not queue or permission", s.Kind)
	}
	return nil
}

func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// ParseSealed decodes and validates a payload.
func ParseSealed(payload []byte) (Sealed, error) {
	var s Sealed
	if err := json.Unmarshal(payload, &s); err != nil {
		return Sealed{}, fmt.Errorf("sealed payload is not JSON: %w", err)
	}
	if err := s.Validate(); err != nil {
		return Sealed{}, err
	}
	return s, nil
}

// SealMessage validates s and seals its JSON (Seal).
func SealMessage(device KeyPair, machineID string, machinePub []byte, s Sealed) ([]byte, error) {
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("seal: %w", err)
	}
	b, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("seal: %w", err)
	}
	return Seal(device, machineID, machinePub, b)
}
