package server

import (
	"container/list"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/credentials"

	"github.com/betcode-dev/betcode/relay/limits"
	"github.com/betcode-dev/betcode/relay/registry"
	"github.com/betcode-dev/betcode/shared/mtls"
	"github.com/betcode-dev/betcode/shared/tunnel"
)

// splitter accepts TLS connections on the relay's one port and, after the
// handshake, hands a connection with a verified machine certificate (an
// agent) to the tunnel's native gRPC server and every other one (clients,
// and other replicas with a relay certificate) to the HTTP/2 server that
// routes calls. Serving tunnels on grpc-go's own
// transport, rather than through net/http, takes several goroutine hand-offs
// out of every forwarded call.
//
// At most opt.MaxPending connections are in their handshake at once. When
// all slots are taken, a new connection takes the slot of the one that has
// been waiting longest, if that one has had a fair chance (minSlotAge: a
// quarter of the handshake timeout, at most a second), and is refused
// otherwise. So a flood of half-open connections (which never finish)
// cycles through the slots instead of holding them for the whole timeout,
// and a legitimate client, whose handshake takes milliseconds, gets a slot
// within minSlotAge and finishes. Evicted connections end at once, so the
// goroutines and TLS states stay bounded.
type splitter struct {
	ln       net.Listener
	cfg      *tls.Config
	log      *slog.Logger
	opt      splitOptions
	now      func() time.Time
	machines *chanListener
	clients  *chanListener
	// grpcClients, if set, takes the client connections that offered only
	// h2 in their TLS handshake (gRPC clients: browsers and other HTTP
	// clients offer http/1.1 too), for the relay's own HTTP/2 front
	// (--front=engine, relay/internal/h2front).
	grpcClients *chanListener
	offers      sync.Map // net.Conn -> bool: it offered only h2
	// plainMachines hands machines' connections on as they are, not
	// wrapped for grpc-go's transport (newReadyConn): the relay's own
	// HTTP/2 server serves them (--front=engine).
	plainMachines bool
	// tunnels, if set, takes agents' direct connections (tunnel.ALPNDirect).
	tunnels *registry.Registry
	// directs, if set, counts direct connections by outcome (accepted,
	// refused).
	directs *prometheus.CounterVec
	wg      sync.WaitGroup

	pending atomic.Int64 // handshake goroutines running (slots plus evicted ones ending)
	peak    atomic.Int64 // the most slots taken at once
	refused atomic.Int64 // connections closed at the gate, in all
	evicted atomic.Int64 // connections whose slot a newer one took, in all

	mu    sync.Mutex
	slots list.List // of *slot, oldest first

	gateWarn, failWarn, acceptWarn warnEvery
}

// splitOptions bounds the splitter. Zero fields take the limits package's
// defaults.
type splitOptions struct {
	// MaxPending bounds the connections in their TLS handshake at once
	// (limits.Config.MaxPendingConns).
	MaxPending int
	// HandshakeTimeout bounds one TLS handshake
	// (limits.Config.HandshakeTimeout).
	HandshakeTimeout time.Duration
}

// warnPeriod is the least time between two warnings of one kind: a flood
// must not turn into a flood of log lines.
const warnPeriod = 10 * time.Second

func newSplitter(ln net.Listener, cfg *tls.Config, log *slog.Logger, opt splitOptions) *splitter {
	if opt.MaxPending <= 0 {
		opt.MaxPending = limits.DefaultMaxPendingConns
	}
	if opt.HandshakeTimeout <= 0 {
		opt.HandshakeTimeout = limits.DefaultHandshakeTimeout
	}
	return &splitter{
		ln: ln, cfg: cfg, log: log, opt: opt, now: time.Now,
		machines: newChanListener(ln.Addr()), clients: newChanListener(ln.Addr()),
	}
}

// withGRPCClients gives the connections that offered only h2 a listener
// of their own (grpcClients). Call it before run.
func (s *splitter) withGRPCClients() *chanListener {
	s.grpcClients = newChanListener(s.ln.Addr())
	cfg := s.cfg.Clone()
	next := cfg.GetConfigForClient
	cfg.GetConfigForClient = func(hi *tls.ClientHelloInfo) (*tls.Config, error) {
		s.offers.Store(hi.Conn, len(hi.SupportedProtos) == 1 && hi.SupportedProtos[0] == "h2")
		if next != nil {
			return next(hi)
		}
		return nil, nil
	}
	s.cfg = cfg
	return s.grpcClients
}

// grpcOnly reports (and forgets) whether c offered only h2.
func (s *splitter) grpcOnly(c net.Conn) bool {
	v, ok := s.offers.LoadAndDelete(c)
	return ok && v.(bool)
}

