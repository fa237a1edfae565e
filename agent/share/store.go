// Package share keeps the sessions this machine shares with teammates
// (docs/security.md, "Sharing a session") and enforces them: Store holds
// the grants (which session, which teammate, read or answer, until when),
// Service serves ShareService (make, list and revoke a share and its
// one-time code), and Gate is the gRPC interceptor that limits a share's
// device, inside its end-to-end channel, to the calls its grant allows.
//
// A share's device is a paired device (agent/pairing) recorded with the
// share's id; the relay only carries its channel, with a credential the
// machine asked for in the teammate's name.
package share

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/betcode-dev/betcode/agent/internal/atomicfile"
)

// FileName is the grants' file in the agent's data directory.
const FileName = "shares.json"

// Modes of a grant.
const (
	// ModeRead lets the teammate watch the session.
	ModeRead = "read"
	// ModeAnswer also lets it answer the session's permission prompts and
	// questions.
	ModeAnswer = "answer"
)

// Errors of the store.
var (
	ErrNoShare = errors.New("no such share")
)

// Grant is one session shared with one teammate.
type Grant struct {
	ID        string    `json:"id"`
	SessionID string    `json:"session_id"`
	User      string    `json:"user"`
	Mode      string    `json:"mode"`
	CreatedAt time.Time `json:"created_at"`
	ExpiresAt time.Time `json:"expires_at"`
	RevokedAt time.Time `json:"revoked_at,omitzero"`
	// TokenID is the teammate's relay credential for the share, revoked
	// with it.
	TokenID string `json:"token_id,omitempty"`
}

// Live reports whether the grant holds at now.
func (g *Grant) Live(now time.Time) bool {
	return g.RevokedAt.IsZero() && now.Before(g.ExpiresAt)
}

// Store is the machine's grants, kept in a file. It is safe for concurrent
// use.
type Store struct {
	path string

	mu     sync.Mutex
	grants []Grant
	// changed is closed (and replaced) when grants change, waking Service.Run.
	changed chan struct{}
}

// Open loads (or starts) the grants of dataDir.
func Open(dataDir string) (*Store, error) {
	s := &Store{path: filepath.Join(dataDir, FileName), changed: make(chan struct{})}
	if err := atomicfile.ReadJSON(s.path, &s.grants); err != nil {
		return nil, fmt.Errorf("read session shares: %w (move it aside to start with no shares)", err)
	}
	return s, nil
}

// Add stores a new grant.
func (s *Store) Add(g Grant) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.grants = append(s.grants, g)
	if err := s.saveLocked(); err != nil {
		s.grants = s.grants[:len(s.grants)-1]
		return err
	}
	s.notifyLocked()
	return nil
}

// Get returns grant id.
func (s *Store) Get(id string) (Grant, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, g := range s.grants {
		if g.ID == id {
			return g, true
		}
	}
	return Grant{}, false
}

// List returns the grants, newest first.
func (s *Store) List() []Grant {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := slices.Clone(s.grants)
	slices.Reverse(out)
	return out
}

// Revoke marks grant id revoked at at (once; revoking again is no error).
func (s *Store) Revoke(id string, at time.Time) (Grant, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.grants {
		g := &s.grants[i]
		if g.ID != id {
			continue
		}
		if g.RevokedAt.IsZero() {
			g.RevokedAt = at.UTC()
			if err := s.saveLocked(); err != nil {
				g.RevokedAt = time.Time{}
				return Grant{}, err
			}
			s.notifyLocked()
		}
		return *g, nil
	}
	return Grant{}, ErrNoShare
}

// next returns the earliest end of a live grant after now (zero if none)
// and a channel closed when the grants change.
func (s *Store) next(now time.Time) (time.Time, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var at time.Time
	for _, g := range s.grants {
		if g.Live(now) && (at.IsZero() || g.ExpiresAt.Before(at)) {
			at = g.ExpiresAt
		}
	}
	return at, s.changed
}

// ended returns the grants that ended (expired or revoked) by now.
func (s *Store) ended(now time.Time) []Grant {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Grant
	for _, g := range s.grants {
		if !g.Live(now) {
			out = append(out, g)
		}
	}
	return out
}

func (s *Store) notifyLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// saveLocked writes the grants (0600). s.mu is held.
func (s *Store) saveLocked() error {
	if err := atomicfile.WriteJSON(s.path, s.grants, 0o600); err != nil {
		return fmt.Errorf("save session shares: %w", err)
	}
	return nil
}
