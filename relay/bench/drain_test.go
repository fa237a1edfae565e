package bench

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/betcode-dev/betcode/relay/internal/pgtest"
	"github.com/betcode-dev/betcode/relay/pki"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/mtls"
	"github.com/betcode-dev/betcode/shared/tunnel"
)

// drainJitter is agent/relaylink.DrainJitter, copied (the relay module must
// not import the agent): after a drain signal an agent reconnects within it.
const drainJitter = 100 * time.Millisecond

// BenchmarkDrain runs two relay replicas (A, B) on one PostgreSQL database
// behind a balancer that prefers A, connects N agents (all to A), buffers
// three messages for each of 50 machines that were offline and brings
// those back to A as well, then sends A SIGTERM. It measures the time until
// B counts all N tunnels and until every buffered message reached its
// machine, and counts messages lost or delivered twice. It runs once,
// whatever b.N:
//
//	go test -run '^$' -bench Drain -benchtime 1x ./bench/
func BenchmarkDrain(b *testing.B) {
	n := envInt("BETCODE_BENCH_DRAIN", 1000)
	const buffered, perMachine = 50, 3
	raiseFileLimit(b, uint64(2*n)+1000)
	a, rb := newReplicaPair(b)
	lb := newFailover(b, a.addr, rb.addr)
	mint := newCertMint(b, a.pki)
	cfgs := mint.machines(b, "dr", n)
	rec := newQueueRecorder()
	srv := grpc.NewServer(grpc.InitialWindowSize(1<<20), grpc.InitialConnWindowSize(4<<20))
	pb.RegisterAgentServiceServer(srv, rec)
	defer srv.Stop()

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	agents := make([]*drainAgent, n)
	for i := range agents {
		agents[i] = &drainAgent{cfg: cfgs[i], srv: srv}
	}
	startAll := func(set []*drainAgent) {
		sem := make(chan struct{}, 16) // 16 handshakes at a time
		upAll := make(chan struct{}, len(set))
		for _, ag := range set {
			sem <- struct{}{}
			actx, stop := context.WithCancel(ctx)
			ag.stop = stop
			up := make(chan struct{}, 1)
			wg.Go(func() { ag.run(actx, lb.addr(), up) })
			wg.Go(func() {
				select {
				case <-up:
				case <-ctx.Done():
				}
				<-sem
				upAll <- struct{}{}
			})
		}
		for range set {
			<-upAll
		}
	}
	startAll(agents)
	a.waitConnected(n, 2*time.Minute)

	// 50 machines go offline; messages for them wait in the buffer.
	for _, ag := range agents[:buffered] {
		ag.stop()
	}
	a.waitConnected(n-buffered, time.Minute)
	client := dialClient(b, rb)
	for i := range buffered {
		id := fmt.Sprintf("dr-%05d", i)
		mctx := metadata.AppendToOutgoingContext(context.Background(), "x-betcode-machine-id", id)
		for j := range perMachine {
			r, err := pb.NewAgentServiceClient(client).QueueMessage(mctx, &pb.QueueMessageRequest{SessionId: "s", IdempotencyKey: id + "/" + strconv.Itoa(j),
				Message: &pb.UserMessage{Content: "m"}})
			if err != nil || !r.Buffered {
				b.Fatalf("queue for %s: %v, %v", id, r, err)
			}
		}
	}
	// They come back (to A, which starts delivering), and A drains.
	startAll(agents[:buffered])
	start := time.Now()
	if err := a.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		b.Fatal(err)
	}
	var exited, allOnB, allDelivered time.Duration
	deadline := start.Add(90 * time.Second)
	for time.Now().Before(deadline) && (exited == 0 || allOnB == 0 || allDelivered == 0) {
		if exited == 0 {
			select {
			case <-a.exited:
				exited = time.Since(start)
			default:
			}
		}
		if c, err := rb.connected(context.Background()); err == nil && c == n && allOnB == 0 {
			allOnB = time.Since(start)
		}
		if rec.distinct() == buffered*perMachine && allDelivered == 0 {
			allDelivered = time.Since(start)
		}
		time.Sleep(20 * time.Millisecond)
	}
	c, _ := rb.connected(context.Background())
	if allOnB == 0 || allDelivered == 0 || exited == 0 {
		b.Fatalf("after %s: %d of %d agents on B, %d of %d buffered messages delivered, A exited: %v", deadline.Sub(start), c, n,
			rec.distinct(), buffered*perMachine, exited != 0)
	}
	if code := a.cmd.ProcessState.ExitCode(); code != 0 {
		b.Fatalf("A exited %d after the drain", code)
	}
	var drained, other int
	for _, ag := range agents {
		drained += int(ag.drains.Load())
		other += int(ag.failures.Load())
	}
	lost := buffered*perMachine - rec.distinct()
	b.ReportMetric(allOnB.Seconds(), "s-until-all-on-B")
	b.ReportMetric(exited.Seconds(), "s-until-A-exited")
	b.ReportMetric(allDelivered.Seconds(), "s-until-buffered-delivered")
	b.ReportMetric(float64(lost), "buffered-lost")
	b.ReportMetric(float64(rec.repeats()), "buffered-repeated")
	b.ReportMetric(0, "ns/op")
	if other > 0 {
		b.Logf("warnings in B's log: %v", warnings(b, rb))
	}
	b.Logf("n=%d: all on B after %.2fs, A exited after %.2fs, %d buffered messages delivered after %.2fs (%d repeated, %d lost); agents told to reconnect %d, other disconnects %d",
		n, allOnB.Seconds(), exited.Seconds(), rec.distinct(), allDelivered.Seconds(), rec.repeats(), lost, drained, other)
}

