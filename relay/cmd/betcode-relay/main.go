// Command betcode-relay is the public relay: agents dial out to it over
// mTLS and clients reach their machines through it. See
// `betcode-relay serve --help` and `betcode-relay certs --help`.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := newRootCmd().ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "betcode-relay:", err)
		os.Exit(1)
	}
}
