// Package tunnelfleet holds many idle machine tunnels open against a relay
// at little cost on the agents' side, for the relay's scale benchmarks.
//
// Each simulated agent is one TLS connection with its own machine
// certificate, carrying HTTP/2 (net/http's client on that one connection,
// not grpc-go: a grpc.ClientConn per agent costs several times the relay's
// own share): a Register call, then an OpenTunnel stream held open until
// the connection ends. The relay sees exactly what agent/relaylink sends for
// an idle tunnel. The agents do not serve calls.
//
// Connections leave from several loopback source addresses (127.0.0.2,
// 127.0.0.3, …) so that more than one address's ~28,000 ephemeral ports
// are available. When Reconnect is set, an agent whose tunnel ends dials
// again after a full-jitter backoff (uniform in [0, min(Cap, Base·2^k)]).
package tunnelfleet

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/tunnel"
)

// Options configure a Fleet.
type Options struct {
	// Relay is the relay's host:port.
	Relay string
	// Configs holds one client TLS config (machine certificate) per agent.
	Configs []*tls.Config
	// Sources is the number of loopback source addresses, from 127.0.0.2
	// (default 1 per 20,000 agents, at least 1).
	Sources int
	// Parallel bounds the connection attempts in flight (default 64).
	Parallel int
	// Reconnect makes agents dial again after their tunnel ends.
	Reconnect bool
	// Base and Cap shape the full-jitter backoff (defaults 1 s and 30 s).
	Base, Cap time.Duration
	// Timeout bounds one connection attempt, from dial to the relay's
	// first heartbeat (default 20 s).
	Timeout time.Duration
}

