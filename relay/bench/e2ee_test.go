package bench

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/e2ee"
	"github.com/betcode-dev/betcode/shared/h2wire"
)

// The "e2e" path of BenchmarkForward: the same calls inside an end-to-end
// channel (shared/e2ee, Noise IK) carried by ChannelService.Open through
// the relay, as the betcode CLI makes them to a paired machine. The bench
// agent serves the channel the way the real one does (agent/channelsvc):
// Accept, then hand the connection to the same grpc.Server.

// keysEnv names the directory holding the machine's and the device's keys.
const keysEnv = "BETCODE_BENCH_AGENT_KEYS"

// benchKeys makes (or reads) the machine and device keys in dir.
func benchKeys(dir string) (machine, device e2ee.KeyPair, err error) {
	if machine, err = e2ee.LoadOrCreateKey(filepath.Join(dir, "machine.key")); err != nil {
		return
	}
	device, err = e2ee.LoadOrCreateKey(filepath.Join(dir, "device.key"))
	return
}

// channels serves ChannelService.Open on the bench agent and is the
// listener of the channels' connections.
type channels struct {
	pb.UnimplementedChannelServiceServer
	key    e2ee.KeyPair
	device []byte
	conns  chan net.Conn
	once   sync.Once
	done   chan struct{}
}

// serveChannels registers ChannelService on srv (before it serves) and
// serves the channels' connections with srv.
func serveChannels(srv *grpc.Server, keyDir string) error {
	machine, device, err := benchKeys(keyDir)
	if err != nil {
		return err
	}
	c := &channels{key: machine, device: device.Public, conns: make(chan net.Conn), done: make(chan struct{})}
	pb.RegisterChannelServiceServer(srv, c)
	go srv.Serve(c)
	return nil
}

// serverTransport carries Noise messages on the Open stream.
type serverTransport struct {
	s    grpc.BidiStreamingServer[pb.OpenRequest, pb.OpenResponse]
	once sync.Once
	done chan struct{}
}

func (t *serverTransport) Send(b []byte) error { return t.s.Send(&pb.OpenResponse{Data: b}) }
func (t *serverTransport) Recv() ([]byte, error) {
	m, err := t.s.Recv()
	return m.GetData(), err
}
func (t *serverTransport) Close() error { t.once.Do(func() { close(t.done) }); return nil }

func (c *channels) Open(s grpc.BidiStreamingServer[pb.OpenRequest, pb.OpenResponse]) error {
	t := &serverTransport{s: s, done: make(chan struct{})}
	conn, err := e2ee.Accept(s.Context(), t, c.key, benchMachine, func(pub, _ []byte) error {
		if !bytes.Equal(pub, c.device) {
			return errors.New("not paired")
		}
		return nil
	})
	if err != nil {
		return err
	}
	conn.SetSendFilter(new(h2wire.DataMerger).Merge) // as agent/channelsvc does
	select {
	case c.conns <- conn:
	case <-c.done:
		conn.Close()
		return nil
	}
	select {
	case <-t.done:
	case <-s.Context().Done():
		conn.Close()
	}
	return nil
}

func (c *channels) Accept() (net.Conn, error) {
	select {
	case conn := <-c.conns:
		return conn, nil
	case <-c.done:
		return nil, net.ErrClosed
	}
}

func (c *channels) Close() error   { c.once.Do(func() { close(c.done) }); return nil }
func (c *channels) Addr() net.Addr { return e2ee.Addr{Role: "machine"} }

// clientTransport carries Noise messages on a client's Open stream.
type clientTransport struct {
	s      grpc.BidiStreamingClient[pb.OpenRequest, pb.OpenResponse]
	cancel context.CancelFunc
}

func (t clientTransport) Send(b []byte) error { return t.s.Send(&pb.OpenRequest{Data: b}) }

// recvMsgs counts the channel messages clients received.
var recvMsgs atomic.Int64

func (t clientTransport) Recv() ([]byte, error) {
	m, err := t.s.Recv()
	recvMsgs.Add(1)
	if err != nil {
		return nil, err
	}
	return m.Data, nil
}
func (t clientTransport) Close() error { t.cancel(); return nil }

// dialE2E returns a client whose connection is a channel to the bench
// machine through via (the relay client).
func dialE2E(tb testing.TB, via *grpc.ClientConn, keyDir string) *grpc.ClientConn {
	tb.Helper()
	machine, device, err := benchKeys(keyDir)
	if err != nil {
		tb.Fatal(err)
	}
	cc, err := grpc.NewClient("passthrough:///"+benchMachine, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithInitialWindowSize(1<<20), grpc.WithInitialConnWindowSize(4<<20),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			sctx, cancel := context.WithCancel(metadata.AppendToOutgoingContext(context.Background(), "x-betcode-machine-id", benchMachine))
			s, err := pb.NewChannelServiceClient(via).Open(sctx)
			if err != nil {
				cancel()
				return nil, err
			}
			c, err := e2ee.Dial(ctx, clientTransport{s: s, cancel: cancel}, device, benchMachine, machine.Public, nil)
			if err != nil {
				cancel()
				return nil, err
			}
			return c, nil
		}))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { cc.Close() })
	return cc
}

