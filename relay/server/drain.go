package server

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"

	"github.com/betcode-dev/betcode/relay/internal/grpcerr"
	"github.com/betcode-dev/betcode/relay/router"
	"github.com/betcode-dev/betcode/relay/tunnelsvc"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/tunnel"
)

// DefaultDrainGrace is how long a replica drains on SIGTERM before it ends
// what is left (--drain-grace). Kubernetes' terminationGracePeriodSeconds
// must be longer (by the preStop delay and a margin).
const DefaultDrainGrace = 25 * time.Second

// goAwayRate is how many agents per second the drain tells to reconnect:
// a replica's agents arrive at the others spread out (1,000 over 5 s) rather
// than all in one instant, which would overrun their TLS handshake limit
// (--max-pending-conns) and push the refused ones onto their backoff.
const goAwayRate = 200

// tunnelMoveWait bounds how long the drain waits for agents to end their
// tunnels themselves after being told to reconnect, before closing them.
const tunnelMoveWait = 2 * time.Second

// callsWait bounds how long the drain waits for unary calls before it
// tells the agents to move: a call stuck longer (its machine slow, the
// database unreachable) must not keep every machine of the replica
// unreachable for the whole grace. A call still running then may fail
// with its tunnel; its client retries (calls that change state carry
// idempotency keys).
const callsWait = 5 * time.Second

// clientsLinger is how long client connections may stay once the drain
// has done everything else (see run).
const clientsLinger = 2 * time.Second

// drain takes a replica out of service without losing a stream (docs/relay.md,
// "Draining and deploys"). Once it starts, in this order:
//
//  1. readiness goes NOT_SERVING, the listener closes (new connections go to
//     other replicas), and clients' HTTP/2 connections get a GOAWAY;
//  2. new calls, forwarded or served by the relay itself (MachineService,
//     AdminService...: drain_local.go; health keeps answering, NOT_SERVING),
//     are refused UNAVAILABLE / RELAY_DRAINING (a bufferable one is buffered
//     instead), forwarded streams end with that status (clients resume
//     elsewhere from their last sequence), unary calls and buffered
//     deliveries under way finish;
//  3. the agents are told to reconnect, goAwayRate a second (an ErrorFrame
//     RELAY_DRAINING on the tunnel, which an agent answers by reconnecting
//     at once, through the Service, to another replica), and their tunnels
//     close. Agents that hand over (tunnel.HandoverHeader) are told at
//     once, in step 2: they register elsewhere and keep serving this
//     replica's calls under way on their old tunnel, so their machines
//     are reachable again within a reconnection; older agents are told
//     once the unary calls are done, since they end their tunnel when
//     told;
//  4. the process exits.
//
// The grace (or a second signal) ends whatever is left.
type drain struct {
	log *slog.Logger
	m   drainMetrics

	draining   atomic.Bool
	calls      atomic.Int64  // admitted unary calls running
	idle       chan struct{} // a call ended while draining (capacity 1)
	live       atomic.Int64  // admitted streams running
	quiet      chan struct{} // a stream ended while draining (capacity 1)
	streams    context.Context
	cutStreams context.CancelFunc

	mu      sync.Mutex
	tunnels map[*drainStream]struct{}
	gone    chan struct{}  // a tunnel ended while draining (capacity 1)
	sends   sync.WaitGroup // goAway frames being sent
}

// drainMetrics count what the drain refuses and ends.
type drainMetrics struct {
	// refused counts calls refused while draining, by kind: unary,
	// stream, buffered (a bufferable call stored in the shared buffer
	// instead) and tunnel (an agent's Register or OpenTunnel).
	refused                                  *prometheus.CounterVec
	refusedUnary, refusedStream, refusedBufd prometheus.Counter
	refusedTunnel                            prometheus.Counter
	endedStreams                             prometheus.Counter
	draining                                 prometheus.Gauge
}

