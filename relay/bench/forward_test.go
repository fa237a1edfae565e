package bench

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"

	"github.com/betcode-dev/betcode/relay/pki"
	"github.com/betcode-dev/betcode/shared/mtls"
)

// forwardEnv is one relay process, one agent connected to it through the
// tunnel, the same agent service also listening for TLS directly, and a
// client of each path.
type forwardEnv struct {
	relay    *relayProc
	agentPID int              // 0: the agent runs in this process
	direct   *grpc.ClientConn // client → agent over TLS
	via      *grpc.ClientConn // client → relay (TLS) → tunnel (mTLS) → agent
	l4       *grpc.ClientConn // client → TCP proxy process → agent: the floor of any extra hop
	l4PID    int              // the TCP proxy's process
	h2       *grpc.ClientConn // client → HTTP/2 hop process → agent: the floor of an HTTP/2-terminating hop (unary only)
	h2PID    int              // the HTTP/2 hop's process
	e2e      *grpc.ClientConn // client → relay → agent inside an end-to-end channel (e2ee_test.go)
	keys     string           // the channel keys' directory
	ctx      context.Context  // names the agent's machine for relay calls
	// dialVia opens one more client connection to the relay, like via's.
	dialVia func() *grpc.ClientConn
}

const benchMachine = "bench-agent"

func newForwardEnv(tb testing.TB, env ...string) *forwardEnv {
	tb.Helper()
	e := &forwardEnv{relay: newRelay(tb, append(relayEnv(), env...)...)}
	e.keys = filepath.Join(e.relay.pki, "e2ee")
	ctx := context.Background()

	directAddr := ""
	if e.relay.cmd == nil {
		// Everything in this process (BETCODE_BENCH_INPROC=1, for profiles).
		srvTLS, err := mtls.ServerConfig(filepath.Join(e.relay.pki, pki.RelayCertFile), filepath.Join(e.relay.pki, pki.RelayKeyFile), "", mtls.RequireClientCert)
		if err != nil {
			tb.Fatal(err)
		}
		direct := newBenchServer(grpc.Creds(credentials.NewTLS(srvTLS)))
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatal(err)
		}
		go direct.Serve(ln)
		tb.Cleanup(direct.Stop)
		tunneled := newBenchServer()
		tb.Cleanup(tunneled.Stop)
		if err := serveChannels(tunneled, e.keys); err != nil {
			tb.Fatal(err)
		}
		cfg, err := newCertMint(tb, e.relay.pki).machine(benchMachine)
		if err != nil {
			tb.Fatal(err)
		}
		agent, err := dialAgent(ctx, e.relay.addr, cfg, tunneled)
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(agent.close)
		directAddr = ln.Addr().String()
	} else {
		directAddr, e.agentPID = startAgentProcess(tb, e.relay, benchMachine)
	}

	clientTLS, err := mtls.ClientConfig(e.relay.caFile(), "", "", "127.0.0.1")
	if err != nil {
		tb.Fatal(err)
	}
	dial := func(addr string, opts ...grpc.DialOption) *grpc.ClientConn {
		cc, err := grpc.NewClient(addr, append(opts, grpc.WithTransportCredentials(credentials.NewTLS(clientTLS.Clone())))...)
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { cc.Close() })
		return cc
	}
	// The relay authenticates and authorizes every call among 10,000
	// tokens and 1,000 machines, as the target says.
	seedScale(tb, e.relay, 10000, 1000)
	e.dialVia = func() *grpc.ClientConn { return dial(e.relay.addr, grpc.WithPerRPCCredentials(bearer(e.relay.token))) }
	e.direct, e.via = dial(directAddr), e.dialVia()
	var l4Addr string
	l4Addr, e.l4PID = startL4Proxy(tb, directAddr)
	// The agent's certificate names 127.0.0.1, which the proxy's address
	// is too.
	e.l4 = dial(l4Addr)
	var h2Addr string
	h2Addr, e.h2PID = startH2Floor(tb, directAddr, filepath.Join(e.relay.pki, pki.RelayCertFile), filepath.Join(e.relay.pki, pki.RelayKeyFile), e.relay.caFile())
	e.h2 = dial(h2Addr)
	e.ctx = metadata.AppendToOutgoingContext(ctx, "x-betcode-machine-id", benchMachine)
	e.e2e = dialE2E(tb, e.via, e.keys)

	// Warm up every path as perf-baselines did: 1,000 unary calls and a
	// 20k-event stream each.
	for _, cc := range []*grpc.ClientConn{e.direct, e.via, e.l4, e.h2, e.e2e} {
		for range 1000 {
			if err := echo(e.ctx, cc); err != nil {
				tb.Fatal(err)
			}
		}
		if cc == e.h2 {
			continue // unary only
		}
		if err := streamEvents(e.ctx, cc, 20000); err != nil {
			tb.Fatal(err)
		}
	}
	return e
}

