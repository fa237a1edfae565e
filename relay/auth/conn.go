package auth

import (
	"context"
	"crypto/tls"
	"net"
	"sync/atomic"
	"time"

	"github.com/betcode-dev/betcode/shared/mtls"
)

// connAuth is the authentication state of one client connection.
type connAuth struct {
	authed atomic.Bool
}

type connKey struct{}

// ConnContext returns an http.Server ConnContext hook that closes a client
// connection which has not authenticated a call (with a token, or as
// another replica) within timeout: a connection that finished TLS but
// never authenticates costs its holder a full handshake and is gone again
// shortly, so idle unauthenticated connections cannot pile up.
func ConnContext(timeout time.Duration) func(context.Context, net.Conn) context.Context {
	return func(ctx context.Context, c net.Conn) context.Context {
		st := &connAuth{}
		if tc, ok := c.(*tls.Conn); ok {
			cs := tc.ConnectionState()
			if _, relay := mtls.PeerRelay(&cs); relay {
				st.authed.Store(true)
			}
		}
		if !st.authed.Load() {
			time.AfterFunc(timeout, func() {
				if !st.authed.Load() {
					c.Close()
				}
			})
		}
		return context.WithValue(ctx, connKey{}, st)
	}
}

// markConn records that the connection of the call in ctx authenticated.
func markConn(ctx context.Context) {
	if st, ok := ctx.Value(connKey{}).(*connAuth); ok && !st.authed.Load() {
		st.authed.Store(true)
	}
}
