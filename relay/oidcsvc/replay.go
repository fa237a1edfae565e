package oidcsvc

import (
	"crypto/sha256"
	"sync"
	"time"
)

// maxSeen bounds the ID tokens remembered as used.
const maxSeen = 100_000

// seenTokens remembers the ID tokens already exchanged, until they expire,
// so that one intercepted on its way (a log, a proxy) cannot be traded for
// client tokens again and again while it lives. It is per replica: with
// several, a token could be exchanged once on each.
type seenTokens struct {
	mu   sync.Mutex
	seen map[[sha256.Size]byte]time.Time // hash -> expiry
}

// first reports whether raw, expiring at exp, is seen for the first time,
// and remembers it until then.
func (s *seenTokens) first(raw string, exp, now time.Time) bool {
	h := sha256.Sum256([]byte(raw))
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seen == nil {
		s.seen = map[[sha256.Size]byte]time.Time{}
	}
	if e, ok := s.seen[h]; ok && now.Before(e) {
		return false
	}
	if len(s.seen) >= maxSeen {
		for k, e := range s.seen {
			if !now.Before(e) {
				delete(s.seen, k)
			}
		}
		// Still full of live tokens (a flood of valid ones is unlikely: each
		// needs the provider's signature): forget one, not refuse everyone.
		for k := range s.seen {
			if len(s.seen) < maxSeen {
				break
			}
			delete(s.seen, k)
		}
	}
	s.seen[h] = exp
	return true
}