func (e *forwardEnv) conn(path string) *grpc.ClientConn {
	switch path {
	case "direct":
		return e.direct
	case "l4":
		return e.l4
	case "h2":
		return e.h2
	case "e2e":
		return e.e2e
	}
	return e.via
}

// cpuTime is the CPU time used so far by every process on the path: this
// one (clients), the relay and the agent.
func (e *forwardEnv) cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	total := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	if e.relay.cmd != nil {
		total += procCPU(e.relay.cmd.Process.Pid)
	}
	if e.agentPID != 0 {
		total += procCPU(e.agentPID)
	}
	total += procCPU(e.l4PID)
	total += procCPU(e.h2PID)
	return total
}

// procCPU reads utime+stime of pid from /proc.
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the ")" of comm start with state (field 3); utime and
	// stime are fields 14 and 15.
	f := splitFields(string(b[slices.Index(b, ')')+2:]))
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+s) * (time.Second / 100) // USER_HZ
}

func splitFields(s string) []string {
	var out []string
	start := -1
	for i, c := range s {
		if c == ' ' {
			if start >= 0 {
				out = append(out, s[start:i])
				start = -1
			}
		} else if start < 0 {
			start = i
		}
	}
	if start >= 0 {
		out = append(out, s[start:])
	}
	return out
}

// streamRate streams n events over path and returns events per second.
func (e *forwardEnv) streamRate(tb testing.TB, path string, n uint64) float64 {
	start := time.Now()
	if err := streamEvents(e.ctx, e.conn(path), n); err != nil {
		tb.Fatalf("%s stream: %v", path, err)
	}
	return float64(n) / time.Since(start).Seconds()
}

// unaryLatencies makes n sequential Echo calls over path.
func (e *forwardEnv) unaryLatencies(tb testing.TB, path string, n int) []time.Duration {
	cc := e.conn(path)
	return timeCalls(tb, path+" echo", n, func() error { return echo(e.ctx, cc) })
}

// timeCalls makes n sequential calls and returns how long each took.
func timeCalls(tb testing.TB, what string, n int, call func() error) []time.Duration {
	lat := make([]time.Duration, n)
	for i := range lat {
		start := time.Now()
		if err := call(); err != nil {
			tb.Fatalf("%s: %v", what, err)
		}
		lat[i] = time.Since(start)
	}
	return lat
}