func newDrainMetrics(reg prometheus.Registerer) drainMetrics {
	m := drainMetrics{
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "betcode_relay_drain_refused_calls_total",
			Help: "Calls this replica refused because it was draining, forwarded or served by the relay itself, by kind: unary, stream, buffered (a QueueMessage stored in the shared buffer instead), tunnel (an agent's Register or OpenTunnel).",
		}, []string{"kind"}),
		endedStreams: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "betcode_relay_drain_ended_streams_total",
			Help: "Forwarded streams the drain ended with UNAVAILABLE / RELAY_DRAINING (their clients resume on another replica).",
		}),
		draining: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "betcode_relay_draining",
			Help: "1 once this replica has started draining (SIGTERM), else 0.",
		}),
	}
	// Every kind shows from the start, at 0.
	m.refusedUnary = m.refused.WithLabelValues("unary")
	m.refusedStream = m.refused.WithLabelValues("stream")
	m.refusedBufd = m.refused.WithLabelValues("buffered")
	m.refusedTunnel = m.refused.WithLabelValues("tunnel")
	if reg != nil {
		reg.MustRegister(m.refused, m.endedStreams, m.draining)
	}
	return m
}

// refuse counts a call of kind refused; deliveries of buffered messages are
// not calls and are not counted.
func (m drainMetrics) refuse(kind router.CallKind) {
	switch kind {
	case router.CallUnary:
		m.refusedUnary.Inc()
	case router.CallStream:
		m.refusedStream.Inc()
	case router.CallBufferable:
		m.refusedBufd.Inc()
	}
}

// newDrain returns a drain that registers its metrics with reg (none when
// nil).
func newDrain(log *slog.Logger, reg prometheus.Registerer) *drain {
	d := &drain{log: log, m: newDrainMetrics(reg), idle: make(chan struct{}, 1), quiet: make(chan struct{}, 1), gone: make(chan struct{}, 1), tunnels: map[*drainStream]struct{}{}}
	d.streams, d.cutStreams = context.WithCancel(context.Background())
	return d
}

var _ router.Gate = (*drain)(nil)

// Admit implements router.Gate.
func (d *drain) Admit(ctx context.Context, kind router.CallKind) (context.Context, func(), bool) {
	if kind == router.CallStream {
		if d.draining.Load() {
			d.m.refuse(kind)
			return nil, nil, false
		}
		d.live.Add(1)
		cctx, cancel := context.WithCancel(ctx)
		stop := context.AfterFunc(d.streams, func() {
			d.m.endedStreams.Inc()
			cancel()
		})
		var once sync.Once
		return cctx, func() {
			once.Do(func() {
				stop()
				cancel()
				if d.live.Add(-1) == 0 && d.draining.Load() {
					signal(d.quiet)
				}
			})
		}, true
	}
	// Counted before draining is read: a drain that starts after this
	// load sees the call and waits for it.
	d.calls.Add(1)
	if d.draining.Load() {
		d.callDone()
		d.m.refuse(kind)
		return nil, nil, false
	}
	return ctx, d.callDone, true
}

func (d *drain) callDone() {
	if d.calls.Add(-1) == 0 && d.draining.Load() {
		signal(d.idle)
	}
}

// signal wakes the drain without blocking.
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// Draining reports whether the drain has started.
func (d *drain) Draining() bool { return d.draining.Load() }

// drainSteps are the parts of the replica the drain stops, in its order.
type drainSteps struct {
	notReady      func()                    // readiness NOT_SERVING
	closeListener func()                    // no new connections
	closeClients  func(ctx context.Context) // GOAWAY to clients, wait for their calls (forcing them at ctx's end)
	closeTunnels  func()                    // close every tunnel left
	stopAgents    func(ctx context.Context) // agents' connections: graceful, forced at ctx's end
}

