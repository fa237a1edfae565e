// Package auth establishes who is calling the relay and what they may
// reach. Clients authenticate every call with a bearer token (the
// Authenticator's Middleware); the identity travels in the request context;
// a user reaches the machines they own and those of their teams. Revoking a
// token, disabling a user, changing a team or revoking a machine reaches
// every replica through the store's change notifications and ends the calls
// it no longer allows.
package auth

import (
	"context"
	"time"
)

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
	// Scope and ScopeMachine are the token's scope (store.ScopeDevice or
	// store.ScopePair) and the one machine it reaches ("" for an ordinary
	// token); scope.go enforced them before the call went on.
	Scope, ScopeMachine string

	expires time.Time // the token's expiry (zero: none)
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

// UserID returns the caller's user, "" when ctx carries no identity.
func UserID(ctx context.Context) string {
	id, _ := FromContext(ctx)
	return id.UserID
}
