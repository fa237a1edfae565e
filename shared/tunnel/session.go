package tunnel

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"

	"github.com/hashicorp/yamux"
)

// CapabilityHTTP2 is the Register capability of an agent that serves
// HTTP/2 directly on the tunnel (see Client).
const CapabilityHTTP2 = "tunnel.http2"

// NativeServer serves gRPC connections itself; *grpc.Server is one.
type NativeServer interface {
	Serve(net.Listener) error
}

// Server is the agent's end of a tunnel: it serves the calls the relay
// sends.
type Server struct {
	// Handler serves calls through grpc-go's ServeHTTP: those of the
	// TunnelFrame call protocol, and HTTP/2 when Native is nil.
	Handler http.Handler
	// Native, if set, serves an HTTP/2 tunnel on grpc-go's own transport.
	Native NativeServer
	// Remote names the relay in the handlers' peer address.
	Remote string
}

// http2Preface is how an HTTP/2 client starts (RFC 9113 §3.4); a yamux
// session starts with its version byte, 0.
const http2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

// ServeConn serves the tunnel conn until it ends or ctx does. The relay's
// first byte says what it carries: HTTP/2 (the relay saw CapabilityHTTP2)
// or a yamux session. conn is closed when ServeConn returns.
func (s *Server) ServeConn(ctx context.Context, conn net.Conn) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		<-ctx.Done()
		conn.Close()
	}()
	first := make([]byte, 1)
	if _, err := io.ReadFull(conn, first); err != nil {
		return fmt.Errorf("tunnel closed: %w", err)
	}
	pc := &prefixConn{Conn: conn, prefix: first}
	if first[0] != http2Preface[0] {
		sess, err := yamux.Server(pc, YamuxConfig())
		if err != nil {
			return err
		}
		defer sess.Close()
		return s.ServeSession(ctx, sess)
	}
	native := s.Native
	if native == nil {
		protos := new(http.Protocols)
		protos.SetUnencryptedHTTP2(true)
		hs := &http.Server{Handler: s.Handler, Protocols: protos, BaseContext: func(net.Listener) context.Context { return ctx }}
		defer hs.Close()
		native = hs
	}
	closed := make(chan struct{})
	ln := newConnListener(conn.LocalAddr(), &notifyConn{Conn: pc, closed: closed})
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = native.Serve(ln) // returns when ln has handed over its conn
	}()
	defer func() { <-served }()
	select {
	case <-closed:
	case <-ctx.Done():
	}
	return fmt.Errorf("tunnel closed")
}

// ServeSession serves a yamux tunnel: one TunnelFrame call per stream,
// until sess closes.
func (s *Server) ServeSession(ctx context.Context, sess *yamux.Session) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		st, err := sess.AcceptStream()
		if err != nil {
			return fmt.Errorf("tunnel closed: %w", err)
		}
		// A call that fails has been answered already, or the relay left.
		wg.Go(func() { _ = Serve(ctx, st, s.Handler, s.Remote) })
	}
}

// prefixConn gives back the bytes read to tell the protocol.
type prefixConn struct {
	net.Conn
	prefix []byte
}

func (c *prefixConn) Read(p []byte) (int, error) {
	if len(c.prefix) > 0 {
		n := copy(p, c.prefix)
		c.prefix = c.prefix[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

// notifyConn closes closed when the server closes the connection.
type notifyConn struct {
	net.Conn
	once   sync.Once
	closed chan struct{}
}

func (c *notifyConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { close(c.closed) })
	return err
}

// connListener hands one connection to a NativeServer, then reports
// itself closed so that Serve returns (the connection stays served).
type connListener struct {
	addr net.Addr
	mu   sync.Mutex
	conn net.Conn
}

func newConnListener(addr net.Addr, c net.Conn) *connListener {
	return &connListener{addr: addr, conn: c}
}

// Accept returns the connection once, then net.ErrClosed.
func (l *connListener) Accept() (net.Conn, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.conn
	l.conn = nil
	if c == nil {
		return nil, net.ErrClosed
	}
	return c, nil
}

// Close drops a connection not yet accepted.
func (l *connListener) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.conn != nil {
		l.conn.Close()
		l.conn = nil
	}
	return nil
}

// Addr returns the tunnel's address.
func (l *connListener) Addr() net.Addr { return l.addr }
