package limits

import (
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"
)

// clock is a manual clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newLimiter(t testing.TB, cfg Config, c *clock) *Limiter {
	t.Helper()
	var opts []Option
	if c != nil {
		opts = append(opts, WithClock(c.now))
	}
	l, err := New(cfg, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestAllow(t *testing.T) {
	type step struct {
		advance   time.Duration
		token     string
		wantOK    bool
		wantRetry time.Duration // when refused
	}
	tests := []struct {
		name  string
		cfg   Config
		steps []step
	}{
		{
			name: "burst then the rate",
			cfg:  Config{CallsPerSecond: 10, Burst: 2},
			steps: []step{
				{0, "a", true, 0},
				{0, "a", true, 0},
				{0, "a", false, 100 * time.Millisecond},
				{40 * time.Millisecond, "a", false, 60 * time.Millisecond},
				{60 * time.Millisecond, "a", true, 0},
				{0, "a", false, 100 * time.Millisecond},
			},
		},
		{
			name: "tokens have their own buckets",
			cfg:  Config{CallsPerSecond: 1, Burst: 1},
			steps: []step{
				{0, "a", true, 0},
				{0, "a", false, time.Second},
				{0, "b", true, 0},
				{0, "", true, 0},
				{0, "b", false, time.Second},
			},
		},
		{
			name: "an idle token refills to the burst only",
			cfg:  Config{CallsPerSecond: 100, Burst: 3},
			steps: []step{
				{0, "a", true, 0},
				{time.Hour, "a", true, 0},
				{0, "a", true, 0},
				{0, "a", true, 0},
				{0, "a", false, 10 * time.Millisecond},
			},
		},
		{
			name: "the wait is at least a millisecond",
			cfg:  Config{CallsPerSecond: 1e6, Burst: 1},
			steps: []step{
				{0, "a", true, 0},
				{0, "a", false, time.Millisecond},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := newClock()
			l := newLimiter(t, tc.cfg, c)
			for i, s := range tc.steps {
				c.advance(s.advance)
				ok, retry := l.Allow(s.token)
				if ok != s.wantOK || retry != s.wantRetry {
					t.Fatalf("step %d: Allow(%q) = %v, %v; want %v, %v", i, s.token, ok, retry, s.wantOK, s.wantRetry)
				}
			}
		})
	}
}

func TestAllowTableIsBounded(t *testing.T) {
	tests := []struct {
		name    string
		advance time.Duration // between new tokens
	}{
		{"tokens that go idle", time.Second},
		{"tokens all active", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := newClock()
			const max = 1000
			l := newLimiter(t, Config{CallsPerSecond: 1, Burst: 1, MaxTrackedTokens: max}, c)
			for i := range 20 * max {
				l.Allow("flood-" + strconv.Itoa(i))
				if i%97 == 0 {
					if n := l.rates.tracked(); n > max {
						t.Fatalf("after %d tokens the table holds %d, want <= %d", i+1, n, max)
					}
				}
				c.advance(tc.advance)
			}
			if n := l.rates.tracked(); n > max {
				t.Fatalf("the table holds %d tokens, want <= %d", n, max)
			}
		})
	}
}

// An active token keeps its bucket while a flood of tokens that go quiet
// comes and goes through a full table: refilled buckets are evicted first.
func TestAllowEvictsIdleBucketsFirst(t *testing.T) {
	c := newClock()
	// 8 buckets a shard; 10 new tokens a second over 64 shards never
	// fill one with buckets that have not refilled.
	l := newLimiter(t, Config{CallsPerSecond: 1, Burst: 1, MaxTrackedTokens: 512}, c)
	for round := range 1000 {
		c.advance(time.Second)
		if ok, _ := l.Allow("active"); !ok {
			t.Fatalf("round %d: the active token was refused its call", round)
		}
		for i := range 10 {
			l.Allow("flood-" + strconv.Itoa(round*10+i))
		}
		if ok, _ := l.Allow("active"); ok {
			t.Fatalf("round %d: the active token's bucket was reset (a second call in the same second was allowed)", round)
		}
	}
	if n := l.rates.tracked(); n > 512 {
		t.Fatalf("the table holds %d tokens, want <= 512", n)
	}
}

