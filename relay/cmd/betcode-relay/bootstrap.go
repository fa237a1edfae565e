package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"time"

	"github.com/betcode-dev/betcode/relay/admin"
)

// bootstrap returns serve's server.Config.Bootstrap: with enabled, a relay
// whose store has no user creates the first administrator, name, and
// prints its client token to out (stdout) once. The token goes nowhere
// else: the log says only that it was created, with the token's public
// id. Every other start, and every other replica of the first start,
// prints nothing.
func bootstrap(enabled bool, name, listen string, out io.Writer, log *slog.Logger) func(context.Context, *admin.Ops) error {
	if !enabled {
		return nil
	}
	return func(ctx context.Context, ops *admin.Ops) error {
		secret, tok, err := ops.Bootstrap(ctx, name)
		if err != nil || secret == "" {
			return err
		}
		log.Info("relay: created the first administrator and printed its client token to stdout, once",
			"user", name, "token_id", tok.ID, "expires", tok.ExpiresAt.UTC().Format(time.RFC3339))
		addr := "HOST:" + port(listen)
		_, err = fmt.Fprintf(out, `
The relay's store had no user: it created the relay administrator %q.
Its client token, shown this once (the relay keeps only its hash):

    %s

Sign in with it:
    betcode login --relay %s --relay-ca ca.crt     (paste the token)
    or the web app at https://%s/
It expires %s. Create your own tokens and users (docs/admin.md), then
revoke this one: betcode-relay admin token revoke %s
This is not printed again; --bootstrap-admin=false turns it off.

`, name, secret, addr, addr, tok.ExpiresAt.UTC().Format(time.DateOnly), tok.ID)
		if err != nil {
			return fmt.Errorf("print the first administrator's token: %w", err)
		}
		return nil
	}
}

// port is listen's port: "8443" when it has none, "PORT" when the system
// picks it (:0).
func port(listen string) string {
	_, p, err := net.SplitHostPort(listen)
	switch {
	case err != nil || p == "":
		return "8443"
	case p == "0":
		return "PORT"
	}
	return p
}