// run drains the replica; it returns when everything is stopped, at the
// latest shortly after ctx (the grace, or a second signal) ends.
func (d *drain) run(ctx context.Context, s drainSteps) {
	start := time.Now()
	d.draining.Store(true)
	d.m.draining.Set(1)
	s.notReady()
	s.closeListener()
	clientsDone := make(chan struct{})
	var clientsTook time.Duration
	clientsCtx, endClients := context.WithCancel(ctx)
	defer endClients()
	go func() {
		defer close(clientsDone)
		s.closeClients(clientsCtx)
		clientsTook = time.Since(start)
	}()
	d.cutStreams()
	n := d.goAway(ctx, handsOver)
	callsCtx, callsDone := context.WithTimeout(ctx, callsWait)
	d.waitCalls(callsCtx)
	callsDone()
	callsTook := time.Since(start)
	n += d.goAway(ctx, endsWhenTold)
	d.waitTunnels(ctx, tunnelMoveWait)
	// The streams it ended write their end (RELAY_DRAINING) before the
	// tunnels close under them, or their clients would read a broken
	// tunnel instead; one that cannot is reset after the router's 1 s.
	d.waitStreams(ctx, streamsWait)
	s.closeTunnels()
	d.sends.Wait()
	tunnelsTook := time.Since(start)
	s.stopAgents(ctx)
	agentsTook := time.Since(start)
	// Every unary call is done (or past callsWait), every stream was ended
	// and the agents are gone: client connections still open now hold
	// nothing that finishing would save (a stream whose end its client
	// does not take, a connection its client keeps after our GOAWAY).
	// They get clientsLinger more, then are closed; their clients resume
	// elsewhere by sequence.
	linger := time.NewTimer(clientsLinger)
	select {
	case <-clientsDone:
	case <-linger.C:
		endClients()
		<-clientsDone
	}
	linger.Stop()
	// When each part was done: a drain that takes its whole grace says
	// which part held it.
	took := []any{"agents_told_to_reconnect", n, "took", time.Since(start).Round(time.Millisecond),
		"unary_calls_done", callsTook.Round(time.Millisecond), "tunnels_done", tunnelsTook.Round(time.Millisecond),
		"agent_connections_done", agentsTook.Round(time.Millisecond), "client_connections_done", clientsTook.Round(time.Millisecond)}
	if ctx.Err() != nil {
		d.log.Warn("relay: drain cut short (grace over or a second signal); calls left were ended", took...)
	}
	d.log.Info("relay: drained", took...)
}

// streamsWait bounds how long the drain waits for the streams it ended to
// finish before it closes the tunnels (the router resets a stream that
// cannot write its end within 1 s).
const streamsWait = 2 * time.Second

