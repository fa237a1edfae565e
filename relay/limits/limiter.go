package limits

import (
	"hash/maphash"
	"sync/atomic"
	"time"
)

// Limiter enforces the per-token call rate and the concurrent-call caps.
// It is safe for concurrent use.
type Limiter struct {
	cfg     Config
	now     func() time.Time
	seed    maphash.Seed
	rates   rateTable
	tokens  counters // open calls per token
	tunnels counters // open calls per machine
}

// Option configures a Limiter.
type Option func(*Limiter)

// WithClock makes the Limiter read the time from now instead of time.Now.
func WithClock(now func() time.Time) Option {
	return func(l *Limiter) { l.now = now }
}

// New returns a Limiter enforcing cfg (zero fields take the defaults).
func New(cfg Config, opts ...Option) (*Limiter, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.WithDefaults()
	l := &Limiter{cfg: cfg, now: time.Now, seed: maphash.MakeSeed()}
	for _, o := range opts {
		o(l)
	}
	l.rates.init(cfg)
	l.tokens.init()
	l.tunnels.init()
	return l, nil
}

// Config returns the limits l enforces, defaults filled in.
func (l *Limiter) Config() Config { return l.cfg }

// Allow takes one call from tokenID's bucket. When the bucket is empty it
// reports false and how long until a call would be allowed. tokenID is an
// opaque key: calls with the same one share a bucket.
func (l *Limiter) Allow(tokenID string) (ok bool, retryAfter time.Duration) {
	return l.rates.allow(l.hash(tokenID), tokenID, l.now())
}

// AcquireStream counts a call starting for tokenID on machineID's tunnel
// against MaxStreamsPerToken and MaxStreamsPerTunnel. If either cap is
// reached it returns a *StreamLimitError (errors.Is ErrTooManyStreams)
// naming the cap; otherwise release must be called once the call is over
// (calling it again does nothing).
func (l *Limiter) AcquireStream(tokenID, machineID string) (release func(), err error) {
	tc, ok := l.tokens.acquire(l.hash(tokenID), tokenID, l.cfg.MaxStreamsPerToken)
	if !ok {
		return nil, &StreamLimitError{Scope: ScopeToken, Limit: l.cfg.MaxStreamsPerToken}
	}
	mc, ok := l.tunnels.acquire(l.hash(machineID), machineID, l.cfg.MaxStreamsPerTunnel)
	if !ok {
		l.tokens.release(tc)
		return nil, &StreamLimitError{Scope: ScopeTunnel, Limit: l.cfg.MaxStreamsPerTunnel}
	}
	var done atomic.Bool
	return func() {
		if done.CompareAndSwap(false, true) {
			l.tunnels.release(mc)
			l.tokens.release(tc)
		}
	}, nil
}

func (l *Limiter) hash(key string) uint64 { return maphash.String(l.seed, key) }
