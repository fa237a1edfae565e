package server

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"log/slog"
	"math/big"
	"net"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/betcode-dev/betcode/relay/limits"
)

// gateTLS returns a server config with a self-signed certificate for
// 127.0.0.1 and a client config that trusts it.
func gateTLS(t *testing.T) (server, client *tls.Config) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "relay"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(leaf)
	server = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}}}
	return server, &tls.Config{RootCAs: roots, ServerName: "127.0.0.1"}
}

// logRecorder is a slog.Handler that keeps records.
type logRecorder struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (l *logRecorder) Enabled(context.Context, slog.Level) bool { return true }

func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	l.recs = append(l.recs, r.Clone())
	l.mu.Unlock()
	return nil
}

func (l *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logRecorder) WithGroup(string) slog.Handler      { return l }

// count returns how many records of level have message msg.
func (l *logRecorder) count(level slog.Level, msg string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, r := range l.recs {
		if r.Level == level && r.Message == msg {
			n++
		}
	}
	return n
}

// gateHarness runs a splitter on loopback; handed-off client connections
// arrive on clients.
type gateHarness struct {
	s       *splitter
	addr    string
	logs    *logRecorder
	clients chan net.Conn
	client  *tls.Config
	stop    func() // closes the listener and waits for every goroutine
}

// startGate serves on ln (a new loopback listener if nil); tweak, if set,
// adjusts the server's TLS config.
func startGate(t *testing.T, ln net.Listener, opt splitOptions, tweak func(*tls.Config)) *gateHarness {
	t.Helper()
	serverCfg, clientCfg := gateTLS(t)
	if tweak != nil {
		tweak(serverCfg)
	}
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
	}
	h := &gateHarness{logs: &logRecorder{}, clients: make(chan net.Conn, 16), client: clientCfg, addr: ln.Addr().String()}
	h.s = newSplitter(ln, serverCfg, slog.New(h.logs), opt)
	var wg sync.WaitGroup
	wg.Go(h.s.run)
	wg.Go(func() {
		for {
			c, err := h.s.clients.Accept()
			if err != nil {
				return
			}
			select {
			case h.clients <- c:
			default:
				c.Close()
			}
		}
	})
	var once sync.Once
	h.stop = func() {
		once.Do(func() {
			ln.Close()
			wg.Wait()
			close(h.clients)
			for c := range h.clients {
				c.Close()
			}
		})
	}
	t.Cleanup(h.stop)
	return h
}

// dialTLS tries a TLS handshake with the relay until one succeeds or ctx
// ends, pacing the attempts (a refused one fails at once).
func (h *gateHarness) dialTLS(ctx context.Context) (*tls.Conn, int, error) {
	pace := time.NewTicker(10 * time.Millisecond)
	defer pace.Stop()
	d := tls.Dialer{Config: h.client}
	for attempts := 1; ; attempts++ {
		c, err := d.DialContext(ctx, "tcp", h.addr)
		if err == nil {
			return c.(*tls.Conn), attempts, nil
		}
		select {
		case <-ctx.Done():
			return nil, attempts, err
		case <-pace.C:
		}
	}
}

const (
	gateWarning  = "relay: refusing connections: too many TLS handshakes in progress"
	evictWarning = "relay: too many TLS handshakes in progress: closing the oldest for new connections"
)

