// Package h2front is a lean HTTP/2 server for TLS connections that
// negotiated ALPN "h2" (gRPC clients).
//
// It is built on golang.org/x/net/http2's Framer and hpack with one reader
// goroutine per connection and one goroutine per stream only to run the
// http.Handler. Frames are written by the goroutine that produces them,
// under a per-connection mutex, into one buffered writer, so that a unary
// answer whose handler writes headers, data and trailers without flushing
// leaves in a single write to the connection. Handlers see a
// net/http-compatible *http.Request and http.ResponseWriter (with
// http.Flusher and FlushError), so existing handler chains such as
// (*grpc.Server).ServeHTTP run unchanged.
package h2front

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"
)

// Server serves HTTP/2 on connections already TLS-handshaken with ALPN "h2".
type Server struct {
	// Handler answers every request.
	Handler http.Handler
	// ConnContext, if set, derives each connection's base context (as
	// http.Server.ConnContext); the conn passed is the one given to ServeConn.
	ConnContext func(ctx context.Context, c net.Conn) context.Context
	// MaxConcurrentStreams is advertised and enforced; 0 = 1000.
	MaxConcurrentStreams uint32
	// MaxHeaderListSize bounds a decoded request header block; 0 = 1 MiB.
	// A larger block is answered with HTTP 431 on its stream.
	MaxHeaderListSize uint32
	// MaxReadFrameSize is the advertised SETTINGS_MAX_FRAME_SIZE; 0 = 1 MiB.
	// A larger frame ends the connection with GOAWAY FRAME_SIZE_ERROR.
	MaxReadFrameSize uint32
	// StreamWindow is the receive window of each stream; 0 = 1 MiB.
	StreamWindow uint32
	// ConnWindow is the receive window of the connection; 0 = 1 MiB.
	ConnWindow uint32
	// WriteTimeout closes the connection when one write to it blocks this
	// long; 0 = 10s.
	WriteTimeout time.Duration
	// SettingsTimeout closes a client that has not sent its preface or
	// acknowledged our SETTINGS within it; 0 = 10s.
	SettingsTimeout time.Duration
	// NoDynamicTables turns the HPACK dynamic tables off both ways: the
	// server never indexes its response headers, and asks the peer not to
	// index its requests (SETTINGS_HEADER_TABLE_SIZE 0). For connections
	// that make few calls and then idle for hours (agents' tunnels), each
	// of which would otherwise keep both tables' entries (~0.9 KiB) for
	// nothing.
	NoDynamicTables bool
	// KeepaliveTime, if set, sends a PING on a connection from which
	// nothing has arrived for it, and KeepaliveTimeout (0 = 20s) later
	// closes the connection if still nothing has: a peer gone without a FIN
	// is noticed. Peers' own PINGs are welcome at any interval (up to
	// the flood bound).
	KeepaliveTime    time.Duration
	KeepaliveTimeout time.Duration
	// Log receives diagnostics; nil discards them. Header values are never
	// logged.
	Log *slog.Logger

	mu        sync.Mutex
	listeners map[net.Listener]struct{}
	conns     map[*conn]struct{}
	changed   chan struct{} // closed and replaced whenever a conn ends
	draining  bool          // Shutdown called
	closed    bool          // Close called
	onGoAway  func()        // test hook: a graceful GOAWAY was flushed
	onPending func(n int)   // test hook: a new stream awaits its handler, n in all
}

var discardLog = slog.New(slog.DiscardHandler)

func (s *Server) logger() *slog.Logger {
	if s.Log != nil {
		return s.Log
	}
	return discardLog
}

// ServeConn serves one connection and blocks until it ends. The connection
// must already have completed its TLS handshake (a *tls.Conn that has not
// is handshaken first); the client preface is read and checked before
// anything else.
func (s *Server) ServeConn(c net.Conn) {
	lim := s.limits()
	if tc, ok := c.(*tls.Conn); ok && !tc.ConnectionState().HandshakeComplete {
		ctx, cancel := context.WithTimeout(context.Background(), lim.settingsTimeout)
		err := tc.HandshakeContext(ctx)
		cancel()
		if err != nil {
			_ = c.Close()
			return
		}
	}
	cn := newConn(s, c, lim)
	if !s.track(cn) {
		_ = c.Close()
		return
	}
	cn.serve()
	s.untrack(cn)
	// Untracked, the connection gets no new startGoAway; one already
	// started ends promptly now that the connection is closed.
	cn.goAwayWG.Wait()
}