func percentile(d []time.Duration, p float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*p))]
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// BenchmarkForward compares calls through relay and tunnel with the same
// calls straight to the agent over TLS, and with the floor of any extra
// hop: the same calls through a plain TCP proxy process (l4, see l4Main).
// The stream= and unary= cases are plain Go benchmarks (one path each, for
// profiles); compare runs b.N rounds that rotate the order of the three
// paths and reports medians of per-round values:
//
//	go test -run '^$' -bench 'Forward/compare' -benchtime 7x ./bench/
func BenchmarkForward(b *testing.B) {
	e := newForwardEnv(b)
	for _, path := range []string{"direct", "relay", "e2e"} {
		b.Run("stream="+path, func(b *testing.B) {
			b.ReportAllocs()
			start := time.Now()
			m0 := recvMsgs.Load()
			if err := streamEvents(e.ctx, e.conn(path), uint64(b.N)); err != nil {
				b.Fatal(err)
			}
			if path == "e2e" { // how well the channel's writes gather
				b.ReportMetric(float64(recvMsgs.Load()-m0)/float64(b.N), "msgs/event")
			}
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "events/s")
		})
	}
	for _, path := range []string{"direct", "relay", "h2", "e2e"} {
		b.Run("unary="+path, func(b *testing.B) {
			lat := e.unaryLatencies(b, path, b.N)
			b.ReportMetric(us(percentile(lat, 0.50)), "p50-µs")
			b.ReportMetric(us(percentile(lat, 0.99)), "p99-µs")
		})
	}
	// The relay answering a call itself: grpc.health.v1 Check through its
	// client-facing HTTP/2 server, authentication and router to its own
	// grpc.Server (ServeHTTP). Against unary=relay, that is what a relayed
	// call costs before the tunnel.
	b.Run("unary=relay-local", func(b *testing.B) {
		hc := healthpb.NewHealthClient(e.via)
		lat := timeCalls(b, "relay health check", b.N, func() error {
			_, err := hc.Check(e.ctx, &healthpb.HealthCheckRequest{})
			return err
		})
		b.ReportMetric(us(percentile(lat, 0.50)), "p50-µs")
		b.ReportMetric(us(percentile(lat, 0.99)), "p99-µs")
	})
	b.Run("compare", func(b *testing.B) {
		events := uint64(envInt("BETCODE_BENCH_EVENTS", 200_000))
		calls := envInt("BETCODE_BENCH_CALLS", 3000)
		paths := []string{"direct", "relay", "l4", "e2e"}
		rate, cpu, p50, p99, ucpu := map[string][]float64{}, map[string][]float64{}, map[string][]float64{}, map[string][]float64{}, map[string][]float64{}
		var ratio, ratioL4, ratioE2E, added, addedL4, addedH2, addedE2E []float64
		for round := range b.N {
			// Rotate the order: each path goes first in turn.
			order := append(slices.Clone(paths[round%len(paths):]), paths[:round%len(paths)]...)
			r := map[string]float64{}
			for _, p := range order {
				c0 := e.cpuTime()
				r[p] = e.streamRate(b, p, events)
				rate[p] = append(rate[p], r[p])
				cpu[p] = append(cpu[p], us(e.cpuTime()-c0)/float64(events))
			}
			l50 := map[string]float64{}
			uorder := append(slices.Clone(order), "h2")
			if round%2 == 1 {
				uorder = append([]string{"h2"}, order...)
			}
			for _, p := range uorder {
				c0 := e.cpuTime()
				lat := e.unaryLatencies(b, p, calls)
				ucpu[p] = append(ucpu[p], us(e.cpuTime()-c0)/float64(calls))
				l50[p] = us(percentile(lat, .5))
				p50[p] = append(p50[p], l50[p])
				p99[p] = append(p99[p], us(percentile(lat, .99)))
			}
			ratio = append(ratio, r["relay"]/r["direct"])
			ratioL4 = append(ratioL4, r["l4"]/r["direct"])
			added = append(added, l50["relay"]-l50["direct"])
			addedL4 = append(addedL4, l50["l4"]-l50["direct"])
			addedH2 = append(addedH2, l50["h2"]-l50["direct"])
			ratioE2E = append(ratioE2E, r["e2e"]/r["relay"])
			addedE2E = append(addedE2E, l50["e2e"]-l50["relay"])
			last := func(m map[string][]float64, p string) float64 { return m[p][len(m[p])-1] }
			b.Logf("round %d: stream/s direct %.0f relay %.0f (%.2f) l4 %.0f (%.2f); CPU µs/event %.2f / %.2f / %.2f; unary p50 µs %.0f / %.0f / %.0f (h2 %.0f), p99 %.0f / %.0f / %.0f; CPU µs/call %.0f / %.0f / %.0f (h2 %.0f)",
				round, r["direct"], r["relay"], r["relay"]/r["direct"], r["l4"], r["l4"]/r["direct"],
				last(cpu, "direct"), last(cpu, "relay"), last(cpu, "l4"),
				l50["direct"], l50["relay"], l50["l4"], l50["h2"], last(p99, "direct"), last(p99, "relay"), last(p99, "l4"),
				last(ucpu, "direct"), last(ucpu, "relay"), last(ucpu, "l4"), last(ucpu, "h2"))
			b.Logf("round %d: end to end: stream/s %.0f (%.2f of relay), CPU µs/event %.2f; unary p50 µs %.0f (%+.0f over relay), CPU µs/call %.0f",
				round, r["e2e"], r["e2e"]/r["relay"], last(cpu, "e2e"), l50["e2e"], l50["e2e"]-l50["relay"], last(ucpu, "e2e"))
		}
		b.ReportMetric(median(rate["direct"]), "direct-events/s")
		b.ReportMetric(median(rate["relay"]), "relay-events/s")
		b.ReportMetric(median(ratio), "stream-ratio")
		b.ReportMetric(median(ratioL4), "l4-stream-ratio")
		b.ReportMetric(median(cpu["direct"]), "direct-cpu-µs/event")
		b.ReportMetric(median(cpu["relay"]), "relay-cpu-µs/event")
		b.ReportMetric(median(p50["direct"]), "direct-p50-µs")
		b.ReportMetric(median(p50["relay"]), "relay-p50-µs")
		b.ReportMetric(median(p99["direct"]), "direct-p99-µs")
		b.ReportMetric(median(p99["relay"]), "relay-p99-µs")
		b.ReportMetric(median(added), "added-p50-µs")
		b.ReportMetric(median(addedL4), "l4-added-p50-µs")
		b.ReportMetric(median(addedH2), "h2-added-p50-µs")
		b.ReportMetric(median(ratioE2E), "e2e-stream-ratio-to-relay")
		b.ReportMetric(median(addedE2E), "e2e-added-p50-µs-over-relay")
		b.ReportMetric(median(ucpu["direct"]), "direct-cpu-µs/call")
		b.ReportMetric(median(ucpu["relay"]), "relay-cpu-µs/call")
		b.ReportMetric(median(ucpu["l4"]), "l4-cpu-µs/call")
		b.ReportMetric(median(ucpu["h2"]), "h2-cpu-µs/call")
		b.ReportMetric(0, "ns/op")
	})
}
