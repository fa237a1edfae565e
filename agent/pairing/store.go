// Package pairing keeps what makes a device able to reach this machine end
// to end: the machine's own channel key (made here at first start, private
// half 0600 in the data directory, never sent anywhere), the devices paired
// with it (their pinned public keys, names, when paired and last seen,
// revocations) and the one-time pairing offers `betcode-agent pair` makes.
//
// The relay never sees any of it but the public key's fingerprint inside a
// pairing code's text. docs/security.md describes the protocol.
package pairing

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/betcode-dev/betcode/agent/internal/atomicfile"
	"github.com/betcode-dev/betcode/shared/e2ee"
)

// KeyFile and DevicesFile are the store's files in the agent's data
// directory.
const (
	KeyFile     = "machine-e2ee.key"
	DevicesFile = "paired-devices.json"
)

// OfferTTL is how long a pairing code works.
const OfferTTL = 10 * time.Minute

// maxOffers bounds the codes waiting at once (each is also a relay ticket).
const maxOffers = 5

// Errors the store returns; the services map them to status codes.
var (
	ErrNoDevice    = errors.New("no such paired device")
	ErrAmbiguous   = errors.New("the id matches several devices: give more of it")
	ErrNotPaired   = errors.New("this device is not paired with this machine: pair it (betcode-agent pair on the machine, then betcode pair CODE)")
	ErrRevoked     = errors.New("this device's pairing was revoked on the machine: pair it again to use it")
	ErrNoOffer     = errors.New("no such pairing code: it expired, was used, or was made by another run of the agent")
	ErrOfferLimit  = errors.New("too many pairing codes waiting: use one, or wait for them to expire")
	ErrInvalidName = errors.New("a device name is 1 to 64 printable characters")
	ErrShareEnded  = errors.New("the session share this device was paired for has ended: ask the session's owner for a new one")
)

// Device is one paired device.
type Device struct {
	ID          string    `json:"id"`
	Name        string    `json:"name"`
	Fingerprint string    `json:"fingerprint"`
	PublicKey   []byte    `json:"public_key"`
	PairedAt    time.Time `json:"paired_at"`
	LastSeen    time.Time `json:"last_seen,omitzero"`
	RevokedAt   time.Time `json:"revoked_at,omitzero"`
	// RelayTokenID is the device's relay credential, revoked with it.
	RelayTokenID string `json:"relay_token_id,omitempty"`
	// Share, if set, is the id of the session share (agent/share) this
	// device paired for: a teammate's device, which may use that one
	// session only, until Expires.
	Share   string    `json:"share,omitempty"`
	Expires time.Time `json:"expires,omitzero"`
}

// Ended reports whether the device may no longer open channels at now:
// revoked, or a share's device past its share's end.
func (d *Device) Ended(now time.Time) bool {
	return d.Revoked() || d.Share != "" && !d.Expires.IsZero() && !now.Before(d.Expires)
}

// Revoked reports whether the device was revoked.
func (d *Device) Revoked() bool { return !d.RevokedAt.IsZero() }

// Offer is a pairing code waiting for its device.
type Offer struct {
	ID      string
	Secret  []byte
	Expires time.Time
	// Paired receives the device that paired with the offer, then closes;
	// it closes without a value when the offer expires or is withdrawn.
	Paired chan Device
	// Share is set on a session share's offer (NewShareOffer).
	Share *ShareOffer
}

// ShareOffer is what a share's pairing offer carries: the share, its end,
// and the teammate's relay credential, which the machine hands the device
// that pairs (it never hands a share device a credential of its owner's).
type ShareOffer struct {
	ID      string
	Expires time.Time
	Token   string
	TokenID string
	// SessionID and Mode are what the device is told it may see and do
	// (Welcome.Share); agent/share enforces them.
	SessionID, Mode string
}

// Store is the machine's key, its paired devices and pairing offers. It is
// safe for concurrent use.
type Store struct {
	key  e2ee.KeyPair
	path string
	now  func() time.Time

	mu      sync.Mutex
	devices []Device
	offers  map[string]*Offer
	open    map[string]map[io.Closer]struct{} // device id -> open channels
	dirty   bool                              // last-seen times not yet written
}

