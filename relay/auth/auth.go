// Package auth establishes who is calling the relay and carries that
// identity in the request context. Until accounts exist the relay serves one
// implicit user; every routing, listing and buffering decision already takes
// the user from here, so adding accounts changes no routing code.
package auth

import (
	"context"
	"net/http"
)

// ImplicitUser is the single user of a relay without accounts.
const ImplicitUser = "local"

// Identity is the authenticated caller.
type Identity struct {
	UserID string
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

// Middleware authenticates each request and stores the identity in its
// context.
func Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(w, r.WithContext(WithIdentity(r.Context(), Identity{UserID: ImplicitUser})))
	})
}
