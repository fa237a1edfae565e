package storetest

import (
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/betcode-dev/betcode/relay/store"
)

// Producers is the number of concurrent Enqueue callers in BenchEnqueue:
// 64, or BETCODE_BENCH_PRODUCERS (a relay serving many users has many
// concurrent callers; group commit batches grow with them).
var Producers = func() int {
	if n, err := strconv.Atoi(os.Getenv("BETCODE_BENCH_PRODUCERS")); err == nil && n > 0 {
		return n
	}
	return 64
}()

// benchLimits never refuse a benchmark message.
var benchLimits = store.Limits{MaxMessages: 1 << 30, MaxBytes: 1 << 40}

// benchPayload is the 200-byte payload of docs/perf-baselines.md's
// Postgres measurements.
var benchPayload = make([]byte, 200)

func benchMessage(machineID string, key string) store.Message {
	return store.Message{
		MachineID: machineID, OwnerID: "owner", IdempotencyKey: key,
		Service: "betcode.v1.AgentService", Method: "Converse", Payload: benchPayload,
	}
}

// BenchEnqueue stores b.N messages from Producers goroutines, spread over
// machines machines, each with its own idempotency key, and reports
// messages stored per second.
func BenchEnqueue(b *testing.B, open Open, machines int) {
	s := open(b)
	ctx := b.Context()
	var next atomic.Int64
	b.ResetTimer()
	start := time.Now()
	fill(b, s, machines, b.N, &next)
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "msgs/s")
	total := 0
	for m := range machines {
		n, _, err := s.Counts(ctx, fmt.Sprintf("m%d", m))
		if err != nil {
			b.Fatal(err)
		}
		total += n
	}
	if total != b.N {
		b.Fatalf("stored %d messages; want %d", total, b.N)
	}
}

// fill enqueues n messages from Producers goroutines, round-robin over
// machines; next numbers the messages.
func fill(b *testing.B, s store.Store, machines, n int, next *atomic.Int64) {
	ctx := b.Context()
	var (
		wg   sync.WaitGroup
		once sync.Once
		ferr error
	)
	limit := next.Load() + int64(n)
	for range Producers {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= limit {
					return
				}
				m := benchMessage(fmt.Sprintf("m%d", i%int64(machines)), fmt.Sprintf("k%d", i))
				if _, _, err := s.Enqueue(ctx, m, benchLimits); err != nil {
					once.Do(func() { ferr = err })
					return
				}
			}
		})
	}
	wg.Wait()
	if ferr != nil {
		b.Fatal(ferr)
	}
}

// DeliverPage is the page size of BenchDeliver, the relay's delivery page.
const DeliverPage = 1000

// BenchDeliver stores b.N messages for one machine (not timed), then
// delivers them as the relay does on reconnect: Pending pages of
// DeliverPage from a cursor, each acknowledged with one Ack. It reports
// messages delivered (read and deleted) per second.
func BenchDeliver(b *testing.B, open Open) {
	s := open(b)
	ctx := b.Context()
	var next atomic.Int64
	fill(b, s, 1, b.N, &next)
	b.ResetTimer()
	start := time.Now()
	var after int64
	delivered := 0
	for delivered < b.N {
		page, err := s.Pending(ctx, "m0", after, DeliverPage)
		if err != nil {
			b.Fatal(err)
		}
		if len(page) == 0 {
			b.Fatalf("delivered %d of %d messages", delivered, b.N)
		}
		ids := make([]int64, len(page))
		for i := range page {
			ids[i] = page[i].ID
		}
		if err := s.Ack(ctx, "m0", ids...); err != nil {
			b.Fatal(err)
		}
		delivered += len(page)
		after = ids[len(ids)-1]
	}
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(delivered)/elapsed.Seconds(), "msgs/s")
	if n, _, err := s.Counts(ctx, "m0"); err != nil || n != 0 {
		b.Fatalf("after delivery Counts = %d, %v; want 0", n, err)
	}
}

// BenchTokens is how many tokens BenchTokenByHash stores: a relay with
// many users, each with a few devices.
const BenchTokens = 10_000

// BenchTokenByHash stores BenchTokens tokens (not timed), then looks them
// up by hash, as the relay authenticates a request whose token is not
// cached: "serial" from one goroutine (the latency of one lookup), and
// "parallel" from GOMAXPROCS goroutines (b.RunParallel).
func BenchTokenByHash(b *testing.B, open Open) {
	s := open(b)
	hashes := make([][]byte, BenchTokens)
	for i := range hashes {
		hashes[i] = hash(fmt.Sprint("bench token ", i))
	}
	var (
		wg   sync.WaitGroup
		next atomic.Int64
		once sync.Once
		ferr error
	)
	for range 16 {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < BenchTokens; i = next.Add(1) - 1 {
				t := store.Token{ID: fmt.Sprint("t", i), UserID: fmt.Sprint("user", i%1000), Name: "bench", Hash: hashes[i]}
				if err := s.CreateToken(b.Context(), t); err != nil {
					once.Do(func() { ferr = err })
					return
				}
			}
		})
	}
	wg.Wait()
	if ferr != nil {
		b.Fatal(ferr)
	}
	// A stride coprime with BenchTokens walks every token in a scattered
	// order.
	const stride = 7919
	lookup := func(b *testing.B, i int64) {
		h := hashes[(i*stride)%BenchTokens]
		t, err := s.TokenByHash(b.Context(), h)
		if err != nil || t.Name != "bench" {
			b.Fatalf("TokenByHash = %+v, %v", t, err)
		}
	}
	b.Run("serial", func(b *testing.B) {
		var i int64
		for b.Loop() {
			lookup(b, i)
			i++
		}
	})
	b.Run("parallel", func(b *testing.B) {
		var i atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				lookup(b, i.Add(1))
			}
		})
	})
}
