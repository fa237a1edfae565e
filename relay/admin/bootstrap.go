package admin

import (
	"context"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/betcode-dev/betcode/relay/store"
)

// BootstrapActor is the audit actor of the first administrator's creation
// (Bootstrap).
const BootstrapActor = "bootstrap"

// BootstrapTokenName is the name of the client token Bootstrap creates.
const BootstrapTokenName = "first sign-in"

// Bootstrap makes a relay with an empty store usable without a shell on its
// host: when the store has no user at all, it creates user as a relay
// administrator with a client token and returns the token's secret (the
// store keeps only its hash). It returns "" and no error when the store
// has users, or when another process sharing the store created user first:
// the store's unique user id lets exactly one of any number of relays
// starting together on one database create it, and so print the secret.
func (o *Ops) Bootstrap(ctx context.Context, user string) (secret string, _ store.Token, err error) {
	users, err := o.Store.ListUsers(ctx)
	if err != nil {
		return "", store.Token{}, fmt.Errorf("bootstrap: list users: %w", err)
	}
	if len(users) > 0 {
		return "", store.Token{}, nil
	}
	a := System(BootstrapActor)
	if _, err := o.CreateUser(ctx, a, store.User{ID: user, Admin: true}); err != nil {
		if status.Code(err) == codes.AlreadyExists {
			return "", store.Token{}, nil // another replica won
		}
		return "", store.Token{}, fmt.Errorf("bootstrap: create the first administrator %q: %w", user, err)
	}
	secret, tok, err := o.CreateToken(ctx, a, user, BootstrapTokenName, 0)
	if err != nil {
		return "", store.Token{}, fmt.Errorf("bootstrap: create a token for %q (create one with betcode-relay admin token create --user %s): %w", user, user, err)
	}
	return secret, tok, nil
}
