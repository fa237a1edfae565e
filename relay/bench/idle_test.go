package bench

import (
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// tunnelCounts reads BETCODE_BENCH_TUNNELS ("1000,2000,5000,10000").
func tunnelCounts() []int {
	s := os.Getenv("BETCODE_BENCH_TUNNELS")
	if s == "" {
		s = "1000,5000"
	}
	var out []int
	for _, f := range strings.Split(s, ",") {
		if n, err := strconv.Atoi(strings.TrimSpace(f)); err == nil && n > 0 {
			out = append(out, n)
		}
	}
	return out
}

// connectAgents connects one simulated agent per config, par at a time,
// and returns them with the wall time it took.
func connectAgents(tb testing.TB, addr string, cfgs []*tls.Config, par int) ([]*agentLink, time.Duration) {
	tb.Helper()
	links := make([]*agentLink, len(cfgs))
	var next atomic.Int64
	var wg sync.WaitGroup
	var failed atomic.Pointer[error]
	start := time.Now()
	for range par {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(cfgs) || failed.Load() != nil {
					return
				}
				l, err := dialAgent(context.Background(), addr, cfgs[i], nil)
				if err != nil {
					err = fmt.Errorf("agent %d: %w", i, err)
					failed.Store(&err)
					return
				}
				links[i] = l
			}
		})
	}
	wg.Wait()
	if p := failed.Load(); p != nil {
		tb.Fatal(*p)
	}
	return links, time.Since(start)
}

func closeAgents(links []*agentLink) {
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			for j := i; j < len(links); j += 16 {
				if links[j] != nil {
					links[j].close()
				}
			}
		})
	}
	wg.Wait()
}

// relaySnapshot is the relay process's memory as /proc and its Go
// collector see it.
type relaySnapshot struct {
	rssKiB                 int64
	heapInuse, stackInuse  float64 // bytes
	goroutines, tunnelsNow float64
	heapAlloc, nextGC, gcs float64
}

func (r *relayProc) snapshot(tb testing.TB) relaySnapshot {
	m, err := r.metrics(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	return relaySnapshot{rssKiB: r.rssKiB(), heapInuse: m["go_memstats_heap_inuse_bytes"], stackInuse: m["go_memstats_stack_inuse_bytes"],
		goroutines: m["go_goroutines"], tunnelsNow: m["betcode_relay_connected_machines"],
		heapAlloc: m["go_memstats_heap_alloc_bytes"], nextGC: m["go_memstats_next_gc_bytes"], gcs: m["go_gc_duration_seconds_count"]}
}

func writeHeapProfile(tb testing.TB, name string) {
	runtime.GC()
	f, err := os.Create(filepath.Join(os.TempDir(), name))
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	if err := pprof.WriteHeapProfile(f); err != nil {
		tb.Fatal(err)
	}
	tb.Logf("heap profile: %s", f.Name())
}

// BenchmarkIdleTunnels measures the relay's memory per idle tunnel: a
// fresh relay process per count, RSS before and after N simulated agents
// (each its own TLS connection and machine certificate) are connected.
// Each case does its work once, whatever b.N:
//
//	BETCODE_BENCH_TUNNELS=1000,2000,5000,10000 go test -run '^$' -bench IdleTunnels -benchtime 1x ./bench/
func BenchmarkIdleTunnels(b *testing.B) {
	for _, n := range tunnelCounts() {
		b.Run(fmt.Sprintf("tunnels=%d", n), func(b *testing.B) {
			raiseFileLimit(b, uint64(n)+1000)
			r := newRelay(b, os.Getenv("BETCODE_BENCH_RELAY_ENV"))
			mint := newCertMint(b, r.pki)
			cfgs := mint.machines(b, "sim", n+1)

			// One tunnel first, so one-time costs (first handshake, store
			// statements, HTTP/2 and yamux code paths) are in the baseline.
			warm, _ := connectAgents(b, r.addr, cfgs[:1], 1)
			defer closeAgents(warm)
			time.Sleep(2 * time.Second)
			var before relaySnapshot
			if r.cmd != nil {
				before = r.snapshot(b)
			}

			links, took := connectAgents(b, r.addr, cfgs[1:], 16)
			r.waitConnected(n+1, time.Minute)
			time.Sleep(time.Duration(envInt("BETCODE_BENCH_SETTLE_S", 5)) * time.Second)
			if r.cmd == nil {
				// BETCODE_BENCH_INPROC=1: the relay runs in this process; a
				// heap profile (agents included) is all this case gives.
				writeHeapProfile(b, fmt.Sprintf("idle-%d.heap", n))
				closeAgents(links)
				return
			}
			after := r.snapshot(b)

			per := func(a, z float64) float64 { return (z - a) / float64(n) }
			b.ReportMetric(per(float64(before.rssKiB), float64(after.rssKiB)), "rss-KiB/tunnel")
			b.ReportMetric(per(before.heapInuse, after.heapInuse)/1024, "heap-KiB/tunnel")
			b.ReportMetric(per(before.stackInuse, after.stackInuse)/1024, "stack-KiB/tunnel")
			b.ReportMetric(per(before.goroutines, after.goroutines), "goroutines/tunnel")
			b.ReportMetric(float64(n)/took.Seconds(), "connects/s")
			b.ReportMetric(0, "ns/op")
			b.Logf("n=%d: relay RSS %d → %d KiB, heap in use %.1f → %.1f MiB, stacks %.1f → %.1f MiB, goroutines %.0f → %.0f, connected in %s",
				n, before.rssKiB, after.rssKiB, before.heapInuse/(1<<20), after.heapInuse/(1<<20),
				before.stackInuse/(1<<20), after.stackInuse/(1<<20), before.goroutines, after.goroutines, took.Round(time.Millisecond))
			b.Logf("after: heap alloc %.1f MiB, next GC at %.1f MiB, %.0f GCs so far", after.heapAlloc/(1<<20), after.nextGC/(1<<20), after.gcs)

			// Kill the relay first: it drops every tunnel at once, so the
			// agents close quickly.
			r.kill()
			closeAgents(links)
		})
	}
}
