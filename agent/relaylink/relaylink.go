// Package relaylink keeps the agent connected to a relay: it dials out over
// mTLS, registers, opens the tunnel and serves every call the relay forwards
// through it with the agent's own gRPC server. On any failure it reconnects
// with backoff (1 s, 2 s, 5 s, 10 s, then every 30 s, each ±50 %) and
// registers again; a tunnel that was up and is lost (its relay replica
// died) is dialled again within LostRetry first. Local clients are served whatever the tunnel does. When
// the relay offers it, the relay's calls come over a direct connection of
// their own (tunnel.ServeDirect), the tunnel stream staying for the rest. A
// relay replica that drains (RELAY_DRAINING, drain.go) is no failure: the
// link reconnects within DrainJitter and starts its schedule over.
//
// While the tunnel is up the link renews the machine certificate when less
// than a third of its lifetime is left (EnrollService.RenewCertificate on
// the tunnel's own connection, a CSR for the same key), writes it over the
// certificate file, and presents it from the next handshake on.
package relaylink

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
	"google.golang.org/grpc"
	grpcbackoff "google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/mtls"
	"github.com/betcode-dev/betcode/shared/tunnel"
)

// Config configures the link.
type Config struct {
	Relay       string // host:port
	CAFile      string // the relay's CA (--relay-ca)
	CertFile    string // this machine's certificate (--machine-cert)
	KeyFile     string // its key (--machine-key)
	MachineName string
	Version     string
	Handler     http.Handler // the agent's grpc.Server
	// Native, if set (the same grpc.Server), serves the relay's HTTP/2
	// call stream on grpc-go's own transport instead of through Handler.
	Native tunnel.NativeServer
	Logger *slog.Logger
	// ActiveSessions, if set, is reported in heartbeats.
	ActiveSessions func() uint32
	// RenewEvery is how often the certificate's remaining lifetime is
	// checked while the tunnel is up; default DefaultRenewEvery.
	RenewEvery time.Duration
	// Now is the clock renewal decisions use; default time.Now.
	Now func() time.Time
}

// Link is a running connection manager.
type Link struct {
	cfg      Config
	certs    *certFile
	up       atomic.Int32  // sessions whose tunnel is up (two during a hand-over)
	since    atomic.Int64  // unix nanos of the last state change
	ups      atomic.Uint64 // tunnels confirmed so far
	renewErr atomic.Value  // string: the last renewal error, logged at warn once
	// cc is the connection of the tunnel that is up (nil: none), for the
	// machine's own calls to the relay (pairing.go).
	cc atomic.Pointer[grpc.ClientConn]
}

