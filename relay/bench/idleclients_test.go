package bench

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// BenchmarkIdleClients measures the relay's memory per idle gRPC client
// connection: BETCODE_BENCH_CLIENTS connections (default 1,000), each
// authenticated by one health check and then left open and quiet, as
// CLIs between commands and clients waiting on a stream hold theirs. It
// reports the relay's RSS per connection (VmRSS before, and after the
// relay's next garbage collection). The front is chosen by BETCODE_BENCH_RELAY_ENV
// (BETCODE_RELAY_FRONT=engine or net/http):
//
//	BETCODE_BENCH_RELAY_ENV="GOMAXPROCS=1 GOGC=40 BETCODE_RELAY_FRONT=engine" \
//	  go test -run '^$' -bench IdleClients -benchtime 1x ./bench/
func BenchmarkIdleClients(b *testing.B) {
	n := envInt("BETCODE_BENCH_CLIENTS", 1000)
	raiseFileLimit(b, uint64(2*n)+1000)
	r := newRelay(b, relayEnv()...)
	before := r.snapshot(b).rssKiB
	conns := make([]*grpc.ClientConn, 0, n)
	defer func() {
		for _, cc := range conns {
			cc.Close()
		}
	}()
	ctx := context.Background()
	for range n {
		cc := dialClient(b, r)
		if _, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
			b.Fatal(err)
		}
		conns = append(conns, cc)
	}
	after := r.rssAfterGC(b)
	per := float64(after-before) / float64(n)
	b.Logf("%d idle client connections: relay RSS %d → %d KiB (%.1f KiB each)", n, before, after, per)
	b.ReportMetric(per, "KiB/conn")
	b.ReportMetric(0, "ns/op")
}

// rssAfterGC returns the relay's RSS once it has collected since now (its
// garbage from the handshakes gone): its Go collector counts the cycles;
// nothing else announces one.
func (r *relayProc) rssAfterGC(tb testing.TB) int64 {
	tb.Helper()
	mark := r.snapshot(tb).gcs
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(3 * time.Minute) // the runtime collects at least every 2 minutes
	for r.snapshot(tb).gcs <= mark {
		select {
		case <-tick.C:
		case <-deadline:
			tb.Fatal("the relay ran no garbage collection within 3 minutes")
		}
	}
	return r.snapshot(tb).rssKiB
}