// Serve accepts connections on l and serves each in its own goroutine. It
// returns http.ErrServerClosed after Shutdown or Close, or the accept error.
// A tls.Listener's connections are handshaken in their goroutine.
func (s *Server) Serve(l net.Listener) error {
	s.mu.Lock()
	if s.draining || s.closed {
		s.mu.Unlock()
		_ = l.Close()
		return http.ErrServerClosed
	}
	if s.listeners == nil {
		s.listeners = make(map[net.Listener]struct{})
	}
	s.listeners[l] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.listeners, l)
		s.mu.Unlock()
	}()

	var backoff time.Duration
	for {
		c, err := l.Accept()
		if err != nil {
			if s.stopping() {
				return http.ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				s.logger().Warn("h2front: accept error; retrying", "err", err, "delay", backoff)
				time.Sleep(backoff)
				continue
			}
			return err
		}
		backoff = 0
		go s.ServeConn(c)
	}
}

// Shutdown stops accepting (closing the listeners given to Serve), sends
// every connection GOAWAY(NO_ERROR) naming the last stream processed, lets
// running streams finish and closes each connection once it has no open
// stream (after reading what the client still sends until it closes, for
// at most a second, so that the last answers are not lost to a reset).
// It returns when all connections are closed, or ctx.Err() as soon
// as ctx ends (the caller then calls Close). The GOAWAYs are sent from
// goroutines of their connections: one may wait up to WriteTimeout for a
// write blocked on a client that does not read, which must not hold up
// Shutdown past ctx.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.draining = true
	_ = s.closeListenersLocked()
	for c := range s.conns {
		c.startGoAway()
	}
	s.mu.Unlock()
	for {
		s.mu.Lock()
		if len(s.conns) == 0 {
			s.mu.Unlock()
			return nil
		}
		ch := s.changedLocked()
		s.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			s.logLeft()
			return ctx.Err()
		}
	}
}

// logLeft names, at warn, the connections still open when Shutdown gives
// up and the calls they hold, so that an operator whose drain took its
// whole grace sees what held it.
func (s *Server) logLeft() {
	s.mu.Lock()
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		// A connection whose write is blocked holds mu in the write:
		// name it without its calls rather than wait.
		if !c.mu.TryLock() {
			c.log.Warn("h2front: connection still open at the end of shutdown, its write blocked", "remote", c.remoteAddr)
			continue
		}
		var calls []string
		for _, st := range c.streams {
			if len(calls) == 8 {
				calls = append(calls, "...")
				break
			}
			if st.req != nil {
				calls = append(calls, st.req.URL.Path)
			}
		}
		n, goingAway := len(c.streams), c.goingAway
		c.mu.Unlock()
		c.log.Warn("h2front: connection still open at the end of shutdown", "remote", c.remoteAddr, "streams", n, "calls", calls, "going_away", goingAway)
	}
}

// Close closes every listener and connection now; handlers' contexts are
// cancelled. It does not wait for handlers to return.
func (s *Server) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	err := s.closeListenersLocked()
	for c := range s.conns {
		c.closeNow()
	}
	return err
}

func (s *Server) stopping() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.draining || s.closed
}

func (s *Server) closeListenersLocked() error {
	var err error
	for l := range s.listeners {
		if cerr := l.Close(); cerr != nil && err == nil && !errors.Is(cerr, net.ErrClosed) {
			err = cerr
		}
		delete(s.listeners, l)
	}
	return err
}

func (s *Server) changedLocked() chan struct{} {
	if s.changed == nil {
		s.changed = make(chan struct{})
	}
	return s.changed
}

// track registers c; it reports false when the server no longer takes
// connections.
func (s *Server) track(c *conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.draining || s.closed {
		return false
	}
	if s.conns == nil {
		s.conns = make(map[*conn]struct{})
	}
	s.conns[c] = struct{}{}
	return true
}

func (s *Server) untrack(c *conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.conns, c)
	if s.changed != nil {
		close(s.changed)
		s.changed = nil
	}
}
