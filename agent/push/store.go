// Package push notifies the machine's paired devices of what waits for
// them (a permission request, a question, a turn's end) by Web Push,
// encrypted here for each browser's subscription (RFC 8291): the relay
// only signs the VAPID header and carries the opaque message
// (docs/e2ee-wire.md, "Push, encrypted by the machine").
//
// The pieces:
//
//   - Store (store.go) keeps the subscriptions per paired device, 0600 in
//     the data directory.
//   - Handler (handler.go) serves POST /push/subscriptions and DELETE
//     /push/subscriptions/{id} to a device inside its channel.
//   - Notifier (notifier.go) watches the machine's sessions in process and
//     sends each notification to every subscription of every paired,
//     unrevoked device through a Sender (the relay link's
//     TunnelService.SendPush).
package push

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/betcode-dev/betcode/agent/internal/atomicfile"
)

// File is the store's file in the agent's data directory.
const File = "push-subscriptions.json"

// maxPerDevice bounds one device's subscriptions (a browser has one; a
// device re-subscribing with a new endpoint replaces none, so allow a few).
const maxPerDevice = 10

// Errors of the store.
var (
	ErrNotFound = errors.New("no such push subscription")
	ErrTooMany  = errors.New("this device has too many push subscriptions: delete one")
)

// Subscription is a browser's push subscription, given by a paired device.
type Subscription struct {
	ID       string `json:"id"`
	DeviceID string `json:"device_id"`
	Endpoint string `json:"endpoint"`
	P256dh   string `json:"p256dh"`
	Auth     string `json:"auth"`
	Name     string `json:"name,omitempty"`
	// Kinds are the notification kinds it wants; empty means all.
	Kinds     []string  `json:"kinds,omitempty"`
	CreatedAt time.Time `json:"created_at"`
}

// Wants reports whether the subscription wants notifications of kind.
func (s Subscription) Wants(kind string) bool {
	return len(s.Kinds) == 0 || slices.Contains(s.Kinds, kind)
}

// Store keeps the subscriptions. It is safe for concurrent use.
type Store struct {
	path string
	now  func() time.Time

	mu   sync.Mutex
	subs []Subscription
}

// OpenStore loads (or starts) the store in dataDir.
func OpenStore(dataDir string) (*Store, error) {
	s := &Store{path: filepath.Join(dataDir, File), now: time.Now}
	if err := atomicfile.ReadJSON(s.path, &s.subs); err != nil {
		return nil, fmt.Errorf("read push subscriptions: %w (move it aside to start with none)", err)
	}
	return s, nil
}

// List returns every subscription.
func (s *Store) List() []Subscription {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.subs)
}

// Add stores a device's subscription; the device's earlier one with the
// same endpoint is replaced.
func (s *Store) Add(sub Subscription) (Subscription, error) {
	id := make([]byte, 8)
	if _, err := rand.Read(id); err != nil {
		return Subscription{}, err
	}
	sub.ID, sub.CreatedAt = hex.EncodeToString(id), s.now().UTC()
	s.mu.Lock()
	defer s.mu.Unlock()
	old := slices.Clone(s.subs)
	s.subs = slices.DeleteFunc(s.subs, func(o Subscription) bool { return o.DeviceID == sub.DeviceID && o.Endpoint == sub.Endpoint })
	n := 0
	for _, o := range s.subs {
		if o.DeviceID == sub.DeviceID {
			n++
		}
	}
	if n >= maxPerDevice {
		s.subs = old
		return Subscription{}, ErrTooMany
	}
	s.subs = append(s.subs, sub)
	if err := s.saveLocked(); err != nil {
		s.subs = old
		return Subscription{}, err
	}
	return sub, nil
}

// Delete removes subscription id of deviceID (ErrNotFound if it has none
// of that id).
func (s *Store) Delete(deviceID, id string) error {
	return s.remove(func(o Subscription) bool { return o.ID == id && o.DeviceID == deviceID })
}

// Drop removes subscription id, whoever's it is (a push service said it
// is gone).
func (s *Store) Drop(id string) error {
	return s.remove(func(o Subscription) bool { return o.ID == id })
}

// DropDevices removes the subscriptions of devices keep refuses (revoked or
// no longer paired) and returns how many.
func (s *Store) DropDevices(keep func(Subscription) bool) (int, error) {
	n := 0
	err := s.remove(func(o Subscription) bool {
		if keep(o) {
			return false
		}
		n++
		return true
	})
	if errors.Is(err, ErrNotFound) {
		return 0, nil
	}
	return n, err
}

func (s *Store) remove(match func(Subscription) bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := slices.Clone(s.subs)
	s.subs = slices.DeleteFunc(s.subs, match)
	if len(s.subs) == len(old) {
		return ErrNotFound
	}
	if err := s.saveLocked(); err != nil {
		s.subs = old
		return err
	}
	return nil
}

// saveLocked writes the file (0600: it holds the browsers' keys). s.mu is
// held.
func (s *Store) saveLocked() error {
	if err := atomicfile.WriteJSON(s.path, s.subs, 0o600); err != nil {
		return fmt.Errorf("save push subscriptions: %w", err)
	}
	return nil
}