// run accepts until the listener is closed, then ends the handshakes under
// way and waits for them.
func (s *splitter) run() {
	ctx, cancel := context.WithCancel(context.Background())
	defer s.wg.Wait()
	defer cancel()
	var delay time.Duration
	for {
		c, err := s.ln.Accept()
		if err != nil {
			if !retryAccept(err) {
				s.machines.Close()
				s.clients.Close()
				if s.grpcClients != nil {
					s.grpcClients.Close()
				}
				return
			}
			// Out of file descriptors, say, under a flood: wait for some
			// to close rather than stop serving (as net/http does).
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			if ok, n := s.acceptWarn.allow(s.now()); ok {
				s.log.Warn("relay: accepting connections failed; retrying", "err", err, "retry_in", delay, "failures_since_last_warning", n)
			}
			time.Sleep(delay)
			continue
		}
		delay = 0
		// Only this goroutine adds to pending, so the check and the add
		// cannot race past the bound.
		if s.pending.Load() >= 2*int64(s.opt.MaxPending) {
			s.refuse(c)
			continue
		}
		sl := s.take(ctx)
		if sl == nil {
			s.refuse(c)
			continue
		}
		s.pending.Add(1)
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.handshake(sl, c)
		}()
	}
}

// slot is one connection's place in the handshake queue.
type slot struct {
	ctx     context.Context
	cancel  context.CancelCauseFunc
	elem    *list.Element // nil once released or evicted
	evicted bool
	started time.Time
}

var errEvicted = errors.New("evicted: its handshake slot was taken by a newer connection (too many handshakes in progress)")

// minSlotAge is how long a handshake keeps its slot against newer
// connections.
func (s *splitter) minSlotAge() time.Duration { return min(time.Second, s.opt.HandshakeTimeout/4) }

// take gives a new connection a slot, evicting the oldest if all are taken
// and it is old enough; nil means none could be had.
func (s *splitter) take(parent context.Context) *slot {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.slots.Len() >= s.opt.MaxPending {
		oldest := s.slots.Front().Value.(*slot)
		if now.Sub(oldest.started) < s.minSlotAge() {
			return nil
		}
		old := s.slots.Remove(s.slots.Front()).(*slot)
		old.elem, old.evicted = nil, true
		old.cancel(errEvicted)
		s.evicted.Add(1)
		if ok, n := s.gateWarn.allow(s.now()); ok {
			s.log.Warn("relay: too many TLS handshakes in progress: closing the oldest for new connections",
				"evicted", n+1, "max_pending", s.opt.MaxPending, "per", warnPeriod)
		}
	}
	ctx, cancel := context.WithTimeoutCause(parent, s.opt.HandshakeTimeout, context.DeadlineExceeded)
	cctx, ccancel := context.WithCancelCause(ctx)
	sl := &slot{ctx: cctx, cancel: func(err error) { ccancel(err); cancel() }, started: now}
	sl.elem = s.slots.PushBack(sl)
	s.notePeak(int64(s.slots.Len()))
	return sl
}

// release frees sl's slot (if it still holds one).
func (s *splitter) release(sl *slot) {
	s.mu.Lock()
	if sl.elem != nil {
		s.slots.Remove(sl.elem)
		sl.elem = nil
	}
	s.mu.Unlock()
	sl.cancel(nil)
}

