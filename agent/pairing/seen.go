package pairing

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/betcode-dev/betcode/agent/internal/atomicfile"
)

// SeenFile remembers the ids of the sealed envelopes this machine took.
const SeenFile = "sealed-seen.json"

// SeenTTL is how long an envelope id is remembered: longer than the 7 days
// an envelope stays acceptable (docs/e2ee-wire.md §3).
const SeenTTL = 8 * 24 * time.Hour

// maxSeen bounds the remembered ids; past it new envelopes are refused
// rather than old ids forgotten early (which would let them replay).
const maxSeen = 100_000

// Seen.Take's errors.
var (
	ErrSeenFull = errors.New("too many sealed envelopes taken in the last 8 days")
	ErrReplayed = errors.New("this sealed envelope was taken before")
)

// Seen is the set of sealed envelope ids taken in the last SeenTTL,
// persisted (0600) so that a restart does not let one replay. It is safe
// for concurrent use.
type Seen struct {
	path string
	now  func() time.Time

	mu  sync.Mutex
	ids map[string]int64 // id -> when it is forgotten, Unix ms
}

// OpenSeen loads (or starts) the seen ids in dataDir.
func OpenSeen(dataDir string) (*Seen, error) {
	s := &Seen{path: filepath.Join(dataDir, SeenFile), now: time.Now, ids: map[string]int64{}}
	if err := atomicfile.ReadJSON(s.path, &s.ids); err != nil {
		return nil, fmt.Errorf("read sealed envelope ids: %w", err)
	}
	return s, nil
}

// Take remembers id for SeenTTL, on disk before it returns; ErrReplayed
// if it was taken before.
func (s *Seen) Take(id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now().UnixMilli()
	if exp, ok := s.ids[id]; ok && exp > now {
		return ErrReplayed
	}
	for k, exp := range s.ids {
		if exp <= now {
			delete(s.ids, k)
		}
	}
	if len(s.ids) >= maxSeen {
		return ErrSeenFull
	}
	s.ids[id] = now + SeenTTL.Milliseconds()
	if err := s.saveLocked(); err != nil {
		delete(s.ids, id)
		return err
	}
	return nil
}

// Forget drops id: the envelope was not acted on, and may come again.
func (s *Seen) Forget(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.ids[id]; ok {
		delete(s.ids, id)
		_ = s.saveLocked() // remembered a while too long at worst
	}
}

// saveLocked writes the file. s.mu is held.
func (s *Seen) saveLocked() error {
	b, err := json.Marshal(s.ids)
	if err != nil {
		return fmt.Errorf("save sealed envelope ids: %w", err)
	}
	if err := atomicfile.Write(s.path, b, 0o600); err != nil {
		return fmt.Errorf("save sealed envelope ids: %w", err)
	}
	return nil
}
