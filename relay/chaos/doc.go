// Package chaos is the relay's chaos soak: three relay replicas on one
// PostgreSQL behind a small TCP balancer, agents and clients on loopback,
// and a seeded schedule of overlapping faults (replicas killed and drained,
// PostgreSQL restarted and blackholed, agents killed, tunnels blackholed,
// slow and sliced links, clients that stop reading), with clients of every
// kind: relay logins on gRPC and the web app's WebSocket, and paired devices
// whose calls go inside end-to-end channels (gRPC, and the phone web app's
// web/1) to machines on the shipped --relay-e2e required. TestChaosSoak checks
// that nothing was lost or doubled and that the processes recover; make
// chaos runs it long and writes docs/reliability.md.
//
// The package holds the parts with no processes of their own: the
// balancer, the fault schedule and the report. The soak itself is in the
// package's tests.
package chaos