// Open loads (or makes) the store in dataDir.
func Open(dataDir string) (*Store, error) {
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, fmt.Errorf("create data dir %q: %w", dataDir, err)
	}
	key, err := e2ee.LoadOrCreateKey(filepath.Join(dataDir, KeyFile))
	if err != nil {
		return nil, fmt.Errorf("machine channel key: %w", err)
	}
	s := &Store{key: key, path: filepath.Join(dataDir, DevicesFile), now: time.Now,
		offers: map[string]*Offer{}, open: map[string]map[io.Closer]struct{}{}}
	if err := atomicfile.ReadJSON(s.path, &s.devices); err != nil {
		return nil, fmt.Errorf("read paired devices: %w (move it aside to start with no paired devices)", err)
	}
	return s, nil
}

// Key is the machine's channel key pair.
func (s *Store) Key() e2ee.KeyPair { return s.key }

// Fingerprint is the machine key's fingerprint.
func (s *Store) Fingerprint() string { return e2ee.Fingerprint(s.key.Public) }

// List returns the paired devices, oldest pairing first.
func (s *Store) List() []Device {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.devices)
}

// find returns the index of the device id names (its id, or a unique prefix
// of its fingerprint's hex). s.mu is held.
func (s *Store) find(id string) (int, error) {
	id = strings.ToLower(strings.ReplaceAll(strings.TrimSpace(id), " ", ""))
	if id == "" {
		return -1, ErrNoDevice
	}
	at := -1
	for i, d := range s.devices {
		if d.ID == id {
			return i, nil
		}
		if strings.HasPrefix(strings.ReplaceAll(d.Fingerprint, " ", ""), id) {
			if at >= 0 {
				return -1, ErrAmbiguous
			}
			at = i
		}
	}
	if at < 0 {
		return -1, ErrNoDevice
	}
	return at, nil
}

// CheckName validates a device name.
func CheckName(name string) error {
	if name == "" || utf8.RuneCountInString(name) > 64 || !utf8.ValidString(name) {
		return ErrInvalidName
	}
	for _, r := range name {
		if !unicode.IsPrint(r) {
			return ErrInvalidName
		}
	}
	return nil
}