// A flood of connections that never send a ClientHello holds at most
// MaxPending handshake slots, each until HandshakeTimeout or until newer
// connections take its slot (once it is minSlotAge old). A real client
// racing the flood gets through, and so does one that comes once the flood
// has filled every slot, taking the oldest flood connection's slot.
func TestSplitterGateUnderFlood(t *testing.T) {
	const maxPending, flood = 32, 1000
	const timeout = time.Second
	h := startGate(t, nil, splitOptions{MaxPending: maxPending, HandshakeTimeout: timeout}, nil)
	ctx, cancel := context.WithTimeout(t.Context(), timeout+20*time.Second)
	defer cancel()
	start := time.Now()

	type result struct {
		c        *tls.Conn
		attempts int
		err      error
	}
	client := func() <-chan result {
		done := make(chan result, 1)
		go func() {
			c, n, err := h.dialTLS(ctx)
			done <- result{c, n, err}
		}()
		return done
	}
	// gotThrough waits for a client and for its connection to reach the
	// HTTP server.
	gotThrough := func(name string, done <-chan result) result {
		t.Helper()
		res := <-done
		if res.err != nil {
			t.Fatalf("the %s client did not get through: %v", name, res.err)
		}
		t.Cleanup(func() { res.c.Close() })
		select {
		case c := <-h.clients:
			c.Close()
		case <-ctx.Done():
			t.Fatalf("the %s client's connection was not handed to the HTTP server", name)
		}
		t.Logf("the %s client got through after %v, attempt %d", name, time.Since(start).Round(time.Millisecond), res.attempts)
		return res
	}

	racing := client()
	conns := make([]net.Conn, 0, flood)
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	for i := range flood {
		c, err := net.Dial("tcp", h.addr)
		if err != nil {
			t.Fatalf("flood connection %d: %v", i, err)
		}
		conns = append(conns, c)
	}
	gotThrough("racing", racing)

	// The splitter accepts in order: once the last flood connection is
	// closed, every earlier one has been admitted or refused.
	last := conns[flood-1]
	last.SetReadDeadline(time.Now().Add(timeout + 20*time.Second))
	if _, err := last.Read(make([]byte, 1)); err == nil {
		t.Fatal("the last flood connection got data")
	}
	gotThrough("late", client())

	// Every flood connection is closed by the relay: at once beyond the
	// gate, after the handshake timeout within it.
	deadline := time.Now().Add(timeout + 20*time.Second)
	for i, c := range conns {
		c.SetReadDeadline(deadline)
		_, err := c.Read(make([]byte, 1))
		var ne net.Error
		if err == nil || errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("flood connection %d still open after %v: %v", i, time.Since(start), err)
		}
	}
	elapsed := time.Since(start)

	if peak := h.s.peak.Load(); peak > maxPending {
		t.Fatalf("%d connections were in their handshake at once, the cap is %d", peak, maxPending)
	} else if peak < maxPending {
		t.Fatalf("at most %d connections were in their handshake: the flood did not fill the gate (%d)", peak, maxPending)
	}
	shed := h.s.refused.Load() + h.s.evicted.Load()
	if shed < flood-maxPending {
		t.Fatalf("%d connections refused or evicted at the gate, want at least %d", shed, flood-maxPending)
	}
	h.stop()
	if n := h.s.pending.Load(); n != 0 {
		t.Fatalf("%d connections pending after the splitter stopped", n)
	}
	warns := h.logs.count(slog.LevelWarn, gateWarning) + h.logs.count(slog.LevelWarn, evictWarning)
	if max := 1 + int(elapsed/warnPeriod); warns < 1 || warns > max {
		t.Fatalf("%d gate warnings in %v, want 1 to %d", warns, elapsed, max)
	}
	if n := h.logs.count(slog.LevelDebug, "relay: refused a connection: too many handshakes in progress"); int64(n) != shed {
		t.Fatalf("%d debug lines for %d refused or evicted connections", n, shed)
	}
}

// A half-open connection is closed once HandshakeTimeout has passed, not
// before.
func TestSplitterHandshakeTimeout(t *testing.T) {
	const timeout = 300 * time.Millisecond
	h := startGate(t, nil, splitOptions{HandshakeTimeout: timeout}, nil)
	start := time.Now()
	c, err := net.Dial("tcp", h.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadDeadline(start.Add(timeout + 10*time.Second))
	_, err = c.Read(make([]byte, 1))
	var ne net.Error
	if err == nil || errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the half-open connection was not closed: %v", err)
	}
	if took := time.Since(start); took < timeout {
		t.Fatalf("closed after %v, before the handshake timeout %v", took, timeout)
	}
	h.stop()
	if n := h.logs.count(slog.LevelWarn, "relay: refused a connection"); n != 1 {
		t.Fatalf("%d warnings for the timed-out handshake, want 1", n)
	}
}