func TestAcquireStream(t *testing.T) {
	type step struct {
		token, machine string
		wantErr        string // "" for success; else the scope
	}
	tests := []struct {
		name  string
		cfg   Config
		steps []step
	}{
		{
			name: "per token",
			cfg:  Config{MaxStreamsPerToken: 2, MaxStreamsPerTunnel: 10},
			steps: []step{
				{"a", "m1", ""}, {"a", "m2", ""}, {"a", "m3", ScopeToken}, {"b", "m1", ""},
			},
		},
		{
			name: "per tunnel",
			cfg:  Config{MaxStreamsPerToken: 10, MaxStreamsPerTunnel: 2},
			steps: []step{
				{"a", "m1", ""}, {"b", "m1", ""}, {"c", "m1", ScopeTunnel}, {"c", "m2", ""},
				// The tunnel refusal gave back c's token slot.
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := newLimiter(t, tc.cfg, nil)
			var releases []func()
			for i, s := range tc.steps {
				rel, err := l.AcquireStream(s.token, s.machine)
				if s.wantErr == "" {
					if err != nil {
						t.Fatalf("step %d: AcquireStream(%q, %q) = %v", i, s.token, s.machine, err)
					}
					releases = append(releases, rel)
					continue
				}
				var le *StreamLimitError
				if !errors.As(err, &le) || le.Scope != s.wantErr || !errors.Is(err, ErrTooManyStreams) {
					t.Fatalf("step %d: AcquireStream(%q, %q) = %v, want a %s cap error", i, s.token, s.machine, err, s.wantErr)
				}
				if rel != nil {
					t.Fatalf("step %d: a refused call got a release func", i)
				}
			}
			for _, rel := range releases {
				rel()
				rel() // idempotent
			}
			if n := l.tokens.keys() + l.tunnels.keys(); n != 0 {
				t.Fatalf("%d counters left after every call was released", n)
			}
		})
	}
}

func TestStreamLimitErrorNamesTheCap(t *testing.T) {
	l := newLimiter(t, Config{MaxStreamsPerToken: 1, MaxStreamsPerTunnel: 3}, nil)
	rel, err := l.AcquireStream("a", "m")
	if err != nil {
		t.Fatal(err)
	}
	defer rel()
	_, err = l.AcquireStream("a", "m")
	if want := "too many concurrent calls for this token: at most 1 at once (MaxStreamsPerToken)"; err == nil || err.Error() != want {
		t.Fatalf("err = %v, want %q", err, want)
	}
	for _, tok := range []string{"b", "c"} {
		r, err := l.AcquireStream(tok, "m")
		if err != nil {
			t.Fatal(err)
		}
		defer r()
	}
	if n := l.tunnels.open(l.hash("m"), "m"); n != 3 {
		t.Fatalf("%d calls counted open on the tunnel, want 3", n)
	}
	_, err = l.AcquireStream("d", "m")
	if n := l.tokens.open(l.hash("d"), "d"); n != 0 {
		t.Fatalf("the refused call left %d open on its token", n)
	}
	if want := "too many concurrent calls to this machine: at most 3 at once (MaxStreamsPerTunnel)"; err == nil || err.Error() != want {
		t.Fatalf("err = %v, want %q", err, want)
	}
}

