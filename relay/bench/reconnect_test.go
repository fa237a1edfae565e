package bench

import (
	"context"
	"crypto/tls"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/metadata"
)

// reconnectSteps is agent/relaylink.Steps, copied: the relay module must not
// import the agent. Each wait is ±50 % (uniform in [d/2, 3d/2]).
var reconnectSteps = []time.Duration{time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second, 30 * time.Second}

// lostRetry is agent/relaylink.LostRetry, copied: a tunnel that was up and
// is lost is dialled again within [0, lostRetry], three times in a row at
// most, then the schedule.
const lostRetry = 250 * time.Millisecond

// simAgent keeps one simulated agent connected the way relaylink.Run does
// and records when its sessions start and when it dials.
type simAgent struct {
	cfg *tls.Config
	srv *grpc.Server // answers relayed calls (BenchmarkReconnect's routing probe); nil: none

	mu       sync.Mutex
	attempts []time.Time // every dial
	ups      []time.Time // every session that came up
}

func (a *simAgent) run(ctx context.Context, addr string, first chan<- struct{}) {
	step, losts := 0, 0
	for ctx.Err() == nil {
		start, lost := time.Now(), false
		a.mu.Lock()
		a.attempts = append(a.attempts, start)
		a.mu.Unlock()
		l, err := dialAgent(ctx, addr, a.cfg, a.srv)
		if err == nil {
			a.mu.Lock()
			a.ups = append(a.ups, time.Now())
			a.mu.Unlock()
			if first != nil {
				first <- struct{}{}
				first = nil
			}
			select {
			case <-ctx.Done():
			case <-l.done:
			}
			l.close()
			lost = true
		}
		if ctx.Err() != nil {
			return
		}
		if time.Since(start) > time.Minute {
			step, losts = 0, 0 // it was up for a while: start the schedule over
		}
		var wait time.Duration
		if lost && losts < 3 {
			losts++
			step = 0
			wait = time.Duration(rand.Int64N(int64(lostRetry) + 1))
		} else {
			d := reconnectSteps[min(step, len(reconnectSteps)-1)]
			step++
			wait = d/2 + time.Duration(rand.Int64N(int64(d)+1))
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// BenchmarkReconnect kills the relay process while N agents are connected,
// restarts it at once on the same address and store, and measures how the
// agents come back: the time until the relay counts all N tunnels again
// (betcode_relay_connected_machines), the peak reconnection rate and the
// spread of reconnection times. While they come back, a client routes one
// unary call after another through the restarted relay to a machine
// already back (picked at random each time) and reports the calls'
// latency. The agents, the client and the agents' answers all run in the
// test process, whose own handshakes then dominate the figure:
// BenchmarkScale with BETCODE_BENCH_SCALE_RESTART=1 measures the relay's
// routing with the herd in another process (issue 23: ≤ 5 ms p99 while
// they reconnect). It runs once, whatever b.N:
//
//	go test -run '^$' -bench Reconnect -benchtime 1x ./bench/
func BenchmarkReconnect(b *testing.B) {
	n := envInt("BETCODE_BENCH_RECONNECT", 1000)
	raiseFileLimit(b, uint64(n)+1000)
	r := newRelay(b, relayEnv()...)
	mint := newCertMint(b, r.pki)
	cfgs := mint.machines(b, "re", n)

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	agents := make([]*simAgent, n)
	first := make(chan struct{})
	sem := make(chan struct{}, 16) // bring them up 16 at a time
	srv := newBenchServer()
	defer srv.Stop()
	for i := range agents {
		agents[i] = &simAgent{cfg: cfgs[i], srv: srv}
		sem <- struct{}{}
		up := make(chan struct{}, 1)
		wg.Go(func() { agents[i].run(ctx, r.addr, up) })
		go func() {
			select {
			case <-up:
			case <-ctx.Done():
			}
			<-sem
			first <- struct{}{}
		}()
	}
	for range n {
		<-first
	}
	r.waitConnected(n, time.Minute)

	killed := time.Now()
	r.kill()
	r.start() // same address, PKI and store
	ready := time.Now()
	probeCtx, stopProbe := context.WithCancel(ctx)
	probed := make(chan routeProbe, 1)
	go func() { probed <- probeRouting(probeCtx, dialClient(b, r), agents, killed) }()
	type sample struct {
		at time.Duration
		n  int
	}
	var series []sample
	deadline := killed.Add(90 * time.Second)
	var all time.Time
	for time.Now().Before(deadline) {
		c, err := r.connected(context.Background())
		if err == nil {
			series = append(series, sample{time.Since(killed), c})
			if c == n {
				all = time.Now()
				break
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	stopProbe()
	probe := <-probed
	if all.IsZero() {
		b.Fatalf("only %d of %d agents back after %s", series[len(series)-1].n, n, deadline.Sub(killed))
	}
	if len(probe.lat) == 0 {
		b.Fatalf("no routed call succeeded while the agents came back (%d failed; the last: %v)", probe.failed, probe.lastErr)
	}

	// Per agent: its first session after the kill; and every dial.
	var back []time.Duration
	perSecond := map[int]int{}   // reconnects per second after the kill
	dialsPerSec := map[int]int{} // dials per second after the kill
	var dials []time.Duration
	for _, a := range agents {
		a.mu.Lock()
		for _, t := range a.ups {
			if t.After(killed) {
				back = append(back, t.Sub(killed))
				perSecond[int(t.Sub(killed)/time.Second)]++
				break
			}
		}
		for _, t := range a.attempts {
			if t.After(killed) {
				dials = append(dials, t.Sub(killed))
				dialsPerSec[int(t.Sub(killed)/time.Second)]++
			}
		}
		a.mu.Unlock()
	}
	slices.Sort(back)
	// Peak rate: the most reconnections in any 1 s window, and in any
	// 100 ms window (scaled to a rate).
	peak := func(w time.Duration) int {
		best, j := 0, 0
		for i := range back {
			for back[i]-back[j] >= w {
				j++
			}
			best = max(best, i-j+1)
		}
		return best
	}
	q := func(p float64) time.Duration { return back[min(len(back)-1, int(float64(len(back))*p))] }
	b.ReportMetric(all.Sub(killed).Seconds(), "s-until-all-back")
	b.ReportMetric(all.Sub(ready).Seconds(), "s-after-relay-ready")
	b.ReportMetric(ready.Sub(killed).Seconds(), "s-relay-restart")
	b.ReportMetric(float64(peak(time.Second)), "peak-reconnects/1s")
	b.ReportMetric(float64(peak(100*time.Millisecond))*10, "peak-reconnects/s-over-100ms")
	b.ReportMetric(float64(len(dials))/float64(n), "dials/agent")
	reportProbe(b, probe)
	b.ReportMetric(0, "ns/op")

	var hist strings.Builder
	for s := 0; s <= int(all.Sub(killed)/time.Second); s++ {
		fmt.Fprintf(&hist, " %ds:%d/%d", s, perSecond[s], dialsPerSec[s])
	}
	b.Logf("n=%d: relay ready %.2fs after the kill; all back after %.2fs; reconnect time p10 %.2fs p50 %.2fs p90 %.2fs max %.2fs; %d dials",
		n, ready.Sub(killed).Seconds(), all.Sub(killed).Seconds(), q(.1).Seconds(), q(.5).Seconds(), q(.9).Seconds(), back[len(back)-1].Seconds(), len(dials))
	b.Logf("per second after the kill (reconnected/dials):%s", hist.String())
	var ts strings.Builder
	for i, s := range series {
		if i%4 == 0 || i == len(series)-1 {
			fmt.Fprintf(&ts, " %.1fs:%d", s.at.Seconds(), s.n)
		}
	}
	b.Logf("betcode_relay_connected_machines after the kill:%s", ts.String())
}

// reportProbe reports the routed calls' latency.
func reportProbe(b *testing.B, probe routeProbe) {
	pq := func(p float64) float64 { return float64(percentile(probe.lat, p).Microseconds()) / 1000 }
	b.ReportMetric(pq(.5), "route-p50-ms")
	b.ReportMetric(pq(.99), "route-p99-ms")
	b.ReportMetric(float64(len(probe.lat)), "routed-calls")
	b.Logf("routing while the agents came back: %d calls to machines already back, p50 %.2f ms, p99 %.2f ms, max %.2f ms; %d failed (the last: %v)",
		len(probe.lat), pq(.5), pq(.99), pq(1), probe.failed, probe.lastErr)
}

// startProbeAgents connects n simulated agents that answer relayed calls
// (machines re-00000 on, probeRouting's targets) and waits until all are
// up; stop ends them.
func startProbeAgents(b *testing.B, r *relayProc, n int) (agents []*simAgent, stop func()) {
	cfgs := newCertMint(b, r.pki).machines(b, "re", n)
	srv := newBenchServer()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	up := make(chan struct{}, n)
	for i := range n {
		a := &simAgent{cfg: cfgs[i], srv: srv}
		agents = append(agents, a)
		wg.Go(func() { a.run(ctx, r.addr, up) })
	}
	for range n {
		select {
		case <-up:
		case <-time.After(time.Minute):
			b.Fatalf("probe agents not up after a minute")
		}
	}
	return agents, func() { cancel(); wg.Wait(); srv.Stop() }
}

// routeProbe is what probeRouting measured.
type routeProbe struct {
	lat     []time.Duration // each successful call's latency
	failed  int
	lastErr error
}

// probeRouting makes one unary call after another through cc, each to a
// machine picked at random among those back since killed, until ctx ends.
func probeRouting(ctx context.Context, cc *grpc.ClientConn, agents []*simAgent, killed time.Time) routeProbe {
	var p routeProbe
	// The client's own connection first (its handshake queues with the
	// agents'): the calls measure routing, not connecting.
	cc.Connect()
	for s := cc.GetState(); s != connectivity.Ready; s = cc.GetState() {
		if !cc.WaitForStateChange(ctx, s) {
			return p
		}
	}
	for ctx.Err() == nil {
		i := rand.IntN(len(agents))
		a := agents[i]
		a.mu.Lock()
		back := len(a.ups) > 0 && a.ups[len(a.ups)-1].After(killed)
		a.mu.Unlock()
		if !back {
			continue
		}
		cctx, ccancel := context.WithTimeout(metadata.AppendToOutgoingContext(ctx,
			"x-betcode-machine-id", fmt.Sprintf("re-%05d", i)), 5*time.Second)
		start := time.Now()
		err := echo(cctx, cc)
		ccancel()
		if ctx.Err() != nil {
			return p
		}
		if err != nil {
			p.failed++
			p.lastErr = err
			continue
		}
		p.lat = append(p.lat, time.Since(start))
	}
	return p
}
