package limits

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

// ErrTooManyStreams: a concurrent-call cap is reached. AcquireStream's
// errors are *StreamLimitError values that match it with errors.Is.
var ErrTooManyStreams = errors.New("too many concurrent calls")

// Scopes of a StreamLimitError.
const (
	ScopeToken  = "token"  // MaxStreamsPerToken
	ScopeTunnel = "tunnel" // MaxStreamsPerTunnel
)

// StreamLimitError says which concurrent-call cap refused a call.
type StreamLimitError struct {
	Scope string // ScopeToken or ScopeTunnel
	Limit int    // the cap
}

func (e *StreamLimitError) Error() string {
	if e.Scope == ScopeTunnel {
		return fmt.Sprintf("%v to this machine: at most %d at once (MaxStreamsPerTunnel)", ErrTooManyStreams, e.Limit)
	}
	return fmt.Sprintf("%v for this token: at most %d at once (MaxStreamsPerToken)", ErrTooManyStreams, e.Limit)
}

// Is makes errors.Is(err, ErrTooManyStreams) hold.
func (e *StreamLimitError) Is(target error) bool { return target == ErrTooManyStreams }

// counterShards spreads the counters' map locks; a power of two.
const counterShards = 64

// counters counts open calls per key. A key's counter exists only while
// calls are open, so the maps hold at most as many entries as there are
// open calls. The count itself is atomic: taking and releasing a slot
// needs only a shared lock, and the exclusive one only to add or remove a
// key.
type counters struct {
	shards [counterShards]counterShard
}

type counterShard struct {
	mu sync.RWMutex
	m  map[string]*counter
	_  [32]byte // one shard per 64-byte cache line
}

// counter is one key's open calls; n is -1 once it has been removed from
// its map, so that a racing acquire retries with a new one.
type counter struct {
	n     atomic.Int32
	key   string
	shard *counterShard
}

func (c *counters) init() {
	for i := range c.shards {
		c.shards[i].m = make(map[string]*counter)
	}
}

// acquire takes one of key's max slots; h is key's hash.
func (c *counters) acquire(h uint64, key string, max int) (*counter, bool) {
	s := &c.shards[h&(counterShards-1)]
	for {
		s.mu.RLock()
		ctr := s.m[key]
		s.mu.RUnlock()
		if ctr == nil {
			s.mu.Lock()
			if ctr = s.m[key]; ctr == nil {
				ctr = &counter{key: key, shard: s}
				s.m[key] = ctr
			}
			s.mu.Unlock()
		}
		for {
			n := ctr.n.Load()
			if n < 0 {
				break // removed meanwhile: look again
			}
			if int(n) >= max {
				return nil, false
			}
			if ctr.n.CompareAndSwap(n, n+1) {
				return ctr, true
			}
		}
	}
}

// release gives back a slot; the last one removes the key.
func (c *counters) release(ctr *counter) {
	if ctr.n.Add(-1) != 0 {
		return
	}
	s := ctr.shard
	s.mu.Lock()
	// Marking and deleting under the lock: an acquire that found ctr
	// either took a slot first (and the CAS fails) or sees -1 and retries
	// after the delete.
	if ctr.n.CompareAndSwap(0, -1) {
		delete(s.m, ctr.key)
	}
	s.mu.Unlock()
}

// open returns key's open calls (for tests).
func (c *counters) open(h uint64, key string) int {
	s := &c.shards[h&(counterShards-1)]
	s.mu.RLock()
	defer s.mu.RUnlock()
	if ctr := s.m[key]; ctr != nil {
		return int(ctr.n.Load())
	}
	return 0
}

// keys returns how many keys have open calls (for tests).
func (c *counters) keys() int {
	n := 0
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.RLock()
		n += len(s.m)
		s.mu.RUnlock()
	}
	return n
}
