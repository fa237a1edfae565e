// Package bench measures the relay against the targets in
// docs/benchmarks-relay.md: streaming throughput and unary latency through
// relay and tunnel compared with calling the agent directly, relay memory
// per idle tunnel, and how 1,000 agents come back after a relay restart.
//
// Everything lives in _test.go files and runs only with -bench; the relay
// under test is the real betcode-relay binary in its own process, and the
// agents are minimal in-test links (shared/tunnel + yamux + grpc.Server),
// because the relay module must not import agent packages.
package bench