// Rename changes a device's name.
func (s *Store) Rename(id, name string) (Device, error) {
	name = strings.TrimSpace(name)
	if err := CheckName(name); err != nil {
		return Device{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	i, err := s.find(id)
	if err != nil {
		return Device{}, err
	}
	old := s.devices[i].Name
	s.devices[i].Name = name
	if err := s.saveLocked(); err != nil {
		s.devices[i].Name = old
		return Device{}, err
	}
	return s.devices[i], nil
}

// Revoke revokes a device and closes its open channels; it returns the
// device and how many channels it closed. Revoking twice is no error.
func (s *Store) Revoke(id string) (Device, int, error) {
	s.mu.Lock()
	i, err := s.find(id)
	if err != nil {
		s.mu.Unlock()
		return Device{}, 0, err
	}
	if !s.devices[i].Revoked() {
		s.devices[i].RevokedAt = s.now().UTC()
		if err := s.saveLocked(); err != nil {
			s.devices[i].RevokedAt = time.Time{}
			s.mu.Unlock()
			return Device{}, 0, err
		}
	}
	d := s.devices[i]
	open := s.open[d.ID]
	delete(s.open, d.ID)
	s.mu.Unlock()
	for c := range open {
		c.Close()
	}
	return d, len(open), nil
}

// Authorize admits a channel from the device with public key pub: it must
// be paired and not revoked. It records the device as seen now.
func (s *Store) Authorize(pub []byte) (Device, error) {
	id := e2ee.FingerprintID(pub)
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.devices {
		d := &s.devices[i]
		if d.ID != id || !e2ee.MatchesFingerprint(pub, d.Fingerprint) {
			continue
		}
		if d.Revoked() {
			return *d, ErrRevoked
		}
		if d.Ended(s.now()) {
			return *d, ErrShareEnded
		}
		d.LastSeen = s.now().UTC()
		s.dirty = true
		return *d, nil
	}
	return Device{}, ErrNotPaired
}

// Track records an open channel of device id, closed by Revoke; the
// returned func forgets it. A device revoked meanwhile has c closed at
// once.
func (s *Store) Track(id string, c io.Closer) (forget func()) {
	s.mu.Lock()
	i, err := s.find(id)
	if err != nil || s.devices[i].Revoked() {
		s.mu.Unlock()
		c.Close()
		return func() {}
	}
	if s.open[id] == nil {
		s.open[id] = map[io.Closer]struct{}{}
	}
	s.open[id][c] = struct{}{}
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		delete(s.open[id], c)
		if len(s.open[id]) == 0 {
			delete(s.open, id)
		}
		s.mu.Unlock()
	}
}

// Add pairs a device (or pairs a revoked one again, under a new name).
func (s *Store) Add(pub []byte, name, relayTokenID string) (Device, error) {
	return s.add(pub, name, relayTokenID, nil)
}

// AddShare pairs a teammate's device for share: it may open channels until
// the share's end, and reach that share's session only (agent/share).
func (s *Store) AddShare(pub []byte, name string, share *ShareOffer) (Device, error) {
	return s.add(pub, name, share.TokenID, share)
}

func (s *Store) add(pub []byte, name, relayTokenID string, share *ShareOffer) (Device, error) {
	if len(pub) != 32 {
		return Device{}, errors.New("a device key is 32 bytes")
	}
	if err := CheckName(name); err != nil {
		name = "device " + e2ee.FingerprintID(pub)[:8]
	}
	d := Device{ID: e2ee.FingerprintID(pub), Name: name, Fingerprint: e2ee.Fingerprint(pub), PublicKey: slices.Clone(pub),
		PairedAt: s.now().UTC(), RelayTokenID: relayTokenID}
	if share != nil {
		d.Share, d.Expires = share.ID, share.Expires.UTC()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old := slices.Clone(s.devices)
	s.devices = slices.DeleteFunc(s.devices, func(o Device) bool { return o.ID == d.ID })
	s.devices = append(s.devices, d)
	if err := s.saveLocked(); err != nil {
		s.devices = old
		return Device{}, err
	}
	return d, nil
}

// Flush writes the devices' last-seen times if they changed.
func (s *Store) Flush() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.dirty {
		return nil
	}
	return s.saveLocked()
}

// saveLocked writes the devices file (0600). s.mu is held.
func (s *Store) saveLocked() error {
	if err := atomicfile.WriteJSON(s.path, s.devices, 0o600); err != nil {
		return fmt.Errorf("save paired devices: %w", err)
	}
	s.dirty = false
	return nil
}

// ByFingerprint returns the device whose key has fingerprint fp (an
// e2ee.Addr's), revoked or not.
func (s *Store) ByFingerprint(fp string) (Device, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, d := range s.devices {
		if d.Fingerprint == fp {
			return d, true
		}
	}
	return Device{}, false
}

// ByShare returns the device that paired for share id, if one did.
func (s *Store) ByShare(id string) (Device, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := len(s.devices) - 1; i >= 0; i-- {
		if s.devices[i].Share == id {
			return s.devices[i], true
		}
	}
	return Device{}, false
}

// NewShareOffer makes the pairing offer of a session share: the device
// that pairs with it is a share's device (AddShare).
func (s *Store) NewShareOffer(share ShareOffer) (*Offer, error) {
	return s.newOffer(&share)
}

// NewOffer makes a pairing offer valid for OfferTTL. Withdraw it when its
// code could not be made.
func (s *Store) NewOffer() (*Offer, error) { return s.newOffer(nil) }

func (s *Store) newOffer(share *ShareOffer) (*Offer, error) {
	secret, err := e2ee.NewPairingSecret()
	if err != nil {
		return nil, err
	}
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, err
	}
	o := &Offer{ID: hex.EncodeToString(b[:]), Secret: secret, Expires: s.now().Add(OfferTTL), Paired: make(chan Device, 1), Share: share}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expireLocked()
	if len(s.offers) >= maxOffers {
		return nil, ErrOfferLimit
	}
	s.offers[o.ID] = o
	return o, nil
}

// Withdraw ends an offer that was not used.
func (s *Store) Withdraw(o *Offer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.offers[o.ID] == o {
		delete(s.offers, o.ID)
		close(o.Paired)
	}
}

// Take returns offer id and removes it: a code pairs one device, once,
// whether the handshake then succeeds or not.
func (s *Store) Take(id string) (*Offer, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expireLocked()
	o, ok := s.offers[id]
	if !ok {
		return nil, ErrNoOffer
	}
	delete(s.offers, id)
	return o, nil
}

// expireLocked drops expired offers. s.mu is held.
func (s *Store) expireLocked() {
	now := s.now()
	for id, o := range s.offers {
		if !now.Before(o.Expires) {
			delete(s.offers, id)
			close(o.Paired)
		}
	}
}
