package localtoken

import (
	"context"
	"crypto/subtle"
	"crypto/tls"
	"net"
	"net/http"
	"strings"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/betcode-dev/betcode/agent/server"
	"github.com/betcode-dev/betcode/shared/e2ee"
	"github.com/betcode-dev/betcode/shared/tunnel"
)

// openPrefix is the standard health service: load balancers and process
// supervisors probe it without credentials, and it tells nothing.
const openPrefix = "/grpc.health.v1.Health/"

// Guard admits a call when its connection needs no token or it carries the
// local token. Its interceptors go first in the server's chain.
//
// It is also the agent's door policy for calls the relay forwards: those
// reach ChannelService (a device's end-to-end channel, whose calls then
// arrive on a connection of their own) and the standard health check; with
// RequireChannel off (--relay-e2e=optional) every other service too, except
// DeviceService, which the relay never reaches: it could pair itself,
// VoiceService, whose audio must never cross the relay in clear, and
// ShareService, whose share codes hold pairing secrets.
type Guard struct {
	want []byte // "Bearer " + token
	path string // the token file, for the refusal's hint
	// requireChannel refuses relayed calls outside a channel.
	requireChannel atomic.Bool
}

// RequireChannel sets whether relayed calls must come inside an end-to-end
// channel (--relay-e2e=required).
func (g *Guard) RequireChannel(on bool) { g.requireChannel.Store(on) }

// channelPrefix is the service the relay may call outside a channel
// whatever the policy.
const channelPrefix = "/betcode.v1.ChannelService/"

// neverInClear are the services the relay never reaches outside a channel
// whatever the policy, each with the refusal's reason.
var neverInClear = []struct{ prefix, why string }{
	{"/betcode.v1.DeviceService/",
		"paired devices are managed on the machine or from a paired device, never through the relay in clear"},
	{"/betcode.v1.ShareService/",
		"sessions are shared on the machine or from a paired device, never through the relay in clear: a share code holds a pairing secret"},
	{"/betcode.v1.VoiceService/",
		"dictation goes to the machine only inside an end-to-end channel from a paired device, never through the relay in clear: pair this device"},
}

// NewGuard returns a Guard for token, which is kept in tokenPath.
func NewGuard(token, tokenPath string) *Guard {
	return &Guard{want: []byte("Bearer " + token), path: tokenPath}
}

// UnaryInterceptor checks unary calls.
func (g *Guard) UnaryInterceptor(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if err := g.check(ctx, info.FullMethod); err != nil {
		return nil, err
	}
	return handler(ctx, req)
}

// StreamInterceptor checks streaming calls.
func (g *Guard) StreamInterceptor(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if err := g.check(ss.Context(), info.FullMethod); err != nil {
		return err
	}
	return handler(srv, ss)
}

func (g *Guard) check(ctx context.Context, method string) error {
	if strings.HasPrefix(method, openPrefix) {
		return nil
	}
	if relayed(ctx) {
		if strings.HasPrefix(method, channelPrefix) {
			return nil
		}
		for _, s := range neverInClear {
			if strings.HasPrefix(method, s.prefix) {
				return server.Status(codes.PermissionDenied, "E2E_REQUIRED", s.why)
			}
		}
		if g.requireChannel.Load() {
			return server.Status(codes.PermissionDenied, "E2E_REQUIRED",
				"this machine serves calls through the relay only inside an end-to-end channel: pair this device (betcode-agent pair on the machine, then betcode pair CODE)")
		}
		return nil
	}
	if trusted(ctx) {
		return nil
	}
	md, _ := metadata.FromIncomingContext(ctx)
	for _, v := range md.Get("authorization") {
		if g.match(v) {
			return nil
		}
	}
	where := "<data-dir>/" + FileName
	if p, ok := peer.FromContext(ctx); ok && isLoopback(p.Addr) {
		where = g.path // the caller runs on this machine: name the file
	}
	return status.Errorf(codes.Unauthenticated,
		"this agent's TCP listener needs its local token: betcode reads it from %s (or pass --agent-token)", where)
}

// match compares v with the expected header in constant time; the scheme
// is case-insensitive (RFC 9110).
func (g *Guard) match(v string) bool {
	const scheme = "bearer "
	if len(v) < len(scheme) || !strings.EqualFold(v[:len(scheme)], scheme) {
		return false
	}
	got := append([]byte("Bearer "), v[len(scheme):]...)
	return subtle.ConstantTimeCompare(got, g.want) == 1
}

// relayed reports whether the relay tunnel delivered the call (outside any
// channel: a channel's calls arrive on a connection of their own).
func relayed(ctx context.Context) bool {
	if ctx.Value(tunnelCall{}) != nil {
		return true
	}
	p, ok := peer.FromContext(ctx)
	if !ok {
		return false
	}
	for _, a := range []net.Addr{p.Addr, p.LocalAddr} {
		if _, ok := a.(tunnel.Addr); ok {
			return true
		}
	}
	return false
}

// trusted reports whether the call's connection needs no local token: a
// Unix socket, an end-to-end channel from a paired device, or TLS with a
// verified client certificate.
// It goes by the connection's type (and a mark only the agent's own tunnel
// handler sets), never by what the caller sends.
func trusted(ctx context.Context) bool {
	if ctx.Value(tunnelCall{}) != nil {
		return true
	}
	p, ok := peer.FromContext(ctx)
	if !ok {
		return false
	}
	for _, a := range []net.Addr{p.Addr, p.LocalAddr} {
		switch a := a.(type) {
		case *net.UnixAddr, e2ee.Addr:
			return true
		case tlsAddr:
			if a.verified() {
				return true
			}
		}
	}
	if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok && len(ti.State.VerifiedChains) > 0 {
		return true
	}
	return false
}

func isLoopback(a net.Addr) bool {
	switch a := a.(type) {
	case *net.TCPAddr:
		return a.IP.IsLoopback()
	case tlsAddr:
		return isLoopback(a.Addr)
	}
	return false
}

// tunnelCall marks the context of a call the relay tunnel delivered.
type tunnelCall struct{}

// TunnelHandler wraps the handler that serves the relay tunnel's calls
// (relaylink.Config.Handler) so that Guard knows them: grpc-go's ServeHTTP
// only sees the relay's address as a string, but keeps the request's
// context.
func TunnelHandler(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), tunnelCall{}, true)))
	})
}

// TLSListener wraps a listener of *tls.Conn (tls.NewListener) whose config
// may verify client certificates, so that Guard can tell a connection with
// a verified certificate: gRPC, which does not do the TLS itself here, sees
// only the address, so the address carries the connection.
func TLSListener(l net.Listener) net.Listener { return tlsListener{l} }

type tlsListener struct{ net.Listener }

func (l tlsListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	if tc, ok := c.(*tls.Conn); ok {
		return tlsConn{tc}, nil
	}
	return c, nil
}

type tlsConn struct{ *tls.Conn }

func (c tlsConn) RemoteAddr() net.Addr { return tlsAddr{Addr: c.Conn.RemoteAddr(), conn: c.Conn} }

// tlsAddr is the remote address of a TLS connection.
type tlsAddr struct {
	net.Addr
	conn *tls.Conn
}

// verified reports whether the handshake verified a client certificate.
// Calls arrive only after the handshake, so it is complete when asked.
func (a tlsAddr) verified() bool {
	return len(a.conn.ConnectionState().VerifiedChains) > 0
}
