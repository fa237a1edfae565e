package limits

import (
	"math"
	"slices"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// rateShards spreads the rate table's locks; a power of two.
const rateShards = 64

// rateTable holds one token bucket per token, at most max of them.
type rateTable struct {
	limit rate.Limit
	burst int
	// refill is how long an untouched bucket takes to fill up: after it,
	// forgetting the bucket changes nothing (a new one starts full).
	refill   time.Duration
	nShards  uint64
	perShard int
	shards   [rateShards]rateShard
}

type rateShard struct {
	mu      sync.Mutex
	m       map[string]*bucket
	scratch []int64 // eviction's sort buffer, kept between evictions
}

type bucket struct {
	lim  *rate.Limiter
	seen int64 // unix nanoseconds of the last call; under the shard's mu
}

func (t *rateTable) init(cfg Config) {
	t.limit = rate.Limit(cfg.CallsPerSecond)
	t.burst = cfg.Burst
	t.refill = time.Duration(math.Ceil(float64(cfg.Burst) / cfg.CallsPerSecond * float64(time.Second)))
	// Fewer shards than tokens allowed, so each holds at least one.
	t.nShards = rateShards
	for t.nShards > 1 && t.nShards > uint64(cfg.MaxTrackedTokens) {
		t.nShards /= 2
	}
	t.perShard = cfg.MaxTrackedTokens / int(t.nShards)
	for i := range t.shards[:t.nShards] {
		t.shards[i].m = make(map[string]*bucket)
	}
}

// allow takes a call from key's bucket at now; h is key's hash.
func (t *rateTable) allow(h uint64, key string, now time.Time) (bool, time.Duration) {
	s := &t.shards[h&(t.nShards-1)]
	ns := now.UnixNano()
	s.mu.Lock()
	b := s.m[key]
	if b == nil {
		if len(s.m) >= t.perShard {
			s.evict(ns, t.refill, t.perShard)
		}
		b = &bucket{lim: rate.NewLimiter(t.limit, t.burst)}
		s.m[key] = b
	}
	b.seen = ns
	s.mu.Unlock()
	if b.lim.AllowN(now, 1) {
		return true, 0
	}
	// The wait for the one token missing; at least a millisecond, the
	// unit clients are told.
	missing := 1 - b.lim.TokensAt(now)
	wait := time.Duration(math.Ceil(missing / float64(t.limit) * float64(time.Second)))
	return false, max(wait, time.Millisecond)
}

// evict makes room for at least a quarter of the shard's capacity, so
// that its cost is spread over as many new tokens. Buckets that have
// refilled go first; if they are too few, the least recently used ones
// follow (their tokens start again with a full bucket: under a flood of
// distinct ids bounded memory wins over exact limits for the oldest).
func (s *rateShard) evict(now int64, refill time.Duration, capacity int) {
	want := max(capacity/4, 1)
	idle := now - int64(refill)
	for k, b := range s.m {
		if b.seen <= idle {
			delete(s.m, k)
		}
	}
	freed := capacity - len(s.m)
	if freed >= want {
		return
	}
	s.scratch = s.scratch[:0]
	for _, b := range s.m {
		s.scratch = append(s.scratch, b.seen)
	}
	slices.Sort(s.scratch)
	cut := s.scratch[want-freed-1]
	for k, b := range s.m {
		if b.seen <= cut {
			delete(s.m, k)
		}
	}
}

// tracked returns how many tokens have a bucket (for tests).
func (t *rateTable) tracked() int {
	n := 0
	for i := range t.shards[:t.nShards] {
		s := &t.shards[i]
		s.mu.Lock()
		n += len(s.m)
		s.mu.Unlock()
	}
	return n
}
