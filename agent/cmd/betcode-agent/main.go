// Command betcode-agent is the per-machine daemon: it runs Claude Code
// sessions and serves them over gRPC. See `betcode-agent serve --help`.
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
		fmt.Fprintln(os.Stderr, "betcode-agent:", err)
		os.Exit(1)
	}
}