// BenchmarkChannelHandshake is a whole channel's setup through the relay
// (Open, the Noise IK handshake, a first call inside), and its CPU across
// the three processes.
func BenchmarkChannelHandshake(b *testing.B) {
	e := newForwardEnv(b)
	c0 := e.cpuTime()
	b.ResetTimer()
	for range b.N {
		cc := dialE2E(b, e.via, e.keys)
		if err := echo(context.Background(), cc); err != nil {
			b.Fatal(err)
		}
		cc.Close()
	}
	b.ReportMetric(us(e.cpuTime()-c0)/float64(b.N), "cpu-µs/channel")
}

var _ io.Closer = (*channels)(nil)

// BenchmarkIdleChannels measures what an open, idle end-to-end channel
// costs the relay beyond the client's connection: BETCODE_BENCH_CLIENTS
// connections (default 1,000) are opened and authenticated, the relay's
// RSS read after its next collection; then each opens one channel to the
// bench agent (ChannelService.Open and the Noise handshake) and leaves it
// quiet, and the RSS is read again. The difference per channel is the
// target's figure (≤ 8 KiB):
//
//	go test -run '^$' -bench IdleChannels -benchtime 1x ./bench/
func BenchmarkIdleChannels(b *testing.B) {
	if r := envInt("BETCODE_BENCH_MEMPROFILERATE", 0); r > 0 && os.Getenv("BETCODE_BENCH_INPROC") == "1" {
		runtime.MemProfileRate = r // e.g. 1 for a heap profile of every allocation
	}
	n := envInt("BETCODE_BENCH_CLIENTS", 1000)
	raiseFileLimit(b, uint64(2*n)+1000)
	r := newRelay(b, relayEnv()...)
	startAgentProcess(b, r, benchMachine)
	machine, device, err := benchKeys(filepath.Join(r.pki, "e2ee"))
	if err != nil {
		b.Fatal(err)
	}
	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-betcode-machine-id", benchMachine)
	conns := make([]*grpc.ClientConn, 0, n)
	defer func() {
		for _, cc := range conns {
			cc.Close()
		}
	}()
	for range n {
		cc := dialClient(b, r)
		if _, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
			b.Fatal(err)
		}
		conns = append(conns, cc)
	}
	base := r.rssAfterGC(b)
	before := r.snapshot(b)
	if r.cmd == nil {
		runtime.GC()
		writeProfiles(b, 0) // the base: connections without channels
	}
	channels := make([]*e2ee.Conn, 0, n)
	defer func() {
		for _, c := range channels {
			c.Close()
		}
	}()
	for _, cc := range conns {
		sctx, cancel := context.WithCancel(ctx)
		defer cancel()
		s, err := pb.NewChannelServiceClient(cc).Open(sctx)
		if err != nil {
			b.Fatal(err)
		}
		c, err := e2ee.Dial(ctx, clientTransport{s: s, cancel: cancel}, device, benchMachine, machine.Public, nil)
		if err != nil {
			b.Fatal(err)
		}
		channels = append(channels, c)
	}
	after := r.rssAfterGC(b)
	now := r.snapshot(b)
	if r.cmd == nil {
		// In process (BETCODE_BENCH_INPROC=1): the heap profile holds the
		// benchmark's own clients too; read the relay's packages in it.
		runtime.GC()
		writeProfiles(b, n)
	}
	per := float64(after-base) / float64(n)
	b.Logf("%d idle channels: relay RSS %d → %d KiB (%.1f KiB per channel beyond its connection)", n, base, after, per)
	kib := func(a, b float64) float64 { return (b - a) / 1024 / float64(n) }
	b.Logf("per channel: heap in use %.1f KiB (live after the collection %.1f), stacks %.1f KiB, %.2f goroutines",
		kib(before.heapInuse, now.heapInuse), kib(before.heapAlloc, now.heapAlloc), kib(before.stackInuse, now.stackInuse),
		(now.goroutines-before.goroutines)/float64(n))
	b.ReportMetric(kib(before.heapAlloc, now.heapAlloc), "heap-KiB/channel")
	b.ReportMetric(per, "KiB/channel")
	b.ReportMetric(0, "ns/op")
}
