package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/betcode-dev/betcode/agent/client"
	"github.com/betcode-dev/betcode/shared/telemetry"
)

// flushTimeout bounds how long betcode waits at exit for its spans to
// reach the collector: an unreachable collector delays the exit by at most
// this, never fails the command.
const flushTimeout = 3 * time.Second

func addTracingFlags(pf *pflag.FlagSet) {
	pf.String("otlp-endpoint", "", "host:port of an OTLP/gRPC collector to export this command's client spans to (TLS unless loopback or --otlp-insecure; env BETCODE_OTLP_ENDPOINT); empty: no tracing")
	pf.Bool("otlp-insecure", false, "send traces to --otlp-endpoint without TLS off loopback")
}

// startTracing builds the command's tracing from --otlp-endpoint; without
// one it is tracing off (calls still pass a caller's trace context on).
func (g *globals) startTracing(ctx context.Context) error {
	t, err := telemetry.Start(ctx, telemetry.Config{
		Endpoint: g.v.GetString("otlp-endpoint"), Insecure: g.v.GetBool("otlp-insecure"),
		ServiceName: "betcode", ServiceVersion: version,
	})
	if err != nil {
		return &client.ExitError{Code: client.ExitInvalidArgs, Err: err}
	}
	g.tracing = t
	return nil
}

// flushTracing exports the spans still buffered. A failure is reported on
// stderr and does not change the command's result.
func (g *globals) flushTracing(cmd *cobra.Command) {
	if g.tracing == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), flushTimeout)
	defer cancel()
	if err := g.tracing.Shutdown(ctx); err != nil {
		fmt.Fprintln(cmd.ErrOrStderr(), "betcode: warning:", err)
	}
	g.tracing = nil
}

// withTracing flushes every command's spans when it returns, error or not
// (cobra skips PersistentPostRun after an error).
func withTracing(root *cobra.Command, g *globals) {
	for _, c := range root.Commands() {
		withTracing(c, g)
		if run := c.RunE; run != nil {
			c.RunE = func(cmd *cobra.Command, args []string) error {
				defer g.flushTracing(cmd)
				return run(cmd, args)
			}
		}
	}
}
