// Package peer carries client calls from one relay replica to another: the
// replica a client reached hands a call for a machine whose tunnel lives on
// another replica to that replica, over HTTP/2 and mutual TLS with the
// relay's own certificate (clientAuth, URI SAN betcode://relay/...). The
// receiving replica believes the forwarded user only from such a
// certificate (auth.Middleware).
package peer

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/betcode-dev/betcode/shared/h2client"
	"github.com/betcode-dev/betcode/shared/mtls"
	"github.com/betcode-dev/betcode/shared/tunnel"
)

// Forwarder keeps one long-lived HTTP/2 connection per peer replica (every
// call to it is a stream on it) and proxies calls over it. Safe for
// concurrent use.
type Forwarder struct {
	rt    http.RoundTripper
	close func()
}

// peerOptions bound what a connection to a peer buffers, as for tunnels:
// a stalled client holds at most 1 MiB here; and a peer that vanished
// without closing is noticed by pings.
var peerOptions = h2client.Options{
	StreamWindow:      1 << 20,
	ConnWindow:        64 << 20,
	MaxHeaderListSize: 1 << 20,
	PingEvery:         15 * time.Second,
	PingTimeout:       10 * time.Second,
}

// NewEngine is New with the relay's own HTTP/2 client (shared/h2client)
// instead of Go's: a call's request leaves in one write (--front=engine).
func NewEngine(certFile, keyFile, caFile string) (*Forwarder, error) {
	cfg, err := peerTLS(certFile, keyFile, caFile)
	if err != nil {
		return nil, err
	}
	cfg.NextProtos = []string{"h2"}
	d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}, Config: cfg}
	pool := &h2client.Pool{Options: peerOptions, Dial: func(ctx context.Context, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, err
		}
		if p := c.(*tls.Conn).ConnectionState().NegotiatedProtocol; p != "h2" {
			c.Close()
			return nil, fmt.Errorf("peer %s did not negotiate HTTP/2 (ALPN %q)", addr, p)
		}
		return c, nil
	}}
	return &Forwarder{rt: pool, close: func() { pool.Close() }}, nil
}

// peerTLS is the TLS configuration of connections to peers.
func peerTLS(certFile, keyFile, caFile string) (*tls.Config, error) {
	cfg, err := mtls.ClientConfig(caFile, certFile, keyFile, "")
	if err != nil {
		return nil, fmt.Errorf("peer TLS: %w", err)
	}
	roots := cfg.RootCAs
	// The default verification checks the peer's name against the dialled
	// address; VerifyConnection checks the chain and the relay identity
	// instead.
	cfg.InsecureSkipVerify = true
	cfg.VerifyConnection = func(cs tls.ConnectionState) error { return verifyPeer(cs, roots) }
	return cfg, nil
}

// New returns a Forwarder presenting the relay certificate certFile/keyFile
// and trusting peers whose certificate caFile signed and that carry a relay
// URI SAN. Peers are dialled by address (a pod IP, say), which the
// certificate need not name: the relay URI SAN is what identifies a
// replica.
func New(certFile, keyFile, caFile string) (*Forwarder, error) {
	cfg, err := peerTLS(certFile, keyFile, caFile)
	if err != nil {
		return nil, err
	}
	protos := new(http.Protocols)
	protos.SetHTTP2(true)
	d := &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}
	tr := &http.Transport{
		Protocols:           protos,
		TLSClientConfig:     cfg,
		DialContext:         d.DialContext,
		TLSHandshakeTimeout: 10 * time.Second,
		DisableCompression:  true,
		HTTP2: &http.HTTP2Config{
			// As for tunnels: a stalled client holds at most 1 MiB here.
			MaxReceiveBufferPerStream:     1 << 20,
			MaxReceiveBufferPerConnection: 64 << 20,
			// A peer that vanished without closing is noticed.
			SendPingTimeout: 15 * time.Second,
			PingTimeout:     10 * time.Second,
		},
	}
	return &Forwarder{rt: tr, close: tr.CloseIdleConnections}, nil
}

// verifyPeer checks that the peer's certificate chains to roots, may serve,
// and names a relay.
func verifyPeer(cs tls.ConnectionState, roots *x509.CertPool) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("peer presented no certificate")
	}
	inter := x509.NewCertPool()
	for _, c := range cs.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	leaf := cs.PeerCertificates[0]
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		return fmt.Errorf("peer certificate: %w", err)
	}
	if _, err := mtls.RelayName(leaf); err != nil {
		return fmt.Errorf("peer is not a relay: %w", err)
	}
	return nil
}

// Forward proxies the call r to the replica at addr (host:port) and writes
// its answer to w; headers are set on the forwarded request. If addr
// cannot be reached and unreached returns true for the error, nothing was
// written to w (see tunnel.ProxyCall).
func (f *Forwarder) Forward(ctx context.Context, addr string, w http.ResponseWriter, r *http.Request, headers http.Header, unreached func(error) bool) error {
	if err := tunnel.ProxyCall(ctx, f.rt, addr, w, r, headers, unreached); err != nil {
		return fmt.Errorf("forward to replica %s: %w", addr, err)
	}
	return nil
}

// Close closes the connections to peers.
func (f *Forwarder) Close() { f.close() }
