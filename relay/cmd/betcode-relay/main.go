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

// forceStop is closed by a second SIGTERM or interrupt: the first starts
// the relay's drain, the second ends it at once.
var forceStop = make(chan struct{})

func main() {
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() { // lives as long as the process
		<-sigs
		stop()
		<-sigs
		close(forceStop)
	}()
	if err := newRootCmd().ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "betcode-relay:", err)
		os.Exit(1)
	}
}