// Fleet is a set of simulated agents.
type Fleet struct {
	opt   Options
	sem   chan struct{}
	up    atomic.Int64 // tunnels confirmed by the relay right now
	dials atomic.Int64 // connection attempts
	fails atomic.Int64 // failed attempts
	last  atomic.Pointer[error]

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// New returns a fleet; Run starts it.
func New(opt Options) *Fleet {
	if opt.Sources <= 0 {
		opt.Sources = max(1, (len(opt.Configs)+19999)/20000)
	}
	if opt.Parallel <= 0 {
		opt.Parallel = 64
	}
	if opt.Base <= 0 {
		opt.Base = time.Second
	}
	if opt.Cap <= 0 {
		opt.Cap = 30 * time.Second
	}
	if opt.Timeout <= 0 {
		opt.Timeout = 20 * time.Second
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Fleet{opt: opt, sem: make(chan struct{}, opt.Parallel), ctx: ctx, cancel: cancel}
}

// Up is the number of tunnels the relay has confirmed and that are still open.
func (f *Fleet) Up() int { return int(f.up.Load()) }

// Dials is the number of connection attempts so far.
func (f *Fleet) Dials() int { return int(f.dials.Load()) }

// Failures is the number of failed connection attempts so far.
func (f *Fleet) Failures() int { return int(f.fails.Load()) }

// LastError is the latest failed attempt's error, or nil.
func (f *Fleet) LastError() error {
	if p := f.last.Load(); p != nil {
		return *p
	}
	return nil
}

// Run starts one goroutine per agent. Without Reconnect, an agent whose
// attempt failed stays down (Failures and LastError count it).
func (f *Fleet) Run() {
	for i := range f.opt.Configs {
		f.wg.Go(func() { f.agent(i) })
	}
}

// WaitUp waits until n tunnels are up or ctx ends.
func (f *Fleet) WaitUp(ctx context.Context, n int) error {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for f.Up() < n {
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d of %d tunnels up (%d attempts, %d failed): %w", f.Up(), n, f.Dials(), f.Failures(), ctx.Err())
		case <-t.C:
		}
	}
	return nil
}

// Close ends every tunnel and waits for the agents' goroutines.
func (f *Fleet) Close() {
	f.cancel()
	f.wg.Wait()
}

// source returns agent i's local address.
func (f *Fleet) source(i int) *net.TCPAddr {
	ip := netip.AddrFrom4([4]byte{127, 0, 0, byte(2 + i%f.opt.Sources)})
	return net.TCPAddrFromAddrPort(netip.AddrPortFrom(ip, 0))
}

func (f *Fleet) agent(i int) {
	attempt := 0
	for f.ctx.Err() == nil {
		select {
		case f.sem <- struct{}{}:
		case <-f.ctx.Done():
			return
		}
		f.dials.Add(1)
		t, err := f.open(i)
		<-f.sem
		if err == nil {
			attempt = 0
			f.up.Add(1)
			t.wait(f.ctx)
			f.up.Add(-1)
		} else {
			f.fails.Add(1)
			f.last.Store(&err)
			attempt++
		}
		if !f.opt.Reconnect {
			// Hold nothing more: an agent that failed stays down.
			if err == nil {
				return
			}
			<-f.ctx.Done()
			return
		}
		d := min(f.opt.Cap, f.opt.Base<<min(attempt, 20))
		wait := time.Duration(rand.Int64N(int64(d) + 1))
		tm := time.NewTimer(wait)
		select {
		case <-f.ctx.Done():
			tm.Stop()
			return
		case <-tm.C:
		}
	}
}

// link is one agent's open tunnel.
type link struct {
	conn net.Conn
	cc   *http.ClientConn
	body io.ReadCloser  // the OpenTunnel response stream
	req  *io.PipeWriter // the OpenTunnel request stream, never written
}

// wait blocks until the tunnel ends or ctx does, then closes it.
func (l *link) wait(ctx context.Context) {
	stop := context.AfterFunc(ctx, func() { l.conn.Close() })
	defer stop()
	var buf [512]byte
	for {
		if _, err := l.body.Read(buf[:]); err != nil {
			break
		}
	}
	l.req.Close()
	l.cc.Close()
	l.conn.Close()
}

// open dials, registers and opens the tunnel of agent i, returning once the
// relay's first heartbeat frame says it routes calls to it.
func (f *Fleet) open(i int) (l *link, err error) {
	ctx, cancel := context.WithTimeout(f.ctx, f.opt.Timeout)
	defer cancel()
	d := net.Dialer{LocalAddr: f.source(i)}
	raw, err := d.DialContext(ctx, "tcp", f.opt.Relay)
	if err != nil {
		return nil, fmt.Errorf("dial: %w", err)
	}
	stop := context.AfterFunc(ctx, func() { raw.Close() }) // bounds the whole setup
	defer func() {
		if !stop() || err != nil {
			raw.Close()
			if err == nil {
				err = ctx.Err()
			}
		}
	}()
	conn := tls.Client(raw, f.opt.Configs[i])
	if err := conn.HandshakeContext(ctx); err != nil {
		return nil, fmt.Errorf("TLS handshake: %w", err)
	}
	cc, err := newClientConn(ctx, conn)
	if err != nil {
		return nil, fmt.Errorf("HTTP/2: %w", err)
	}
	reg, err := proto.Marshal(&pb.RegisterRequest{MachineName: "fleet",
		Capabilities: []string{"claude-code", tunnel.CapabilityHTTP2, tunnel.CapabilityDirect},
		Info:         &pb.MachineInfo{Os: "linux", Arch: "amd64", Version: "fleet"}})
	if err != nil {
		return nil, err
	}
	resp, err := cc.RoundTrip(grpcRequest(ctx, f.opt.Relay, pb.TunnelService_Register_FullMethodName, io.NopCloser(bytes.NewReader(tunnel.Frame(reg)))))
	if err != nil {
		return nil, fmt.Errorf("register: %w", err)
	}
	msg, err := readMessage(resp.Body)
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if st := grpcStatus(resp); st != "" {
		return nil, fmt.Errorf("register: %s", st)
	}
	if err != nil {
		return nil, fmt.Errorf("register: %w", err)
	}
	var rr pb.RegisterResponse
	if err := proto.Unmarshal(msg, &rr); err != nil || !rr.Accepted {
		return nil, fmt.Errorf("register refused: %q (%v)", rr.Message, err)
	}

	pr, pw := io.Pipe()
	resp, err = cc.RoundTrip(grpcRequest(f.ctx, f.opt.Relay, pb.TunnelService_OpenTunnel_FullMethodName, pr))
	if err != nil {
		pw.Close()
		return nil, fmt.Errorf("open tunnel: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		pw.Close()
		return nil, fmt.Errorf("open tunnel: HTTP %d", resp.StatusCode)
	}
	msg, err = readMessage(resp.Body)
	if err != nil {
		pw.Close()
		resp.Body.Close()
		if st := grpcStatus(resp); st != "" {
			return nil, fmt.Errorf("open tunnel: %s", st)
		}
		return nil, fmt.Errorf("open tunnel: %w", err)
	}
	var fr pb.TunnelFrame
	if err := proto.Unmarshal(msg, &fr); err != nil || fr.GetHeartbeat() == nil {
		pw.Close()
		resp.Body.Close()
		return nil, fmt.Errorf("open tunnel: the relay's first frame is not a heartbeat (%v)", err)
	}
	l = &link{conn: conn, cc: cc, body: resp.Body, req: pw}
	// A connection that ends (the relay died) ends the body's read.
	cc.SetStateHook(func(cc *http.ClientConn) {
		if cc.Err() != nil {
			go l.body.Close()
		}
	})
	return l, nil
}

// newClientConn starts net/http's HTTP/2 client on conn (TLS done). It
// answers the relay's keepalive pings and sends none of its own, like an
// idle agent between its 30 s pings.
func newClientConn(ctx context.Context, conn net.Conn) (*http.ClientConn, error) {
	protos := new(http.Protocols)
	protos.SetUnencryptedHTTP2(true) // HTTP/2 over conn, whose TLS is done
	t := &http.Transport{
		Protocols:          protos,
		HTTP2:              &http.HTTP2Config{MaxReadFrameSize: 16 << 10},
		DisableCompression: true,
		DialContext: func(context.Context, string, string) (net.Conn, error) {
			if conn == nil {
				return nil, errors.New("tunnelfleet: the connection is used")
			}
			c := conn
			conn = nil
			return c, nil
		},
	}
	return t.NewClientConn(ctx, "http", "relay:80")
}

// grpcRequest is a gRPC call's request. The body must close for real: when
// the connection dies the transport closes it to stop its writer, and only
// then does the response body's Read return (an io.NopCloser around the
// tunnel's pipe left agents hanging on a dead connection).
func grpcRequest(ctx context.Context, host, method string, body io.ReadCloser) *http.Request {
	req := &http.Request{Method: http.MethodPost, URL: &url.URL{Scheme: "http", Host: host, Path: method},
		Header: http.Header{"Content-Type": {"application/grpc"}, "Te": {"trailers"}},
		Body:   body, ContentLength: -1, Host: host}
	return req.WithContext(ctx)
}

// readMessage reads one gRPC message.
func readMessage(r io.Reader) ([]byte, error) {
	var h [5]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(h[1:])
	if n > 1<<20 {
		return nil, errors.New("message of " + strconv.Itoa(int(n)) + " bytes")
	}
	msg := make([]byte, n)
	_, err := io.ReadFull(r, msg)
	return msg, err
}

// grpcStatus returns "code N: message" for a call that failed, else "".
func grpcStatus(resp *http.Response) string {
	code := resp.Trailer.Get("Grpc-Status")
	msg := resp.Trailer.Get("Grpc-Message")
	if code == "" {
		code, msg = resp.Header.Get("Grpc-Status"), resp.Header.Get("Grpc-Message")
	}
	if code == "" || code == "0" {
		return ""
	}
	m, _ := url.PathUnescape(msg)
	return "gRPC code " + code + ": " + m
}
