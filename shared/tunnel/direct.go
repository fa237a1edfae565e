package tunnel

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"time"
)

// A direct connection carries a tunnel's calls outside the OpenTunnel
// stream. Over the stream, every call crosses gRPC inside gRPC: the
// stream's own HTTP/2 transport on both ends, a TunnelFrame per write and
// several goroutine hand-offs in the agent. Measured on the 2-vCPU VM of
// docs/benchmarks-relay.md, a relayed unary call added about 90 µs less with
// the calls on a connection of their own.
//
// The protocol, for agents that register CapabilityDirect:
//  1. At the tunnel's first call the relay sends a DirectOffer frame on the
//     stream: a fresh 32-byte token.
//  2. The agent dials the relay again with the same machine certificate,
//     offering only the ALPN protocol ALPNDirect, and writes the token as
//     its first bytes.
//  3. The relay checks the certificate's machine, that this replica holds
//     the machine's tunnel, and the token (once only); then it starts its
//     HTTP/2 client on the connection, and the agent serves it as it serves
//     the stream. Later calls go there.
//
// A replica that does not hold the tunnel (in Kubernetes, the second
// connection may reach another replica) closes the connection at once; the
// agent tries again a few times, then leaves the calls on the stream. If
// the direct connection fails, calls go back to the stream and the relay
// offers again after DirectReofferAfter. The stream stays up either way:
// heartbeats, the drain signal and the tunnel's life are its.

// CapabilityDirect is the Register capability of an agent that accepts
// DirectOffers.
const CapabilityDirect = "tunnel.direct"

// HandoverHeader is the OpenTunnel metadata key ("1") of an agent that
// hands over when its replica drains: told RELAY_DRAINING, it registers
// with another replica at once and keeps serving the calls under way on
// this tunnel until the replica ends it. A draining replica tells such
// agents first, without waiting for its calls (relay/server's drain), so
// their machines are reachable elsewhere within a reconnection instead of
// after the replica's last call.
const HandoverHeader = "x-betcode-tunnel-handover"

// ALPNDirect is the ALPN protocol of a direct connection.
const ALPNDirect = "betcode-direct/1"

// DirectTokenLen is the length of a DirectOffer's token.
const DirectTokenLen = 32

// DirectReofferAfter is how long the relay waits before it offers a direct
// connection again (the last offer went unanswered, or the connection
// failed).
const DirectReofferAfter = time.Minute

// DirectAcceptTimeout bounds how long the agent waits for the relay to
// accept a direct connection (its HTTP/2 preface), and how long the relay
// waits for the token.
const DirectAcceptTimeout = 10 * time.Second

// A direct connection is checked with HTTP/2 pings: after directPingEvery
// without a frame from the agent the relay pings, and closes the
// connection if no answer comes within directPingTimeout (calls then go
// back to the stream). The tunnel stream has gRPC keepalives; without
// these, a direct connection that died silently (a NAT mapping dropped
// while it was idle) would hold calls until TCP gave up, many minutes
// later. The pings also keep such a mapping alive. Variables for tests.
var (
	directPingEvery   = 30 * time.Second
	directPingTimeout = 10 * time.Second
)

// EnableDirect lets the tunnel's first call invite the agent to a direct
// connection: send delivers the DirectOffer (on the OpenTunnel stream). It
// must not block.
func (c *Client) EnableDirect(send func(token []byte)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.offer = send
}

// errDirectToken refuses a direct connection whose token is not the
// outstanding one.
var errDirectToken = errors.New("no such direct-connection offer outstanding on this tunnel (expired, used, or another replica's)")

// AttachDirect takes the agent's direct connection, which presented token,
// and starts the calls' HTTP/2 connection on it; later calls go there. On
// an error the caller closes conn.
func (c *Client) AttachDirect(ctx context.Context, conn net.Conn, token []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClosed
	}
	if c.token == nil || subtle.ConstantTimeCompare(c.token, token) != 1 {
		return errDirectToken
	}
	c.token = nil
	cc, err := newCallConn(ctx, conn, c.engine, directPingEvery, directPingTimeout)
	if err != nil {
		return fmt.Errorf("start HTTP/2 on the direct connection: %w", err)
	}
	c.dropDirectLocked()
	c.direct = cc
	return nil
}

