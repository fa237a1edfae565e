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
	ctx, stop := shutdownSignals()
	defer stop()
	if err := newRootCmd().ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "betcode-agent:", err)
		os.Exit(1)
	}
}

type skipDrainKey struct{}

// shutdownSignals returns a context that ends at the first SIGINT or
// SIGTERM and carries a channel (see skipDrain) closed at the second, which
// cuts the agent's drain short.
func shutdownSignals() (context.Context, func()) {
	ctx, cancel := context.WithCancel(context.Background())
	skip := make(chan struct{})
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		for n := 1; ; n++ {
			select {
			case <-sigs:
			case <-done:
				return
			}
			switch n {
			case 1:
				cancel()
			case 2:
				close(skip)
			}
		}
	}()
	stop := func() {
		signal.Stop(sigs)
		close(done)
		cancel()
	}
	return context.WithValue(ctx, skipDrainKey{}, (<-chan struct{})(skip)), stop
}

// skipDrain is the channel shutdownSignals put in ctx; nil (never closed)
// when there is none.
func skipDrain(ctx context.Context) <-chan struct{} {
	c, _ := ctx.Value(skipDrainKey{}).(<-chan struct{})
	return c
}
