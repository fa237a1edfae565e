package eventlog

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"
)

// rowidMigration is migration 1 with a rowid events table, for
// BenchmarkSchema.
var rowidMigration = func() string {
	m := migrations[0]
	i := len("CREATE TABLE events (")
	end := i + indexOf(m[i:], ") WITHOUT ROWID;")
	return m[:end] + ");" + m[end+len(") WITHOUT ROWID;"):]
}()

func indexOf(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	panic("not found: " + sub)
}

var benchPayload = []byte(`{"type":"text_delta","index":0,"delta":{"type":"text_delta","text":"The quick brown fox jumps over."}}`)[:100]

// withSchema runs f with the events table of the named shape and the given
// synchronous level, restoring the defaults afterwards.
func withSchema(rowid bool, sync string, f func()) {
	saved, savedSync := migrations[0], synchronous
	defer func() { migrations[0], synchronous = saved, savedSync }()
	if rowid {
		migrations[0] = rowidMigration
	}
	synchronous = sync
	f()
}

// BenchmarkAppend measures one producer appending ~100 B events of one
// session through the batched writer, until all are committed (the final
// Flush is timed). It reports events/s and the enqueue-to-commit latency
// seen by OnCommit.
//
// The producer is faster than the writer, so the queue stays full and the
// latency here is mostly queueing (QueueSize / throughput); see
// BenchmarkAppendPaced for latency at a sustainable rate.
func BenchmarkAppend(b *testing.B) {
	benchAppend(b, 0)
}

// BenchmarkAppendPaced appends at a fixed 100,000 events/s (bursts every
// millisecond) and reports the enqueue-to-commit latency at that rate.
func BenchmarkAppendPaced(b *testing.B) {
	benchAppend(b, 100_000)
}

// benchAppend appends b.N events, as fast as possible if rate is 0, else at
// rate events/s.
func benchAppend(b *testing.B, rate int) {
	lat := make([]time.Duration, 0, b.N)
	var batches int
	onCommit := func(evs []Event) {
		now := time.Now()
		batches++
		for i := range evs {
			lat = append(lat, now.Sub(evs[i].Time))
		}
	}
	path := filepath.Join(b.TempDir(), "events.db")
	l, err := Open(b.Context(), path, Options{OnCommit: onCommit, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	var tick *time.Ticker
	if rate > 0 {
		tick = time.NewTicker(time.Millisecond)
		defer tick.Stop()
	}
	for i := 0; i < b.N; i++ {
		if tick != nil {
			// Wait until event i is due; catch up after a late tick.
			for i >= int(time.Since(start).Seconds()*float64(rate)) {
				<-tick.C
			}
		}
		if err := l.Append(ctx, Event{SessionID: "bench", Seq: uint64(i + 1), Time: time.Now(), Kind: "text_delta", Payload: benchPayload}); err != nil {
			b.Fatal(err)
		}
	}
	if err := l.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	elapsed := time.Since(start)
	b.StopTimer()

	slices.Sort(lat)
	pct := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) }
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "events/s")
	b.ReportMetric(pct(0.50), "p50-µs")
	b.ReportMetric(pct(0.99), "p99-µs")
	b.ReportMetric(pct(1), "max-µs")
	b.ReportMetric(float64(b.N)/float64(batches), "events/batch")
}

// sinceFixtures caches the prepared 100,000-event databases across the
// benchmark's runs; TestMain removes them.
var sinceFixtures struct {
	sync.Mutex
	dir   string
	paths map[string]string
}

const sinceEvents = 100_000

func sinceFixture(b *testing.B, rowid bool) string {
	sinceFixtures.Lock()
	defer sinceFixtures.Unlock()
	key := fmt.Sprint("rowid=", rowid)
	if p, ok := sinceFixtures.paths[key]; ok {
		return p
	}
	if sinceFixtures.dir == "" {
		d, err := os.MkdirTemp("", "eventlog-bench-")
		if err != nil {
			b.Fatal(err)
		}
		sinceFixtures.dir, sinceFixtures.paths = d, map[string]string{}
	}
	path := filepath.Join(sinceFixtures.dir, key+".db")
	withSchema(rowid, synchronous, func() {
		ctx := context.Background()
		l, err := Open(ctx, path, Options{Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			b.Fatal(err)
		}
		// Other sessions around the replayed one, as in a real daemon.
		for s, id := range []string{"before", "bench", "after"} {
			for i := uint64(1); i <= sinceEvents; i++ {
				if s != 1 && i > sinceEvents/10 {
					break
				}
				if err := l.Append(ctx, Event{SessionID: id, Seq: i, Time: time.Now(), Kind: "text_delta", Payload: benchPayload}); err != nil {
					b.Fatal(err)
				}
			}
		}
		if err := l.Close(); err != nil {
			b.Fatal(err)
		}
	})
	sinceFixtures.paths[key] = path
	return path
}

// BenchmarkSince replays a 100,000-event session; one op is one full
// replay. It reports events/s read.
func BenchmarkSince(b *testing.B) {
	benchSince(b, sinceFixture(b, false))
}

func benchSince(b *testing.B, path string) {
	l, err := Open(b.Context(), path, Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()
	var bytes int
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		n := 0
		if err := l.Since(ctx, "bench", 0, func(e Event) error {
			n++
			bytes += len(e.Payload)
			return nil
		}); err != nil {
			b.Fatal(err)
		}
		if n != sinceEvents {
			b.Fatalf("replayed %d events, want %d", n, sinceEvents)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N*sinceEvents)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkSchema compares the events table WITHOUT ROWID (used) with a
// rowid table, for appending and for replaying.
func BenchmarkSchema(b *testing.B) {
	for _, rowid := range []bool{false, true} {
		name := map[bool]string{false: "without-rowid", true: "rowid"}[rowid]
		b.Run(name+"/append", func(b *testing.B) {
			withSchema(rowid, synchronous, func() { benchAppend(b, 0) })
		})
		b.Run(name+"/since", func(b *testing.B) {
			benchSince(b, sinceFixture(b, rowid))
		})
	}
}

// BenchmarkSynchronous compares synchronous=FULL (used) with NORMAL for
// appending, flat out and paced at 100,000 events/s.
func BenchmarkSynchronous(b *testing.B) {
	for _, level := range []string{"FULL", "NORMAL"} {
		b.Run(level, func(b *testing.B) {
			withSchema(false, level, func() { benchAppend(b, 0) })
		})
		b.Run(level+"/paced", func(b *testing.B) {
			withSchema(false, level, func() { benchAppend(b, 100_000) })
		})
	}
}

func TestMain(m *testing.M) {
	code := m.Run()
	if sinceFixtures.dir != "" {
		os.RemoveAll(sinceFixtures.dir)
	}
	os.Exit(code)
}
