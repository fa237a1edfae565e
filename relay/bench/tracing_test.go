package bench

import (
	"context"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"

	"github.com/betcode-dev/betcode/relay/limits"
	"github.com/betcode-dev/betcode/relay/pki"
	"github.com/betcode-dev/betcode/relay/server"
	"github.com/betcode-dev/betcode/shared/mtls"
	"github.com/betcode-dev/betcode/shared/telemetry"
	"github.com/betcode-dev/betcode/shared/telemetry/otlptest"
)

// tracedPath is client → relay → tunnel → agent, all in this process (so
// that one getrusage covers all three), with tracing instrumentation as
// one of the variants below.
type tracedPath struct {
	via *grpc.ClientConn
	ctx context.Context
}

// Tracing variants: none (no stats handler, no router span: the code as it
// was), off (the instrumentation in place, exporter unset: what every
// deployment without --otlp-endpoint runs), sampled (every call traced and
// exported to an in-process OTLP collector).
const (
	variantNone    = "none"
	variantOff     = "off"
	variantSampled = "sampled"
)

func newTracedPath(tb testing.TB, variant string) *tracedPath {
	tb.Helper()
	ctx := context.Background()
	var tr *telemetry.Tracing
	switch variant {
	case variantOff:
		tr = telemetry.Off()
	case variantSampled:
		var err error
		tr, err = telemetry.Start(ctx, telemetry.Config{Endpoint: otlptest.Start(tb).Addr, ServiceName: "bench"})
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { tr.Shutdown(context.Background()) })
	}
	r := &relayProc{tb: tb, pki: tb.TempDir(), dataDir: tb.TempDir(), addr: freeAddr(tb), metricsAddr: freeAddr(tb)}
	if _, err := pki.Init(r.pki, []string{"127.0.0.1", "localhost"}, pki.Options{}); err != nil {
		tb.Fatal(err)
	}
	r.token = seedUser(tb, "", r.dataDir)
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	r.serving = make(chan struct{})
	serving := r.serving
	go func() {
		done <- server.Run(rctx, server.Config{
			Listen: r.addr, MetricsListen: r.metricsAddr,
			TLSCert: filepath.Join(r.pki, pki.RelayCertFile), TLSKey: filepath.Join(r.pki, pki.RelayKeyFile),
			ClientCA: r.caFile(), DataDir: r.dataDir,
			Calls:   limits.Config{CallsPerSecond: 1e9, Burst: 1e9, MaxStreamsPerToken: 1e5, MaxStreamsPerTunnel: 1e5},
			Logger:  slog.New(slog.NewTextHandler(io.Discard, nil)),
			Ready:   func(net.Addr) { close(serving) },
			Tracing: tr,
		})
	}()
	tb.Cleanup(func() { cancel(); <-done })
	r.exited = make(chan struct{})
	r.waitReady(60 * time.Second)

	var srvOpts []grpc.ServerOption
	clientOpts := []grpc.DialOption{grpc.WithPerRPCCredentials(bearer(r.token))}
	if tr != nil {
		srvOpts = append(srvOpts, tr.ServerOptions()...)
		clientOpts = append(clientOpts, tr.DialOptions()...)
	}
	agentSrv := newBenchServer(srvOpts...)
	tb.Cleanup(agentSrv.Stop)
	cfg, err := newCertMint(tb, r.pki).machine(benchMachine)
	if err != nil {
		tb.Fatal(err)
	}
	agent, err := dialAgent(ctx, r.addr, cfg, agentSrv)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(agent.close)
	clientTLS, err := mtls.ClientConfig(r.caFile(), "", "", "127.0.0.1")
	if err != nil {
		tb.Fatal(err)
	}
	cc, err := grpc.NewClient(r.addr, append(clientOpts, grpc.WithTransportCredentials(credentials.NewTLS(clientTLS)))...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { cc.Close() })
	p := &tracedPath{via: cc, ctx: metadata.AppendToOutgoingContext(ctx, "x-betcode-machine-id", benchMachine)}
	for range 1000 {
		if err := echo(p.ctx, cc); err != nil {
			tb.Fatal(err)
		}
	}
	if err := streamEvents(p.ctx, cc, 20000); err != nil {
		tb.Fatal(err)
	}
	return p
}

// selfCPU is the CPU time this process has used.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkTracingOverhead measures what tracing costs on the forwarding
// path: CPU per streamed event and per unary call for each variant, in
// rounds that rotate the variants' order, reported as medians, and the
// instrumentation's share at 10,000 forwarded events/s:
//
//	go test -run '^$' -bench TracingOverhead -benchtime 7x ./bench/
func BenchmarkTracingOverhead(b *testing.B) {
	variants := []string{variantNone, variantOff, variantSampled}
	paths := map[string]*tracedPath{}
	for _, v := range variants {
		paths[v] = newTracedPath(b, v)
	}
	events := uint64(envInt("BETCODE_BENCH_EVENTS", 200_000))
	calls := envInt("BETCODE_BENCH_CALLS", 3000)
	perEvent := map[string][]float64{}
	perCall := map[string][]float64{}
	for round := range b.N {
		for i := range variants {
			v := variants[(i+round)%len(variants)]
			p := paths[v]
			c0 := selfCPU()
			if err := streamEvents(p.ctx, p.via, events); err != nil {
				b.Fatalf("%s stream: %v", v, err)
			}
			perEvent[v] = append(perEvent[v], us(selfCPU()-c0)/float64(events))
			c0 = selfCPU()
			for range calls {
				if err := echo(p.ctx, p.via); err != nil {
					b.Fatalf("%s echo: %v", v, err)
				}
			}
			perCall[v] = append(perCall[v], us(selfCPU()-c0)/float64(calls))
		}
		b.Logf("round %d: CPU µs/event none %.3f off %.3f sampled %.3f; µs/call none %.1f off %.1f sampled %.1f", round,
			perEvent[variantNone][round], perEvent[variantOff][round], perEvent[variantSampled][round],
			perCall[variantNone][round], perCall[variantOff][round], perCall[variantSampled][round])
	}
	for _, v := range variants {
		b.ReportMetric(median(perEvent[v]), v+"-cpu-µs/event")
		b.ReportMetric(median(perCall[v]), v+"-cpu-µs/call")
	}
	none := median(perEvent[variantNone])
	// At 10,000 events/s the path spends 10,000 × µs/event of CPU per
	// second; the overhead is the instrumented path's extra share of it.
	b.ReportMetric(100*(median(perEvent[variantOff])-none)/none, "off-overhead-%")
	b.ReportMetric(100*(median(perCall[variantOff])-median(perCall[variantNone]))/median(perCall[variantNone]), "off-unary-overhead-%")
	b.ReportMetric(0, "ns/op")
}
