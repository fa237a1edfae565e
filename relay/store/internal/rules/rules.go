// Package rules holds the store semantics both backends share: argument
// validation, and deciding which messages of an Enqueue batch are stored,
// which are duplicates and which do not fit. Both backends thus reject the
// same inputs, and one bad message never fails a whole batch.
package rules

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/betcode-dev/betcode/relay/store"
)

// Text reports whether s can be stored in a text column of every backend:
// valid UTF-8 without NUL (PostgreSQL rejects both).
func Text(s string) bool {
	return utf8.ValidString(s) && !strings.ContainsRune(s, 0)
}

func texts(what string, ss ...string) error {
	for _, s := range ss {
		if !Text(s) {
			return fmt.Errorf("%w: %s has invalid UTF-8 or NUL: %q", store.ErrInvalid, what, s)
		}
	}
	return nil
}

// Machine validates m, fills a zero RegisteredAt and LastSeen with now and
// a nil Capabilities with an empty list. RevokedAt is not an argument
// (RevokeMachine sets it) and is cleared.
func Machine(m *store.Machine, now time.Time) error {
	if m.ID == "" || m.OwnerID == "" && m.TeamID == "" {
		return fmt.Errorf("%w: machine id and an owner (user or team) are required", store.ErrInvalid)
	}
	if err := texts("machine field", m.ID, m.OwnerID, m.TeamID, m.Name, m.Hostname, m.OS, m.Arch, m.Version); err != nil {
		return err
	}
	if err := texts("capability", m.Capabilities...); err != nil {
		return err
	}
	if m.Capabilities == nil {
		m.Capabilities = []string{} // NULL would violate NOT NULL
	}
	if m.RegisteredAt.IsZero() {
		m.RegisteredAt = now
	}
	if m.LastSeen.IsZero() {
		m.LastSeen = now
	}
	m.RevokedAt = time.Time{}
	return nil
}

// Message validates m and lim, applies lim's defaults, fills CreatedAt
// and ExpiresAt and a nil Payload with an empty one. The returned Limits has no zero fields.
func Message(m *store.Message, lim store.Limits, now time.Time) (store.Limits, error) {
	if err := lim.Validate(); err != nil {
		return lim, err
	}
	lim = lim.WithDefaults()
	if m.MachineID == "" {
		return lim, fmt.Errorf("%w: message without machine id", store.ErrInvalid)
	}
	if err := texts("message field", m.MachineID, m.OwnerID, m.IdempotencyKey, m.Service, m.Method); err != nil {
		return lim, err
	}
	for k, v := range m.Metadata {
		if err := texts("metadata", k, v); err != nil {
			return lim, err
		}
	}
	if m.CreatedAt.IsZero() {
		m.CreatedAt = now
	}
	if m.ExpiresAt.IsZero() {
		m.ExpiresAt = m.CreatedAt.Add(lim.TTL)
	}
	if m.Payload == nil {
		m.Payload = []byte{} // NULL would violate NOT NULL
	}
	m.ID = 0
	return lim, nil
}

// MetadataJSON encodes md for a metadata column: a JSON object, "{}" when
// empty.
func MetadataJSON(md map[string]string) string {
	if len(md) == 0 {
		return "{}"
	}
	b, _ := json.Marshal(md) // a map[string]string always marshals
	return string(b)
}