// Shutting down ends handshakes under way at once rather than waiting out
// their timeout.
func TestSplitterStopEndsHandshakes(t *testing.T) {
	inHandshake := make(chan struct{})
	h := startGate(t, nil, splitOptions{HandshakeTimeout: time.Hour}, func(cfg *tls.Config) {
		// Hold the handshake until its context ends.
		cfg.GetConfigForClient = func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
			close(inHandshake)
			<-hello.Context().Done()
			return nil, hello.Context().Err()
		}
	})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	clientDone := make(chan error, 1)
	go func() {
		c, err := (&tls.Dialer{Config: h.client}).DialContext(ctx, "tcp", h.addr)
		if err == nil {
			c.Close()
		}
		clientDone <- err
	}()
	select {
	case <-inHandshake:
	case <-ctx.Done():
		t.Fatal("the handshake did not start")
	}
	stopped := make(chan struct{})
	go func() {
		h.stop()
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-ctx.Done():
		t.Fatal("the splitter did not stop while a handshake was under way")
	}
	if err := <-clientDone; err == nil {
		t.Fatal("the handshake ended by the shutdown succeeded")
	}
}

// errListener fails its first Accepts with err, then accepts from the
// listener it wraps.
type errListener struct {
	net.Listener
	mu   sync.Mutex
	errs []error
}

func (l *errListener) Accept() (net.Conn, error) {
	l.mu.Lock()
	if len(l.errs) > 0 {
		err := l.errs[0]
		l.errs = l.errs[1:]
		l.mu.Unlock()
		return nil, err
	}
	l.mu.Unlock()
	return l.Listener.Accept()
}

// Running out of file descriptors (which a flood can cause) does not stop
// the relay from accepting.
func TestSplitterRetriesAcceptErrors(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	emfile := &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	h := startGate(t, &errListener{Listener: inner, errs: []error{emfile, emfile, emfile}}, splitOptions{}, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	c, _, err := h.dialTLS(ctx)
	if err != nil {
		t.Fatalf("no connection after accept errors: %v", err)
	}
	c.Close()
	select {
	case sc := <-h.clients:
		sc.Close()
	case <-ctx.Done():
		t.Fatal("the connection was not handed to the HTTP server")
	}
	h.stop()
	if n := h.logs.count(slog.LevelWarn, "relay: accepting connections failed; retrying"); n != 1 {
		t.Fatalf("%d warnings for three accept errors, want 1", n)
	}
}

func TestRetryAccept(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"closed", &net.OpError{Op: "accept", Err: net.ErrClosed}, false},
		{"out of file descriptors", &net.OpError{Op: "accept", Err: os.NewSyscallError("accept4", syscall.EMFILE)}, true},
		{"system out of file descriptors", os.NewSyscallError("accept4", syscall.ENFILE), true},
		{"aborted", syscall.ECONNABORTED, true},
		{"timeout", os.ErrDeadlineExceeded, true},
		{"other", errors.New("listener broke"), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := retryAccept(tc.err); got != tc.want {
				t.Fatalf("retryAccept(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}

func TestWarnEvery(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	steps := []struct {
		at       time.Duration
		want     bool
		wantHeld int
	}{
		{0, true, 0},
		{time.Second, false, 0},
		{9 * time.Second, false, 0},
		{10 * time.Second, true, 2},
		{15 * time.Second, false, 0},
		{time.Minute, true, 1},
	}
	var w warnEvery
	for i, s := range steps {
		ok, held := w.allow(t0.Add(s.at))
		if ok != s.want || held != s.wantHeld {
			t.Fatalf("step %d (at %v): allow = %v, %d; want %v, %d", i, s.at, ok, held, s.want, s.wantHeld)
		}
	}
}

func TestSplitOptionsDefaults(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	s := newSplitter(ln, &tls.Config{}, slog.New(&logRecorder{}), splitOptions{})
	want := splitOptions{MaxPending: limits.DefaultMaxPendingConns, HandshakeTimeout: limits.DefaultHandshakeTimeout}
	if s.opt != want {
		t.Fatalf("options %+v, want %+v", s.opt, want)
	}
}