// waitStreams waits until no admitted stream runs, at most max or until
// ctx ends.
func (d *drain) waitStreams(ctx context.Context, max time.Duration) {
	t := time.NewTimer(max)
	defer t.Stop()
	for d.live.Load() > 0 {
		select {
		case <-d.quiet:
		case <-t.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// waitCalls waits for the unary calls under way, until ctx ends.
func (d *drain) waitCalls(ctx context.Context) {
	for d.calls.Load() > 0 {
		select {
		case <-d.idle:
		case <-ctx.Done():
			return
		}
	}
}

// goAway tells every agent to reconnect elsewhere, goAwayRate a second
// (all at once when ctx ends); it returns how many were told.
func (d *drain) goAway(ctx context.Context, which func(*drainStream) bool) int {
	d.mu.Lock()
	all := make([]*drainStream, 0, len(d.tunnels))
	for t := range d.tunnels {
		if which(t) {
			all = append(all, t)
		}
	}
	d.mu.Unlock()
	const batch = goAwayRate / 10
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for i, t := range all {
		if i > 0 && i%batch == 0 && ctx.Err() == nil {
			select {
			case <-tick.C:
			case <-ctx.Done():
			}
		}
		// A Send can block on a stalled agent's window: closeTunnels
		// ends the stream, and with it the Send.
		d.sends.Go(t.goAway)
	}
	return len(all)
}

// handsOver and endsWhenTold split the tunnels by what their agent does
// when told to reconnect (see drain, step 3).
func handsOver(t *drainStream) bool    { return t.handover }
func endsWhenTold(t *drainStream) bool { return !t.handover }

// waitTunnels waits until every tunnel whose agent ends it when told has
// ended, at most max or until ctx ends. Tunnels handed over stay until
// closeTunnels: their agents wait for the replica to end them.
func (d *drain) waitTunnels(ctx context.Context, max time.Duration) {
	t := time.NewTimer(max)
	defer t.Stop()
	for {
		d.mu.Lock()
		n := 0
		for ds := range d.tunnels {
			if endsWhenTold(ds) {
				n++
			}
		}
		d.mu.Unlock()
		if n == 0 {
			return
		}
		select {
		case <-d.gone:
		case <-t.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// addTunnel records an open tunnel; false while draining.
func (d *drain) addTunnel(t *drainStream) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.draining.Load() {
		return false
	}
	d.tunnels[t] = struct{}{}
	return true
}

func (d *drain) removeTunnel(t *drainStream) {
	d.mu.Lock()
	delete(d.tunnels, t)
	d.mu.Unlock()
	if d.draining.Load() {
		signal(d.gone)
	}
}

// drainingErr is the status of what a draining replica refuses or ends.
func drainingErr() error {
	return grpcerr.Status(codes.Unavailable, router.CodeRelayDraining, "this relay replica is shutting down; reconnect at once (another replica takes over)", nil).Err()
}

// drainTunnels is TunnelService as a draining replica serves it: it refuses
// new registrations and tunnels, and tells the agents of open tunnels to
// reconnect when the drain reaches them.
type drainTunnels struct {
	pb.TunnelServiceServer
	d *drain
}

// Register refuses while draining.
func (s drainTunnels) Register(ctx context.Context, req *pb.RegisterRequest) (*pb.RegisterResponse, error) {
	if s.d.draining.Load() {
		s.d.m.refusedTunnel.Inc()
		return nil, drainingErr()
	}
	return s.TunnelServiceServer.Register(ctx, req)
}

// OpenTunnel refuses while draining; a tunnel the drain ended ends with
// UNAVAILABLE / RELAY_DRAINING.
func (s drainTunnels) OpenTunnel(stream pb.TunnelService_OpenTunnelServer) error {
	t := &drainStream{TunnelService_OpenTunnelServer: stream, d: s.d}
	if stream != nil {
		md, _ := metadata.FromIncomingContext(stream.Context())
		t.handover = slices.Contains(md.Get(tunnel.HandoverHeader), "1")
	}
	if !s.d.addTunnel(t) {
		s.d.m.refusedTunnel.Inc()
		return drainingErr()
	}
	err := s.TunnelServiceServer.OpenTunnel(t)
	if t.detached {
		return nil // the tunnel's end calls t.done
	}
	return t.done(err)
}

// done is the end of t's call: the drain no longer counts it, and a tunnel
// the drain told away ends with UNAVAILABLE / RELAY_DRAINING.
func (t *drainStream) done(err error) error {
	t.d.removeTunnel(t)
	if err == nil && t.toldAway.Load() {
		return drainingErr()
	}
	return err
}

// Detach passes the inner stream's (tunnelsvc.Detacher): the call's end
// then runs done first.
func (t *drainStream) Detach() (func(error), bool) {
	d, ok := t.TunnelService_OpenTunnelServer.(tunnelsvc.Detacher)
	if !ok {
		return nil, false
	}
	end, ok := d.Detach()
	if !ok {
		return nil, false
	}
	t.detached = true
	return func(err error) { end(t.done(err)) }, true
}

// drainStream is an OpenTunnel stream the drain can send a frame on
// besides the tunnel's own sender: Send is serialized.
type drainStream struct {
	pb.TunnelService_OpenTunnelServer
	d        *drain
	handover bool // its agent hands over (tunnel.HandoverHeader)
	detached bool // Detach succeeded: the call outlives OpenTunnel
	mu       sync.Mutex
	toldAway atomic.Bool
}

// Send sends one frame.
func (t *drainStream) Send(f *pb.TunnelFrame) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.TunnelService_OpenTunnelServer.Send(f)
}

// goAway sends the agent the tunnel-level ErrorFrame RELAY_DRAINING: it
// ends the tunnel at the agent (an older agent reconnects with its
// backoff; a current one at once).
func (t *drainStream) goAway() {
	t.toldAway.Store(true)
	_ = t.Send(&pb.TunnelFrame{Payload: &pb.TunnelFrame_Error{Error: &pb.ErrorFrame{
		Code: router.CodeRelayDraining, Message: "relay replica draining: reconnect now",
	}}})
}