// UseEngine makes the tunnel carry calls on the relay's own HTTP/2 client
// (shared/h2client: one reader goroutine, a call's request in one write)
// instead of net/http's, over the tunnel stream and over direct
// connections attached later. Call it before the first call. The relay's
// --front=engine sets it.
func (c *Client) UseEngine() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.engine = true
}

// Direct reports whether calls go over a direct connection.
func (c *Client) Direct() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.direct != nil && c.direct.Err() == nil
}

// directLocked returns the direct connection's HTTP/2 client if it is
// healthy. Otherwise it drops a failed one and, if the agent can take
// one, sends an offer (at most once per DirectReofferAfter); the call then
// goes over the stream. c.mu is held.
func (c *Client) directLocked() callConn {
	if c.direct != nil {
		if c.direct.Err() == nil {
			return c.direct
		}
		c.dropDirectLocked()
	}
	if c.offer != nil && time.Since(c.offered) >= DirectReofferAfter { // a zero offered is long ago
		token := make([]byte, DirectTokenLen)
		rand.Read(token)
		c.token, c.offered = token, time.Now()
		c.offer(token)
	}
	return nil
}

// dropDirectLocked closes the direct connection, if any. c.mu is held.
func (c *Client) dropDirectLocked() {
	if c.direct != nil {
		c.direct.Close() // and its connection
		c.direct = nil
	}
}

// DirectDialer returns the dial of ServeDirect for a relay at addr: TLS
// with cfg (the machine certificate, the relay's CA), offering only
// ALPNDirect.
func DirectDialer(cfg *tls.Config, addr string) func(context.Context) (net.Conn, error) {
	c := cfg.Clone()
	c.NextProtos = []string{ALPNDirect}
	d := &tls.Dialer{Config: c}
	return func(ctx context.Context) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) }
}

// ErrDirectRefused says that no relay replica reached took the direct
// connection: the calls stay on the tunnel stream.
var ErrDirectRefused = errors.New("the relay refused the direct connection (another replica's, or the offer expired)")

// ServeDirect answers a DirectOffer: it dials the relay (dial must present
// the machine certificate and offer only ALPNDirect), sends token, and once
// the relay has accepted (its HTTP/2 preface arrives within
// DirectAcceptTimeout) serves calls on the connection as ServeConn does,
// until it ends or ctx does. A connection closed before that was refused
// (another replica got it): ServeDirect dials again, at most tries times in
// all.
func (s *Server) ServeDirect(ctx context.Context, dial func(context.Context) (net.Conn, error), token []byte, tries int) error {
	var last error
	for range max(tries, 1) {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		dctx, cancel := context.WithTimeout(ctx, DirectAcceptTimeout)
		conn, err := dial(dctx)
		cancel()
		if err != nil {
			last = fmt.Errorf("dial the relay: %w", err)
			continue
		}
		first, err := directAccepted(ctx, conn, token)
		if err != nil {
			conn.Close()
			last = err
			continue
		}
		remote := s.Remote
		if remote == "" {
			remote = "relay"
		}
		return s.ServeConn(ctx, &directConn{prefixConn: prefixConn{Conn: conn, prefix: first}, remote: Addr(remote)})
	}
	return fmt.Errorf("%w: %v", ErrDirectRefused, last)
}

// directConn is a direct connection as the agent's handlers see it: its
// addresses are tunnel Addrs, as a call over the stream has, so that the
// agent treats calls on it as the relay's (its local-token guard trusts a
// connection by that type; the relay's certificate was verified when it
// was dialed).
type directConn struct {
	prefixConn
	remote Addr
}

// LocalAddr returns Addr("machine").
func (c *directConn) LocalAddr() net.Addr { return Addr("machine") }

// RemoteAddr returns the relay's Addr.
func (c *directConn) RemoteAddr() net.Addr { return c.remote }

// directAccepted sends token on conn and waits for the relay's first byte.
func directAccepted(ctx context.Context, conn net.Conn, token []byte) ([]byte, error) {
	deadline := time.Now().Add(DirectAcceptTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	conn.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if _, err := conn.Write(token); err != nil {
		return nil, fmt.Errorf("send the token: %w", err)
	}
	first := make([]byte, 1)
	if _, err := io.ReadFull(conn, first); err != nil {
		return nil, fmt.Errorf("relay closed the direct connection: %w", err)
	}
	if !stop() {
		return nil, ctx.Err()
	}
	conn.SetDeadline(time.Time{})
	return first, nil
}
