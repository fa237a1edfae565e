package server

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"sync"
	"time"

	"google.golang.org/grpc/credentials"

	"github.com/betcode-dev/betcode/shared/mtls"
)

// splitter accepts TLS connections on the relay's one port and, after the
// handshake, hands a connection with a verified machine certificate (an
// agent) to the tunnel's native gRPC server and every other one (clients,
// and other replicas with a relay certificate) to the HTTP/2 server that
// routes calls. Serving tunnels on grpc-go's own
// transport, rather than through net/http, takes several goroutine hand-offs
// out of every forwarded call.
type splitter struct {
	ln       net.Listener
	cfg      *tls.Config
	log      *slog.Logger
	machines *chanListener
	clients  *chanListener
	wg       sync.WaitGroup
}

func newSplitter(ln net.Listener, cfg *tls.Config, log *slog.Logger) *splitter {
	return &splitter{ln: ln, cfg: cfg, log: log, machines: newChanListener(ln.Addr()), clients: newChanListener(ln.Addr())}
}

// run accepts until the listener is closed.
func (s *splitter) run() {
	defer s.wg.Wait()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			s.machines.Close()
			s.clients.Close()
			return
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.handshake(c)
		}()
	}
}

func (s *splitter) handshake(c net.Conn) {
	tc := tls.Server(c, s.cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := tc.HandshakeContext(ctx); err != nil {
		reason := mtls.DescribeHandshakeError(err)
		if errors.Is(err, context.DeadlineExceeded) {
			reason = "handshake timed out"
		}
		s.log.Warn("relay: refused a connection", "remote", c.RemoteAddr().String(), "reason", reason)
		c.Close()
		return
	}
	// A verified certificate is a machine's unless it is another replica's:
	// a replica forwarding clients' calls goes to the router (which trusts
	// its forwarding headers, see auth.Middleware), like any client.
	state := tc.ConnectionState()
	if _, relay := mtls.PeerRelay(&state); !relay && len(state.VerifiedChains) > 0 {
		s.machines.push(newReadyConn(tc))
		return
	}
	s.clients.push(tc)
}

// chanListener is a net.Listener fed by the splitter.
type chanListener struct {
	addr net.Addr
	ch   chan net.Conn
	done chan struct{}
	once sync.Once
}

func newChanListener(addr net.Addr) *chanListener {
	return &chanListener{addr: addr, ch: make(chan net.Conn), done: make(chan struct{})}
}

func (l *chanListener) push(c net.Conn) {
	select {
	case l.ch <- c:
	case <-l.done:
		c.Close()
	}
}

func (l *chanListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *chanListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *chanListener) Addr() net.Addr { return l.addr }

// handshaken is gRPC transport credentials for connections whose TLS
// handshake is already done: it reports their TLS state so that the machine
// id can be read from the peer's certificate.
type handshaken struct{}

func (handshaken) ServerHandshake(c net.Conn) (net.Conn, credentials.AuthInfo, error) {
	tc, ok := c.(interface{ ConnectionState() tls.ConnectionState }) // *tls.Conn or *readyConn
	if !ok {
		return nil, nil, errors.New("relay: not a TLS connection")
	}
	return c, credentials.TLSInfo{State: tc.ConnectionState(), CommonAuthInfo: credentials.CommonAuthInfo{SecurityLevel: credentials.PrivacyAndIntegrity}}, nil
}

func (handshaken) ClientHandshake(context.Context, string, net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return nil, nil, errors.New("relay: server-side credentials only")
}

func (handshaken) Info() credentials.ProtocolInfo {
	return credentials.ProtocolInfo{SecurityProtocol: "tls"}
}

func (h handshaken) Clone() credentials.TransportCredentials { return h }

func (handshaken) OverrideServerName(string) error { return nil }
