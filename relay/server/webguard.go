package server

import (
	"bufio"
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/betcode-dev/betcode/relay/auth"
	"github.com/betcode-dev/betcode/shared/mtls"
)

// connGuard decides when a client connection that never authenticated is
// closed. A gRPC client authenticates its first call within the handshake
// timeout (relay/auth marks the connection), but a browser loading the web
// app sends no token for its static files, and a WebSocket authenticates
// with its first message, through the gateway's own calls on the in-memory
// connection rather than on the browser's. So relay/auth's timer does not
// close a connection outright once it has served the web app: the
// connection stays while a web request is in flight or one ended less
// than the timeout ago, and for good once a gateway call made on its
// behalf authenticated. A connection that has done neither within the
// timeout is closed exactly as before. A WebSocket's connection leaves the
// guard when it is upgraded (handOff): the gateway serves the socket on a
// goroutine of its own once the upgrade request returned, and the socket
// owns the connection, closing it unless its hello authenticates within
// 10 s.
type connGuard struct {
	conn    net.Conn // the real connection
	timeout time.Duration
	now     func() time.Time
	after   func(time.Duration, func()) (stop func() bool)
	id      uint64 // its id in the guards registry, once it served a web request
	reg     *guards

	mu       sync.Mutex
	authed   bool // a gateway call on its behalf authenticated
	web      bool // it served a web request
	active   int  // web requests in flight
	lastDone time.Time
	waiting  bool        // the timeout passed while requests were in flight
	closed   bool        // closed or handed off: the guard is done
	stop     func() bool // the pending check's timer
	once     sync.Once   // gives it an id
}

// guards knows the connections serving a web request by id, so that a
// gateway call arriving on the in-memory connection (made for a request in
// flight) can mark the browser's connection authenticated. A connection is
// registered only while it serves one: nothing is left behind when it ends
// (net/http tells a ConnContext hook nothing about the end).
type guards struct {
	next atomic.Uint64
	m    sync.Map // id -> *connGuard
}

func (g *guards) get(id uint64) *connGuard {
	v, ok := g.m.Load(id)
	if !ok {
		return nil
	}
	return v.(*connGuard)
}

// Len reports the connections registered (for tests).
func (g *guards) Len() int {
	n := 0
	g.m.Range(func(any, any) bool { n++; return true })
	return n
}

type guardKey struct{}

// guardFrom returns the guard of the connection a request came in on.
func guardFrom(ctx context.Context) *connGuard {
	g, _ := ctx.Value(guardKey{}).(*connGuard)
	return g
}

// connContext returns the http.Server ConnContext hook of a listener that
// serves the web app. withAuth: the listener also serves gRPC clients, whose
// calls relay/auth marks on the connection (auth.ConnContext, whose timer
// then asks the guard); else the guard runs the timer itself.
func (g *guards) connContext(timeout time.Duration, withAuth bool) func(context.Context, net.Conn) context.Context {
	authCtx := auth.ConnContext(timeout)
	return func(ctx context.Context, c net.Conn) context.Context {
		cg := g.newGuard(c, timeout)
		ctx = context.WithValue(ctx, guardKey{}, cg)
		if !withAuth {
			cg.mu.Lock()
			cg.arm(timeout)
			cg.mu.Unlock()
			return ctx
		}
		if tc, ok := c.(*tls.Conn); ok {
			cs := tc.ConnectionState()
			if _, relay := mtls.PeerRelay(&cs); relay {
				// relay/auth recognises another replica by its *tls.Conn.
				return authCtx(ctx, c)
			}
		}
		// relay/auth's timer closes the connection through the guard.
		return authCtx(ctx, guardedConn{Conn: c, g: cg})
	}
}

func (g *guards) newGuard(c net.Conn, timeout time.Duration) *connGuard {
	return &connGuard{conn: c, timeout: timeout, now: time.Now, reg: g, after: func(d time.Duration, f func()) func() bool {
		return time.AfterFunc(d, f).Stop
	}}
}

// handOff ends the guard's part: a request took the connection over (a
// WebSocket upgrade hijacked it). Its timer stops, it leaves the registry,
// and relay/auth's timer no longer closes the connection through it.
func (cg *connGuard) handOff() {
	cg.mu.Lock()
	defer cg.mu.Unlock()
	cg.closed = true
	if cg.stop != nil {
		cg.stop()
	}
	if cg.id != 0 {
		cg.reg.m.Delete(cg.id)
	}
}

// begin records a web request on the connection; the returned func ends it.
// The connection is in the registry while it serves one.
func (cg *connGuard) begin() func() {
	cg.once.Do(func() { cg.id = cg.reg.next.Add(1) })
	cg.mu.Lock()
	cg.web = true
	cg.active++
	if cg.active == 1 && !cg.closed {
		cg.reg.m.Store(cg.id, cg)
	}
	cg.mu.Unlock()
	return func() {
		cg.mu.Lock()
		defer cg.mu.Unlock()
		cg.active--
		cg.lastDone = cg.now()
		if cg.active == 0 {
			cg.reg.m.Delete(cg.id)
		}
		if cg.active == 0 && cg.waiting && !cg.authed && !cg.closed {
			cg.waiting = false
			cg.arm(cg.timeout)
		}
	}
}

// markAuthed records that a call made on the connection's behalf
// authenticated: from now on it is kept like an authenticated gRPC client's.
func (cg *connGuard) markAuthed() {
	cg.mu.Lock()
	cg.authed = true
	if cg.stop != nil {
		cg.stop()
	}
	cg.mu.Unlock()
}

// check runs when the connection's time to authenticate is up: it closes
// the connection unless it authenticated, serves a web request now, or
// served one less than the timeout ago.
func (cg *connGuard) check() {
	cg.mu.Lock()
	defer cg.mu.Unlock()
	if cg.authed || cg.closed {
		return
	}
	if cg.active > 0 {
		cg.waiting = true // begin's end re-arms
		return
	}
	if cg.web {
		if idle := cg.now().Sub(cg.lastDone); idle < cg.timeout {
			cg.arm(cg.timeout - idle)
			return
		}
	}
	cg.closed = true
	cg.conn.Close()
}

// arm schedules check after d; cg.mu is held.
func (cg *connGuard) arm(d time.Duration) {
	if cg.stop != nil {
		cg.stop()
	}
	cg.stop = cg.after(d, cg.check)
}

// guardedConn is the connection as relay/auth's timer sees it: its Close
// asks the guard, which keeps a connection serving the web app.
type guardedConn struct {
	net.Conn
	g *connGuard
}

func (c guardedConn) Close() error {
	c.g.check()
	return nil
}

// handOffWriter is a web request's ResponseWriter: a request that hijacks
// the connection (a WebSocket upgrade) hands it off from the guard.
type handOffWriter struct {
	http.ResponseWriter
	g *connGuard
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w handOffWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Hijack implements http.Hijacker.
func (w handOffWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, brw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err == nil {
		w.g.handOff()
	}
	return c, brw, err
}
