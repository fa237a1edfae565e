// Command tunnelfleet holds many idle machine tunnels open against a relay
// (relay/internal/tunnelfleet), for relay/bench's scale benchmark and
// memory test. It reads machine certificates and keys (PEM, certificate
// then key, repeated) from -certs, prints "up N in D" once every tunnel is
// up, then "up N dials D failed F" each -every while it runs, and exits when
// its standard input closes.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"syscall"
	"time"

	"github.com/betcode-dev/betcode/relay/internal/tunnelfleet"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "tunnelfleet:", err)
		os.Exit(1)
	}
}

func run() error {
	relay := flag.String("relay", "", "relay host:port")
	caFile := flag.String("ca", "", "the relay's CA certificate (PEM)")
	certs := flag.String("certs", "", "machine certificates and keys (PEM pairs)")
	sources := flag.Int("sources", 0, "loopback source addresses from 127.0.0.2 (0: one per 20,000 agents)")
	par := flag.Int("parallel", 64, "connection attempts in flight")
	reconnect := flag.Bool("reconnect", false, "dial again, with full-jitter backoff, when a tunnel ends")
	base := flag.Duration("backoff-base", time.Second, "backoff base")
	maxWait := flag.Duration("backoff-cap", 30*time.Second, "backoff cap")
	every := flag.Duration("every", time.Second, "status line interval")
	flag.Parse()
	if *every <= 0 {
		return errors.New("-every must be positive")
	}
	if *relay == "" || *caFile == "" || *certs == "" {
		return errors.New("-relay, -ca and -certs are required")
	}
	cfgs, err := tunnelfleet.ReadCerts(*certs, *caFile)
	if err != nil {
		return err
	}
	if err := raiseFileLimit(uint64(len(cfgs)) + 1000); err != nil {
		return err
	}
	f := tunnelfleet.New(tunnelfleet.Options{Relay: *relay, Configs: cfgs, Sources: *sources, Parallel: *par,
		Reconnect: *reconnect, Base: *base, Cap: *maxWait})
	start := time.Now()
	f.Run()
	// No f.Close on the way out: exiting drops every tunnel at once.
	ctx, cancel := context.WithCancel(context.Background())
	go func() { io.Copy(io.Discard, os.Stdin); cancel() }()
	if err := f.WaitUp(ctx, len(cfgs)); err != nil {
		return err
	}
	out := bufio.NewWriter(os.Stdout)
	fmt.Fprintf(out, "up %d in %s\n", len(cfgs), time.Since(start))
	out.Flush()
	t := time.NewTicker(*every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			fmt.Fprintf(out, "up %d dials %d failed %d", f.Up(), f.Dials(), f.Failures())
			if err := f.LastError(); err != nil {
				fmt.Fprintf(out, " last error: %v", err)
			}
			fmt.Fprintln(out)
			out.Flush()
		}
	}
}

// raiseFileLimit lifts RLIMIT_NOFILE to at least need (root may raise the
// hard limit too).
func raiseFileLimit(need uint64) error {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return fmt.Errorf("read the open files limit: %w", err)
	}
	if lim.Max < need {
		lim.Max = need
	}
	lim.Cur = max(lim.Cur, need)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return fmt.Errorf("raise the open files limit to %d (run as root or raise ulimit -Hn): %w", need, err)
	}
	return nil
}
