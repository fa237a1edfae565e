package bench

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// BenchmarkPeerForward measures the hop between replicas: unary calls to a
// machine whose tunnel is on replica A, made through A itself ("local") and
// through B, which hands each to A ("peer"; docs/relay.md, several
// replicas). Two replicas on one PostgreSQL database, one agent on A. The
// calls are QueueMessage to the online machine (forwarded, not buffered).
// b.N rounds alternate the two paths, BETCODE_BENCH_CALLS calls each
// (default 2,000); it reports the medians of the rounds' p50s and the
// hop's cost (peer-added-p50-µs). The replicas' environment is
// BETCODE_BENCH_RELAY_ENV, so the front (BETCODE_RELAY_FRONT) is chosen
// there:
//
//	BETCODE_BENCH_RELAY_ENV="GOMAXPROCS=1 BETCODE_RELAY_FRONT=engine" \
//	  go test -run '^$' -bench PeerForward -benchtime 5x ./bench/
func BenchmarkPeerForward(b *testing.B) {
	calls := envInt("BETCODE_BENCH_CALLS", 2000)
	a, rb := newReplicaPair(b)
	cfgs := newCertMint(b, a.pki).machines(b, "pf", 1)
	srv := grpc.NewServer(grpc.InitialWindowSize(1<<20), grpc.InitialConnWindowSize(4<<20))
	pb.RegisterAgentServiceServer(srv, newQueueRecorder())
	defer srv.Stop()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	ag := &drainAgent{cfg: cfgs[0], srv: srv}
	wg.Go(func() { ag.run(ctx, a.addr, nil) })
	a.waitConnected(1, time.Minute)

	mctx := metadata.AppendToOutgoingContext(context.Background(), "x-betcode-machine-id", "pf-00000")
	paths := map[string]pb.AgentServiceClient{
		"local": pb.NewAgentServiceClient(dialClient(b, a)),
		"peer":  pb.NewAgentServiceClient(dialClient(b, rb)),
	}
	var n int
	send := func(c pb.AgentServiceClient) (*pb.QueueMessageResponse, error) {
		n++
		return c.QueueMessage(mctx, &pb.QueueMessageRequest{SessionId: "s", IdempotencyKey: strconv.Itoa(n),
			Message: &pb.UserMessage{Content: "m"}})
	}
	call := func(c pb.AgentServiceClient) error {
		r, err := send(c)
		if err == nil && r.Buffered {
			b.Fatal("a call was buffered: the machine went offline")
		}
		return err
	}
	// B learns where the machine is from the store (A records it at the
	// tunnel's start): until B sees it, its calls are buffered.
	// Nothing announces it: B's calls are tried on a ticker, up to a
	// deadline.
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(30 * time.Second)
	for {
		r, err := send(paths["peer"])
		if err == nil && !r.Buffered {
			break
		}
		select {
		case <-tick.C:
		case <-deadline:
			b.Fatalf("calls through B are not forwarded to A: %v, %v", r, err)
		}
	}
	for _, p := range []string{"local", "peer"} {
		timeCalls(b, p+" warm-up", 200, func() error { return call(paths[p]) })
	}

	p50 := map[string][]float64{}
	var added []float64
	b.ResetTimer()
	for round := range b.N {
		order := []string{"local", "peer"}
		if round%2 == 1 {
			order = []string{"peer", "local"}
		}
		r := map[string]float64{}
		for _, p := range order {
			lat := timeCalls(b, p, calls, func() error { return call(paths[p]) })
			r[p] = us(percentile(lat, .5))
			p50[p] = append(p50[p], r[p])
		}
		added = append(added, r["peer"]-r["local"])
		b.Logf("round %d: unary p50 µs local %.0f, through a peer %.0f (+%.0f)", round, r["local"], r["peer"], r["peer"]-r["local"])
	}
	b.ReportMetric(median(p50["local"]), "local-p50-µs")
	b.ReportMetric(median(p50["peer"]), "peer-p50-µs")
	b.ReportMetric(median(added), "peer-added-p50-µs")
	b.ReportMetric(0, "ns/op")
}