// New checks cfg and returns a Link; Run starts it.
func New(cfg Config) (*Link, error) {
	if cfg.Relay == "" || cfg.CertFile == "" || cfg.KeyFile == "" || cfg.CAFile == "" {
		return nil, errors.New("relay link needs --relay, --machine-cert, --machine-key and --relay-ca")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.MachineName == "" {
		cfg.MachineName, _ = os.Hostname()
	}
	if cfg.RenewEvery <= 0 {
		cfg.RenewEvery = DefaultRenewEvery
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	l := &Link{cfg: cfg, certs: &certFile{certPath: cfg.CertFile, keyPath: cfg.KeyFile}}
	l.since.Store(time.Now().UnixNano())
	return l, nil
}

// Connected reports whether the tunnel is up, and since when.
func (l *Link) Connected() (bool, time.Time) {
	return l.up.Load() > 0, time.Unix(0, l.since.Load())
}

// setConnected counts a session's tunnel up or down; the link is connected
// while any is (a hand-over overlaps two).
func (l *Link) setConnected(v bool) {
	if v {
		l.ups.Add(1)
		if l.up.Add(1) == 1 {
			l.since.Store(time.Now().UnixNano())
		}
		return
	}
	if l.up.Add(-1) == 0 {
		l.since.Store(time.Now().UnixNano())
	}
}

// Steps is the reconnection schedule.
var Steps = []time.Duration{time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second, 30 * time.Second}

// stepBackOff walks Steps, staying at the last step, each wait uniform in
// [d/2, 3d/2]: the mean schedule is Steps, and after a relay restart its N
// agents' first dials spread over a whole second (N per second), not the
// 0.4 s (2.5·N per second) that ±20 % gave, a herd that queued at the
// relay's handshake gate (docs/benchmarks-relay.md, "Scale").
type stepBackOff struct{ i int }

func (b *stepBackOff) NextBackOff() time.Duration {
	d := Steps[min(b.i, len(Steps)-1)]
	b.i++
	return d/2 + time.Duration(rand.Int64N(int64(d)+1))
}

func (b *stepBackOff) Reset() { b.i = 0 }

var _ backoff.BackOff = (*stepBackOff)(nil)

// LostRetry bounds the wait before dialling again after a tunnel that was
// up is lost (not drained): its replica died, and the load balancer sends
// the next connection to another, so the machine's clients wait for this
// dial. The wait is uniform in [0, LostRetry], spreading a dead replica's
// agents over it; the surviving replicas' handshake gate
// (--max-pending-conns) turns any excess away, and those go on with Steps.
var LostRetry = 250 * time.Millisecond

// QuickAgain is how long a tunnel must stay up for its loss to be dialled
// again within LostRetry after three such quick dials: a relay that drops
// every tunnel at once falls back to the schedule, while a machine whose
// replicas die one after another (a rolling failure, the chaos soak's
// kills every few seconds) keeps coming back at once; waiting for a
// minute up, it fell back to the schedule's 0.5-1.5 s, and its clients
// with it.
var QuickAgain = 10 * time.Second

// lostWait is a wait uniform in [0, LostRetry].
func lostWait() time.Duration { return time.Duration(rand.Int64N(int64(LostRetry) + 1)) }

// connectParams is how a session's connection retries within Register's
// 15 s: a first connection that fails (the load balancer's pick of a replica
// that just died) is tried again after 100 ms, not after gRPC's default
// 1 s, 1.6 s, 2.56 s…, which kept a machine's clients waiting 5.7 s after
// its replica died in the chaos soak. Run's schedule paces the sessions.
var connectParams = grpc.ConnectParams{
	Backoff:           grpcbackoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 3 * time.Second},
	MinConnectTimeout: 10 * time.Second,
}

// Run keeps the link up until ctx ends.
func (l *Link) Run(ctx context.Context) error {
	log := l.cfg.Logger.With("relay", l.cfg.Relay)
	bo := &stepBackOff{}
	drains := 0 // drain signals in a row
	losts := 0  // quick reconnects after a lost tunnel, since one stayed up QuickAgain
	// Sessions handed over (their replica drains) serve their last calls
	// beside the next one until the replica ends them.
	var handedOver sync.WaitGroup
	defer handedOver.Wait()
	for ctx.Err() == nil {
		start, ups := time.Now(), l.ups.Load()
		moved := make(chan struct{})
		done := make(chan error, 1)
		handedOver.Go(func() { done <- l.session(ctx, log, func() { close(moved) }) })
		var err error
		select {
		case err = <-done:
		case <-moved:
			// The replica drains and this session hands over: register
			// with another now (jittered, as the replica's other agents
			// do), while this one finishes its calls.
			drains = 0
			bo.Reset()
			wait := time.Duration(rand.Int64N(int64(DrainJitter) + 1))
			log.Info("relay replica draining; registering with another while its calls finish", "retry_in", wait.Round(time.Millisecond))
			if !sleepCtx(ctx, wait) {
				return nil
			}
			continue
		}
		if ctx.Err() != nil {
			return nil
		}
		lost := l.ups.Load() != ups // this session's tunnel was up
		if up := time.Since(start); up > time.Minute {
			bo.Reset() // it was up for a while: start the schedule over
			losts = 0
		} else if up > QuickAgain {
			losts = 0
		}
		var wait time.Duration
		if t, ok := isTooOld(err); ok {
			// Trying again soon cannot help: say what to install, once in
			// a long while.
			drains = 0
			wait = TooOldRetry
			log.Error("the relay refuses this agent: "+t.Message, "retry_in", wait)
		} else if errors.Is(err, errRelayDraining) && drains < 3 {
			// A replica going away for a deploy: reconnect at once (the
			// Service sends us to another one), jittered so that its
			// agents do not arrive all in the same instant.
			drains++
			bo.Reset() // the tunnel was fine: a failure after this starts at 1 s
			wait = time.Duration(rand.Int64N(int64(DrainJitter) + 1))
			log.Info("relay replica draining; reconnecting", "retry_in", wait.Round(time.Millisecond))
		} else if lost && !errors.Is(err, errRelayDraining) && losts < 3 {
			// The tunnel worked and is gone (its replica died, a
			// connection reset): dial again at once, jittered; a failure
			// after this starts the schedule over. Tunnels lost again
			// and again, each within QuickAgain, fall back to the
			// schedule.
			drains = 0
			losts++
			bo.Reset()
			wait = lostWait()
			log.Warn("relay link lost; reconnecting", "err", err, "retry_in", wait.Round(time.Millisecond))
		} else {
			if !errors.Is(err, errRelayDraining) {
				drains = 0
			}
			wait = bo.NextBackOff()
			log.Warn("relay link down; reconnecting", "err", err, "retry_in", wait.Round(time.Millisecond))
		}
		if !sleepCtx(ctx, wait) {
			return nil
		}
	}
	return nil
}

// sleepCtx waits d; false means ctx ended first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// handoverMax bounds how long a handed-over session may serve its calls:
// the replica ends it once they are done (within its own grace); an old
// relay that never does must not keep it forever.
const handoverMax = time.Minute

// session runs one connection until it fails. When its replica drains it
// hands over: it stops its heartbeats and renewals (the machine is to be
// recorded at another replica), calls handover once, and serves its calls
// under way until the replica ends the tunnel (at most handoverMax).
func (l *Link) session(ctx context.Context, log *slog.Logger, handover func()) error {
	host, _, err := net.SplitHostPort(l.cfg.Relay)
	if err != nil {
		return fmt.Errorf("--relay %q: %w", l.cfg.Relay, err)
	}
	tlsCfg, err := mtls.ClientConfig(l.cfg.CAFile, "", "", host)
	if err != nil {
		return err
	}
	// The certificate is read at each handshake: renewals take effect
	// without a restart.
	if _, err := l.certs.get(); err != nil {
		return err
	}
	tlsCfg.GetClientCertificate = l.certs.getClientCertificate
	cc, err := grpc.NewClient(l.cfg.Relay,
		grpc.WithTransportCredentials(credentials.NewTLS(tlsCfg)),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 30 * time.Second, Timeout: 10 * time.Second}),
		grpc.WithConnectParams(connectParams),
		grpc.WithInitialWindowSize(1<<20), grpc.WithInitialConnWindowSize(4<<20),
	)
	if err != nil {
		return err
	}
	defer cc.Close()
	api := pb.NewTunnelServiceClient(cc)
	rctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	resp, err := api.Register(rctx, &pb.RegisterRequest{
		MachineName: l.cfg.MachineName, Capabilities: []string{"claude-code", tunnel.CapabilityHTTP2, tunnel.CapabilityDirect},
		Info: &pb.MachineInfo{Os: runtime.GOOS, Arch: runtime.GOARCH, Version: l.cfg.Version, CpuCores: uint32(runtime.NumCPU())},
	})
	cancel()
	if err != nil {
		if drainingStatus(err) {
			return fmt.Errorf("register: %w", errRelayDraining)
		}
		if t := asTooOld(err); t != nil {
			return t
		}
		return fmt.Errorf("register: %s", mtls.DescribeHandshakeError(err))
	}
	if !resp.Accepted {
		return fmt.Errorf("relay refused registration: %s", resp.Message)
	}
	l.cc.Store(cc)
	defer l.cc.CompareAndSwap(cc, nil)
	// Direct connections (below) end with sctx; wait for them after stop.
	var directs sync.WaitGroup
	defer directs.Wait()
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	stream, err := api.OpenTunnel(metadata.AppendToOutgoingContext(sctx, tunnel.HandoverHeader, "1"))
	if err != nil {
		return fmt.Errorf("open tunnel: %w", err)
	}
	ws := &watchedStream{FrameStream: stream}
	conn := tunnel.NewConn(ws, stop, tunnel.Addr("machine"), tunnel.Addr("relay:"+l.cfg.Relay))
	registered := make(chan struct{})
	var once sync.Once
	conn.OnHeartbeat = func(*pb.TunnelHeartbeat) { once.Do(func() { close(registered) }) }
	// Heartbeats and renewals end at a hand-over: a heartbeat to the
	// draining replica would record the machine there again.
	hctx, endBeats := context.WithCancel(sctx)
	defer endBeats()
	var handing sync.Once
	var handedOver atomic.Bool
	bound := time.AfterFunc(handoverMax, stop) // armed at the hand-over
	bound.Stop()
	defer bound.Stop()
	conn.OnError = func(f *pb.TunnelFrame) bool {
		if f.GetError().GetCode() != CodeRelayDraining || f.GetRequestId() != "" {
			return false
		}
		handing.Do(func() {
			handedOver.Store(true)
			endBeats()
			bound.Reset(handoverMax)
			handover()
		})
		return true
	}
	srv := &tunnel.Server{Handler: l.cfg.Handler, Native: l.cfg.Native, Remote: "relay:" + l.cfg.Relay}
	// The relay invites us to carry its calls on a connection of their
	// own (tunnel.ServeDirect); the stream stays for everything else.
	dial := tunnel.DirectDialer(tlsCfg, l.cfg.Relay)
	var directing atomic.Bool // one direct connection at a time
	conn.OnDirectOffer = func(token []byte) {
		if !directing.CompareAndSwap(false, true) {
			return
		}
		directs.Go(func() {
			defer directing.Store(false)
			err := srv.ServeDirect(sctx, dial, token, directTries)
			switch {
			case sctx.Err() != nil:
			case errors.Is(err, tunnel.ErrDirectRefused):
				log.Info("relay calls stay on the tunnel stream", "reason", err)
			default:
				log.Debug("direct connection to the relay ended", "err", err)
			}
		})
	}
	served := make(chan error, 1)
	go func() { served <- srv.ServeConn(sctx, conn) }()
	// The relay sends a heartbeat frame once it can route calls to us.
	confirm := time.NewTimer(15 * time.Second)
	select {
	case <-registered:
		confirm.Stop()
	case err := <-served:
		confirm.Stop()
		return ws.cause(fmt.Errorf("tunnel closed before the relay confirmed it: %w", err))
	case <-confirm.C:
		stop()
		<-served
		return errors.New("the relay did not confirm the tunnel within 15s")
	}
	l.setConnected(true)
	defer l.setConnected(false)
	log.Info("relay link up", "message", resp.Message)

	var wg sync.WaitGroup
	defer wg.Wait()
	interval := time.Duration(resp.HeartbeatIntervalSecs) * time.Second
	if interval <= 0 {
		interval = 30 * time.Second
	}
	wg.Go(func() { l.heartbeats(hctx, api, interval, stop, log) })
	wg.Go(func() { l.renewals(hctx, pb.NewEnrollServiceClient(cc), log) })
	err = <-served
	stop()
	if handedOver.Load() {
		log.Debug("relay tunnel handed over has ended", "err", err)
	}
	return ws.cause(err)
}