// retryAccept reports whether Accept failed for a reason that passes:
// file descriptors or buffers run out, or a connection was dropped before
// it was accepted.
func retryAccept(err error) bool {
	if errors.Is(err, net.ErrClosed) {
		return false
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	for _, e := range []error{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM, syscall.ECONNABORTED, syscall.ECONNRESET} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// refuse closes a connection beyond the gate.
func (s *splitter) refuse(c net.Conn) {
	s.refused.Add(1)
	remote := c.RemoteAddr().String()
	c.Close()
	s.log.Debug("relay: refused a connection: too many handshakes in progress", "remote", remote, "max_pending", s.opt.MaxPending)
	if ok, n := s.gateWarn.allow(s.now()); ok {
		s.log.Warn("relay: refusing connections: too many TLS handshakes in progress",
			"refused", n+1, "max_pending", s.opt.MaxPending, "per", warnPeriod)
	}
}

func (s *splitter) notePeak(n int64) {
	for {
		p := s.peak.Load()
		if n <= p || s.peak.CompareAndSwap(p, n) {
			return
		}
	}
}

func (s *splitter) handshake(sl *slot, c net.Conn) {
	tc := tls.Server(c, s.cfg)
	err := tc.HandshakeContext(sl.ctx)
	cause := context.Cause(sl.ctx)
	s.release(sl)
	s.pending.Add(-1)
	grpcOnly := s.grpcOnly(c)
	if err != nil {
		reason := mtls.DescribeHandshakeError(err)
		switch {
		case errors.Is(cause, errEvicted):
			c.Close()
			s.log.Debug("relay: refused a connection: too many handshakes in progress", "remote", c.RemoteAddr().String(), "max_pending", s.opt.MaxPending)
			return
		case errors.Is(err, context.DeadlineExceeded) || errors.Is(cause, context.DeadlineExceeded):
			reason = "handshake timed out"
		}
		remote := c.RemoteAddr().String()
		c.Close()
		// One warning per period; a flood of failing handshakes is
		// counted in the next one.
		if ok, n := s.failWarn.allow(s.now()); ok {
			s.log.Warn("relay: refused a connection", "remote", remote, "reason", reason, "similar_since_last_warning", n)
		} else {
			s.log.Debug("relay: refused a connection", "remote", remote, "reason", reason)
		}
		return
	}
	// A verified certificate is a machine's unless it is another replica's:
	// a replica forwarding clients' calls goes to the router (which trusts
	// its forwarding headers, see auth.Middleware), like any client.
	state := tc.ConnectionState()
	if state.NegotiatedProtocol == tunnel.ALPNDirect {
		s.direct(tc, &state)
		return
	}
	if _, relay := mtls.PeerRelay(&state); !relay && len(state.VerifiedChains) > 0 {
		if s.plainMachines {
			s.machines.push(tc)
		} else {
			s.machines.push(newReadyConn(tc))
		}
		return
	}
	if grpcOnly && s.grpcClients != nil && state.NegotiatedProtocol == "h2" {
		s.grpcClients.push(tc)
		return
	}
	s.clients.push(tc)
}

// direct hands an agent's direct connection to its tunnel: the connection
// must carry the machine certificate of a tunnel this replica holds, and
// then that tunnel's outstanding offer token (tunnel.AttachDirect).
// Anything else is closed: a client offering the protocol, another
// replica's agent (its connection landed here), a wrong or reused token.
func (s *splitter) direct(tc *tls.Conn, state *tls.ConnectionState) {
	remote := tc.RemoteAddr().String()
	refuse := func(reason string) {
		tc.Close()
		s.countDirect("refused")
		s.log.Debug("relay: refused a direct connection", "remote", remote, "reason", reason)
	}
	id, err := mtls.MachineID(*state)
	if _, relay := mtls.PeerRelay(state); relay || err != nil || s.tunnels == nil {
		refuse("not a machine certificate")
		return
	}
	t := s.tunnels.Get(id)
	if t == nil {
		refuse("machine " + id + " has no tunnel on this replica")
		return
	}
	token := make([]byte, tunnel.DirectTokenLen)
	tc.SetReadDeadline(time.Now().Add(min(s.opt.HandshakeTimeout, tunnel.DirectAcceptTimeout)))
	if _, err := io.ReadFull(tc, token); err != nil {
		refuse("no token: " + err.Error())
		return
	}
	tc.SetReadDeadline(time.Time{})
	ctx, cancel := context.WithTimeout(context.Background(), tunnel.DirectAcceptTimeout)
	defer cancel()
	if err := t.Client.AttachDirect(ctx, tc, token); err != nil {
		refuse(err.Error())
		return
	}
	s.countDirect("accepted")
	s.log.Info("relay: calls now go over the machine's direct connection", "machine_id", id, "remote", remote)
}

func (s *splitter) countDirect(outcome string) {
	if s.directs != nil {
		s.directs.WithLabelValues(outcome).Inc()
	}
}

// warnEvery lets one warning through per warnPeriod and counts the ones
// held back.
type warnEvery struct {
	mu         sync.Mutex
	last       time.Time
	suppressed int
}

// allow reports whether to warn at now and, if so, how many warnings were
// held back since the last one.
func (w *warnEvery) allow(now time.Time) (bool, int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.last.IsZero() && now.Sub(w.last) < warnPeriod {
		w.suppressed++
		return false, 0
	}
	n := w.suppressed
	w.last, w.suppressed = now, 0
	return true, n
}

// chanListener is a net.Listener fed by the splitter.
type chanListener struct {
	addr net.Addr
	ch   chan net.Conn
	done chan struct{}
	once sync.Once
}

func newChanListener(addr net.Addr) *chanListener {
	return &chanListener{addr: addr, ch: make(chan net.Conn), done: make(chan struct{})}
}

func (l *chanListener) push(c net.Conn) {
	select {
	case l.ch <- c:
	case <-l.done:
		c.Close()
	}
}

func (l *chanListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *chanListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *chanListener) Addr() net.Addr { return l.addr }

// handshaken is gRPC transport credentials for connections whose TLS
// handshake is already done: it reports their TLS state so that the machine
// id can be read from the peer's certificate.
type handshaken struct{}

func (handshaken) ServerHandshake(c net.Conn) (net.Conn, credentials.AuthInfo, error) {
	tc, ok := c.(interface{ ConnectionState() tls.ConnectionState }) // *tls.Conn or *readyConn
	if !ok {
		return nil, nil, errors.New("relay: not a TLS connection")
	}
	return c, credentials.TLSInfo{State: tc.ConnectionState(), CommonAuthInfo: credentials.CommonAuthInfo{SecurityLevel: credentials.PrivacyAndIntegrity}}, nil
}

func (handshaken) ClientHandshake(context.Context, string, net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return nil, nil, errors.New("relay: server-side credentials only")
}

func (handshaken) Info() credentials.ProtocolInfo {
	return credentials.ProtocolInfo{SecurityProtocol: "tls"}
}

func (h handshaken) Clone() credentials.TransportCredentials { return h }

func (handshaken) OverrideServerName(string) error { return nil }
