// Package bench measures the relay against the targets in
// docs/benchmarks-relay.md: streaming throughput and unary latency through
// relay and tunnel compared with calling the agent directly, relay memory
// per idle tunnel, and how 1,000 agents come back after a relay restart.
// Two floor paths stand beside the relay in the forwarding comparison: l4,
// a TCP proxy process (the least any extra process adds), and h2, an
// HTTP/2 hop that ends TLS and HTTP/2 on both sides with no goroutine per
// call (the least a relay that ends HTTP/2 adds, for unary calls).
//
// Everything lives in _test.go files and runs only with -bench; the relay
// under test is the real betcode-relay binary in its own process, and the
// agents are minimal in-test links (shared/tunnel + yamux + grpc.Server),
// because the relay module must not import agent packages.
package bench