// directTries is how many times the link dials a direct connection for one
// offer: behind a load balancer the connection may reach a replica that
// does not hold the tunnel, which refuses it.
const directTries = 4

// heartbeats sends a heartbeat every interval; missing three in a row ends
// the session so the link reconnects.
func (l *Link) heartbeats(ctx context.Context, api pb.TunnelServiceClient, interval time.Duration, endTunnel func(), log *slog.Logger) {
	t := time.NewTicker(interval)
	defer t.Stop()
	failures := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		req := &pb.HeartbeatRequest{SentAt: timestamppb.Now(), Metrics: &pb.MachineMetrics{}}
		if l.cfg.ActiveSessions != nil {
			req.Metrics.ActiveSessions = l.cfg.ActiveSessions()
		}
		hctx, cancel := context.WithTimeout(ctx, interval)
		resp, err := api.Heartbeat(hctx, req)
		cancel()
		if err != nil {
			failures++
			log.Warn("relay heartbeat failed", "err", err, "failures", failures)
			if failures >= 3 {
				endTunnel()
				return
			}
			continue
		}
		failures = 0
		log.Debug("relay heartbeat acknowledged", "buffered", resp.BufferedMessages)
		if resp.BufferedMessages > 0 {
			log.Info("relay holds buffered messages for this machine", "count", resp.BufferedMessages)
		}
	}
}