// Many goroutines taking and giving back slots never see a cap exceeded,
// and every counter is gone at the end.
func TestAcquireStreamConcurrent(t *testing.T) {
	const perToken, perTunnel = 3, 5
	l := newLimiter(t, Config{MaxStreamsPerToken: perToken, MaxStreamsPerTunnel: perTunnel}, nil)
	var open [2]atomic.Int32 // token "t0", tunnel "m0"
	var over atomic.Bool
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			for i := range 2000 {
				tok, m := fmt.Sprintf("t%d", (g+i)%2), fmt.Sprintf("m%d", i%2)
				rel, err := l.AcquireStream(tok, m)
				if err != nil {
					continue
				}
				if tok == "t0" && open[0].Add(1) > perToken {
					over.Store(true)
				}
				if m == "m0" && open[1].Add(1) > perTunnel {
					over.Store(true)
				}
				if tok == "t0" {
					open[0].Add(-1)
				}
				if m == "m0" {
					open[1].Add(-1)
				}
				rel()
			}
		})
	}
	wg.Wait()
	if over.Load() {
		t.Fatal("a cap was exceeded")
	}
	if n := l.tokens.keys() + l.tunnels.keys(); n != 0 {
		t.Fatalf("%d counters left after every call was released", n)
	}
}

func TestCounterShardSize(t *testing.T) {
	if n := unsafe.Sizeof(counterShard{}); n != 64 {
		t.Fatalf("counterShard is %d bytes, want one 64-byte cache line", n)
	}
}

func tokenIDs(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("tok_%016x", i*7919)
	}
	return ids
}

func BenchmarkAllow(b *testing.B) {
	ids := tokenIDs(10_000)
	for _, bc := range []struct {
		name string
		cfg  Config
	}{
		{"allowed", Config{CallsPerSecond: 1e9, Burst: 1 << 20}},
		{"refused", Config{CallsPerSecond: 1e-3, Burst: 1}},
	} {
		b.Run(bc.name+"/10000tokens", func(b *testing.B) {
			l := newLimiter(b, bc.cfg, nil)
			for _, id := range ids {
				l.Allow(id)
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				l.Allow(ids[i%len(ids)])
				i++
			}
		})
		b.Run(bc.name+"/10000tokens/parallel", func(b *testing.B) {
			l := newLimiter(b, bc.cfg, nil)
			for _, id := range ids {
				l.Allow(id)
			}
			var next atomic.Uint64
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				i := next.Add(1) * 7
				for pb.Next() {
					l.Allow(ids[i%uint64(len(ids))])
					i++
				}
			})
		})
	}
	b.Run("new-tokens-at-the-bound", func(b *testing.B) {
		// Every call a token not seen before, the table full: the
		// eviction path.
		l := newLimiter(b, Config{MaxTrackedTokens: 10_000}, nil)
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			l.Allow("flood-" + strconv.Itoa(i))
			i++
		}
	})
}

func BenchmarkAcquireStream(b *testing.B) {
	ids := tokenIDs(10_000)
	machines := tokenIDs(100)
	b.Run("10000tokens", func(b *testing.B) {
		l := newLimiter(b, Config{}, nil)
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			rel, err := l.AcquireStream(ids[i%len(ids)], machines[i%len(machines)])
			if err != nil {
				b.Fatal(err)
			}
			rel()
			i++
		}
	})
	b.Run("10000tokens/held", func(b *testing.B) {
		// Each token already has a call open: the counters exist.
		l := newLimiter(b, Config{MaxStreamsPerTunnel: 1 << 20}, nil)
		for i, id := range ids {
			if _, err := l.AcquireStream(id, machines[i%len(machines)]); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			rel, err := l.AcquireStream(ids[i%len(ids)], machines[i%len(machines)])
			if err != nil {
				b.Fatal(err)
			}
			rel()
			i++
		}
	})
	b.Run("10000tokens/parallel", func(b *testing.B) {
		l := newLimiter(b, Config{MaxStreamsPerTunnel: 1 << 20}, nil)
		var next atomic.Uint64
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			i := next.Add(1) * 13
			for pb.Next() {
				rel, err := l.AcquireStream(ids[i%uint64(len(ids))], machines[i%uint64(len(machines))])
				if err != nil {
					b.Error(err)
					return
				}
				rel()
				i++
			}
		})
	})
}