// warnings counts the relay's warning log lines by message.
func warnings(tb testing.TB, r *relayProc) map[string]int {
	b, err := os.ReadFile(r.logPath)
	if err != nil {
		tb.Fatal(err)
	}
	out := map[string]int{}
	for _, l := range strings.Split(string(b), "\n") {
		if !strings.Contains(l, "level=WARN") {
			continue
		}
		_, msg, _ := strings.Cut(l, "msg=")
		if strings.HasPrefix(msg, `"`) {
			msg, _, _ = strings.Cut(msg[1:], `"`)
		}
		out[msg]++
	}
	return out
}

// newReplicaPair starts replicas A and B on one fresh PostgreSQL database.
func newReplicaPair(tb testing.TB) (a, b *relayProc) {
	tb.Helper()
	pkiDir, dbURL := tb.TempDir(), pgtest.URL(tb)
	if _, err := pki.Init(pkiDir, []string{"127.0.0.1", "localhost"}, pki.Options{}); err != nil {
		tb.Fatal(err)
	}
	var token string
	for i := range 2 {
		r := &relayProc{tb: tb, pki: pkiDir, dataDir: tb.TempDir(), addr: freeAddr(tb), metricsAddr: freeAddr(tb), dbURL: dbURL, token: token, env: relayEnv()}
		if i == 0 {
			r.token = seedUser(tb, dbURL, r.dataDir)
			token = r.token
		}
		r.logPath = filepath.Join(r.dataDir, "relay.log")
		r.args = []string{"--advertise-addr", r.addr, "--heartbeat-interval", "2s", "--drain-grace", "60s"}
		r.start()
		tb.Cleanup(r.stop)
		if i == 0 {
			a = r
		} else {
			b = r
		}
	}
	return a, b
}

// dialClient connects to r as benchUser.
func dialClient(tb testing.TB, r *relayProc) *grpc.ClientConn {
	tb.Helper()
	cfg, err := mtls.ClientConfig(r.caFile(), "", "", "127.0.0.1")
	if err != nil {
		tb.Fatal(err)
	}
	cc, err := grpc.NewClient(r.addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)), grpc.WithPerRPCCredentials(bearer(r.token)))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { cc.Close() })
	return cc
}

// drainAgent keeps one simulated agent connected the way relaylink.Run
// does, reconnecting within drainJitter after a drain signal.
type drainAgent struct {
	cfg      *tls.Config
	srv      *grpc.Server
	stop     context.CancelFunc
	drains   atomic.Int32 // tunnels the relay ended draining
	failures atomic.Int32 // other disconnects and failed dials
}

