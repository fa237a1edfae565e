package server

import (
	"context"
	"errors"
	"log"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/betcode-dev/betcode/relay/auth"
)

// The web gateway (shared/webapi) reaches machines as a gRPC client of the
// relay itself: its calls go over an in-memory connection into the very
// handler that serves gRPC clients on the public port (auth.Middleware over
// the router), so authentication, authorization, the limits, auditing and
// routing are the ones every client gets; there is no second path.
//
// Two headers exist only on that connection. They tell the client handler
// which browser a call is made for: its address (for audit and the
// per-address limits, in place of the in-memory connection's "pipe") and
// its connection (so that an authenticated call keeps the browser's
// connection open, see connGuard). The gateway's connection sets them from
// the browser's request context, replacing whatever the gateway's metadata
// held; the in-memory server reads them (the address before authentication,
// the connection after it) and removes them before routing. Nothing on the
// public port reads them.
const (
	webRemoteHeader = "x-betcode-web-remote"
	webConnHeader   = "x-betcode-web-conn"
)

// webClient is the browser a web request came from, carried in its context
// to the gateway's gRPC calls.
type webClient struct {
	remote string
	connID uint64 // its connection in the guards registry (0: none)
}

type webClientKey struct{}

func withWebClient(ctx context.Context, c webClient) context.Context {
	return context.WithValue(ctx, webClientKey{}, c)
}

// gatewayConn is the grpc.ClientConnInterface the gateway calls machines
// through. It sets the in-memory headers from the call's context and
// removes any header only another relay replica may send: a browser cannot
// claim a user or a forwarded call through the gateway, whatever metadata
// the gateway built.
type gatewayConn struct {
	cc *grpc.ClientConn
}

var _ grpc.ClientConnInterface = gatewayConn{}

// Invoke implements grpc.ClientConnInterface.
func (g gatewayConn) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	return g.cc.Invoke(outgoing(ctx), method, args, reply, opts...)
}

// NewStream implements grpc.ClientConnInterface.
func (g gatewayConn) NewStream(ctx context.Context, desc *grpc.StreamDesc, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	return g.cc.NewStream(outgoing(ctx), desc, method, opts...)
}

// reservedMetadata may not come from the gateway's own metadata.
var reservedMetadata = []string{webRemoteHeader, webConnHeader, "x-betcode-forwarded-by", "x-betcode-user"}

func outgoing(ctx context.Context) context.Context {
	md, _ := metadata.FromOutgoingContext(ctx)
	md = md.Copy()
	for _, k := range reservedMetadata {
		md.Delete(k)
	}
	if c, ok := ctx.Value(webClientKey{}).(webClient); ok {
		md.Set(webRemoteHeader, c.remote)
		if c.connID != 0 {
			md.Set(webConnHeader, strconv.FormatUint(c.connID, 10))
		}
	}
	return metadata.NewOutgoingContext(ctx, md)
}

// gatewayPath is the in-memory connection and its server.
type gatewayPath struct {
	ln  *memListener
	srv *http.Server
	cc  *grpc.ClientConn
	wg  sync.WaitGroup
}

// newGatewayPath serves h (gatewayHandler) on an in-memory listener with
// unencrypted HTTP/2 and dials it.
func newGatewayPath(h http.Handler, lg *slog.Logger) (*gatewayPath, error) {
	p := &gatewayPath{ln: newMemListener()}
	var protos http.Protocols
	protos.SetUnencryptedHTTP2(true)
	p.srv = &http.Server{
		Handler:  h,
		ErrorLog: log.New(&handshakeLog{lg}, "", 0),
		// Every browser's WebSocket holds a WatchSessions stream and one
		// stream per subscribed session on this one connection.
		HTTP2:     &http.HTTP2Config{MaxConcurrentStreams: 1 << 20},
		Protocols: &protos,
	}
	cc, err := grpc.NewClient("passthrough:///relay-web-gateway",
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return p.ln.dial(ctx) }),
		// The gateway's messages are bounded by the relay's own limit
		// (MESSAGE_TOO_LARGE) and the gateway's; grpc-go's 4 MiB default
		// would refuse large answers (diffs) the public port passes.
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20), grpc.MaxCallSendMsgSize(64<<20)),
	)
	if err != nil {
		return nil, err
	}
	p.cc = cc
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		p.srv.Serve(p.ln)
	}()
	return p, nil
}

// conn is the connection the gateway calls through.
func (p *gatewayPath) conn() grpc.ClientConnInterface { return gatewayConn{cc: p.cc} }

// close ends the gateway's calls and the in-memory server.
func (p *gatewayPath) close() {
	p.cc.Close()
	p.srv.Close()
	p.wg.Wait()
}

// gatewayHandler is the in-memory server's handler: the public port's
// client handler (authenticate, wrapping route) with the browser's address
// taken from the in-memory headers, and the browser's connection marked
// when a call authenticated. Both headers are removed before routing: they
// go no further, not to a machine either.
func gatewayHandler(reg *guards, authenticate func(http.Handler) http.Handler, route http.Handler) http.Handler {
	authed := authenticate(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if auth.UserID(r.Context()) != "" {
			if id, err := strconv.ParseUint(r.Header.Get(webConnHeader), 10, 64); err == nil {
				if cg := reg.get(id); cg != nil {
					cg.markAuthed()
				}
			}
		}
		r.Header.Del(webConnHeader)
		route.ServeHTTP(w, r)
	}))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Not a browser's call (the gateway's own, if it makes any): an
		// address that names the gateway rather than "pipe".
		r.RemoteAddr = "web-gateway"
		if remote := r.Header.Get(webRemoteHeader); remote != "" {
			r.RemoteAddr = remote
		}
		r.Header.Del(webRemoteHeader)
		authed.ServeHTTP(w, r)
	})
}

// memListener is a net.Listener of in-memory connections.
type memListener struct {
	ch   chan net.Conn
	done chan struct{}
	once sync.Once
}

func newMemListener() *memListener {
	return &memListener{ch: make(chan net.Conn), done: make(chan struct{})}
}

var errMemClosed = errors.New("relay: web gateway listener closed")

func (l *memListener) dial(ctx context.Context) (net.Conn, error) {
	server, client := net.Pipe()
	select {
	case l.ch <- server:
		return client, nil
	case <-l.done:
		return nil, errMemClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (l *memListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *memListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *memListener) Addr() net.Addr { return memAddr{} }

type memAddr struct{}

func (memAddr) Network() string { return "memory" }
func (memAddr) String() string  { return "web-gateway" }
