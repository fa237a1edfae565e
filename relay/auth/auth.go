// Package auth establishes who is calling the relay and carries that
// identity in the request context. Until accounts exist the relay serves one
// implicit user; every routing, listing and buffering decision already takes
// the user from here, so adding accounts changes no routing code.
package auth

import (
	"context"
	"net/http"

	"github.com/betcode-dev/betcode/shared/mtls"
)

// ImplicitUser is the single user of a relay without accounts.
const ImplicitUser = "local"

// Headers that carry a call forwarded by another relay replica. They are
// believed only on a connection whose verified client certificate is a
// relay's (mtls.PeerRelay); from anyone else they are removed.
const (
	// ForwardedByHeader names the replica (its advertised address) that
	// forwarded the call. A forwarded call is never forwarded again.
	ForwardedByHeader = "X-Betcode-Forwarded-By"
	// UserHeader carries the user the forwarding replica authenticated.
	UserHeader = "X-Betcode-User"
)

// Identity is the authenticated caller.
type Identity struct {
	UserID string
	// TokenID is the public id of the token the call carried ("" for a
	// call forwarded by another replica, which authenticated it).
	TokenID string
	// Admin: the user is a relay administrator.
	Admin bool
	// ForwardedBy is the replica that forwarded the call on the user's
	// behalf ("" for a call straight from a client).
	ForwardedBy string
	// Remote is the client's address (host:port).
	Remote string
}

type ctxKey struct{}

// WithIdentity returns ctx carrying id.
func WithIdentity(ctx context.Context, id Identity) context.Context {
	return context.WithValue(ctx, ctxKey{}, id)
}

// FromContext returns the caller's identity.
func FromContext(ctx context.Context) (Identity, bool) {
	id, ok := ctx.Value(ctxKey{}).(Identity)
	return id, ok
}

// UserID returns the caller's user: the identity's, or ImplicitUser when ctx
// carries none (agents' calls, which do not pass through Middleware).
func UserID(ctx context.Context) string {
	if id, ok := FromContext(ctx); ok {
		return id.UserID
	}
	return ImplicitUser
}

// Middleware authenticates each request and stores the identity in its
// context. A call forwarded by another replica (over mTLS with a relay
// certificate) keeps the user that replica authenticated; the forwarding
// headers of any other caller are dropped, so no client can claim a user or
// pose as a forwarded call.
func Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(w, r.WithContext(WithIdentity(r.Context(), identify(r))))
	})
}

// identify returns the caller of r, removing forwarding headers it may not
// send.
func identify(r *http.Request) Identity {
	by, user := r.Header.Get(ForwardedByHeader), r.Header.Get(UserHeader)
	if _, relay := mtls.PeerRelay(r.TLS); relay && by != "" && user != "" {
		return Identity{UserID: user, ForwardedBy: by}
	}
	r.Header.Del(ForwardedByHeader)
	r.Header.Del(UserHeader)
	return Identity{UserID: ImplicitUser}
}