func (a *drainAgent) run(ctx context.Context, addr string, up chan<- struct{}) {
	step := 0
	for ctx.Err() == nil {
		drained := a.session(ctx, addr, up)
		up = nil
		if ctx.Err() != nil {
			return
		}
		var wait time.Duration
		if drained {
			a.drains.Add(1)
			step = 0 // as relaylink: the tunnel was fine
			wait = time.Duration(rand.Int64N(int64(drainJitter)))
		} else {
			a.failures.Add(1)
			wait = time.Duration(float64(reconnectSteps[min(step, len(reconnectSteps)-1)]) * (0.8 + 0.4*rand.Float64()))
			step++
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

// session runs one tunnel, as dialAgent does, and reports whether the
// relay ended it with RELAY_DRAINING.
func (a *drainAgent) session(ctx context.Context, addr string, up chan<- struct{}) bool {
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(a.cfg)),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 30 * time.Second, Timeout: 10 * time.Second}),
		grpc.WithInitialWindowSize(1<<20), grpc.WithInitialConnWindowSize(4<<20))
	if err != nil {
		return false
	}
	defer cc.Close()
	api := pb.NewTunnelServiceClient(cc)
	rctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	_, err = api.Register(rctx, &pb.RegisterRequest{MachineName: "bench", Capabilities: []string{"claude-code", tunnel.CapabilityHTTP2},
		Info: &pb.MachineInfo{Os: "linux", Arch: "amd64", Version: "bench"}})
	cancel()
	if err != nil {
		return isDraining(err)
	}
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	stream, err := api.OpenTunnel(sctx)
	if err != nil {
		return isDraining(err)
	}
	ws := &drainWatch{FrameStream: stream}
	conn := tunnel.NewConn(ws, stop, tunnel.Addr("machine"), tunnel.Addr("relay"))
	var once sync.Once
	conn.OnHeartbeat = func(*pb.TunnelHeartbeat) {
		once.Do(func() { // the relay can route calls to us
			if up != nil {
				up <- struct{}{}
			}
		})
	}
	ts := &tunnel.Server{Remote: "relay", Handler: a.srv, Native: a.srv}
	_ = ts.ServeConn(sctx, conn) // ends with the tunnel
	return ws.drained.Load()
}

// drainWatch notes the relay's drain signal on a tunnel stream.
type drainWatch struct {
	tunnel.FrameStream
	drained atomic.Bool
}

func (w *drainWatch) Recv() (*pb.TunnelFrame, error) {
	f, err := w.FrameStream.Recv()
	if (err != nil && isDraining(err)) || f.GetError().GetCode() == "RELAY_DRAINING" {
		w.drained.Store(true)
	}
	return f, err
}

func isDraining(err error) bool {
	for _, d := range status.Convert(err).Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.Reason == "RELAY_DRAINING" {
			return true
		}
	}
	return false
}

// queueRecorder is the agents' AgentService: it counts each buffered
// message's deliveries by idempotency key.
type queueRecorder struct {
	pb.UnimplementedAgentServiceServer
	mu   sync.Mutex
	seen map[string]int
}

func newQueueRecorder() *queueRecorder { return &queueRecorder{seen: map[string]int{}} }

func (q *queueRecorder) QueueMessage(_ context.Context, req *pb.QueueMessageRequest) (*pb.QueueMessageResponse, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.seen[req.IdempotencyKey]++
	return &pb.QueueMessageResponse{}, nil
}

func (q *queueRecorder) distinct() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.seen)
}

func (q *queueRecorder) repeats() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	r := 0
	for _, c := range q.seen {
		r += c - 1
	}
	return r
}

// failover is a TCP balancer that sends each connection to the first of
// its backends that accepts it: all agents land on A until A stops
// listening (a drain), then on B.
type failover struct {
	ln       net.Listener
	backends []string
	wg       sync.WaitGroup
	mu       sync.Mutex
	conns    map[net.Conn]struct{}
	closed   bool
}

func newFailover(tb testing.TB, backends ...string) *failover {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	f := &failover{ln: ln, backends: backends, conns: map[net.Conn]struct{}{}}
	f.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			f.wg.Go(func() { f.serve(c) })
		}
	})
	tb.Cleanup(func() {
		ln.Close()
		f.mu.Lock()
		f.closed = true
		for c := range f.conns {
			c.Close()
		}
		f.mu.Unlock()
		f.wg.Wait()
	})
	return f
}

func (f *failover) addr() string { return f.ln.Addr().String() }

func (f *failover) serve(c net.Conn) {
	var u net.Conn
	for _, addr := range f.backends {
		var err error
		if u, err = net.DialTimeout("tcp", addr, time.Second); err == nil {
			break
		}
	}
	if u == nil {
		c.Close()
		return
	}
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		c.Close()
		u.Close()
		return
	}
	f.conns[c], f.conns[u] = struct{}{}, struct{}{}
	f.mu.Unlock()
	var pipes sync.WaitGroup
	pipes.Go(func() { io.Copy(u, c); u.Close() })
	pipes.Go(func() { io.Copy(c, u); c.Close() })
	pipes.Wait()
	f.mu.Lock()
	delete(f.conns, c)
	delete(f.conns, u)
	f.mu.Unlock()
}
