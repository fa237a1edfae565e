package h2front

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"math/big"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

// testCert is a self-signed ECDSA certificate for 127.0.0.1.
var testCert = sync.OnceValues(func() (tls.Certificate, *x509.CertPool) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "h2front test"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		panic(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		panic(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pool
})

func serverTLS() *tls.Config {
	cert, _ := testCert()
	return &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2"}}
}

func clientTLS() *tls.Config {
	_, pool := testCert()
	return &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", NextProtos: []string{"h2"}}
}

// countConn counts Write calls on the server side of a connection.
type countConn struct {
	net.Conn
	writes     *atomic.Int64
	writeStart atomic.Int64 // UnixNano when the Write in progress began; 0 if none
	closed     chan struct{}
	once       sync.Once
}

func (c *countConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	c.writeStart.Store(time.Now().UnixNano())
	defer c.writeStart.Store(0)
	return c.Conn.Write(p)
}

// waitWriteBlocked waits until a Write has been in progress for d: on a
// client that does not read, the write is then blocked.
func (c *countConn) waitWriteBlocked(t testing.TB, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		if s := c.writeStart.Load(); s != 0 && time.Since(time.Unix(0, s)) >= d {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no server write blocked")
		}
		<-tick.C
	}
}

func (c *countConn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

// countListener wraps accepted connections in countConn and reports them.
type countListener struct {
	net.Listener
	conns chan *countConn
}

func (l *countListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	cc := &countConn{Conn: c, writes: new(atomic.Int64), closed: make(chan struct{})}
	select {
	case l.conns <- cc:
	default:
	}
	return cc, nil
}

// testServer is a Server on a real TLS listener on 127.0.0.1.
type testServer struct {
	srv   *Server
	addr  string
	conns chan *countConn // server-side transports, in accept order
	done  chan error
}

func startServer(t testing.TB, h http.Handler, tweak func(*Server)) *testServer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cl := &countListener{Listener: ln, conns: make(chan *countConn, 64)}
	srv := &Server{Handler: h}
	if tweak != nil {
		tweak(srv)
	}
	ts := &testServer{srv: srv, addr: ln.Addr().String(), conns: cl.conns, done: make(chan error, 1)}
	go func() { ts.done <- srv.Serve(tls.NewListener(cl, serverTLS())) }()
	t.Cleanup(func() {
		_ = srv.Close()
		if err := <-ts.done; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("Serve: %v", err)
		}
	})
	return ts
}

// nextConn returns the next server-side transport accepted.
func (ts *testServer) nextConn(t testing.TB) *countConn {
	select {
	case c := <-ts.conns:
		return c
	case <-time.After(10 * time.Second):
		t.Fatal("no connection accepted")
		return nil
	}
}

// bytesCodec passes []byte messages through unchanged.
type bytesCodec struct{}

func (bytesCodec) Marshal(v any) ([]byte, error) {
	switch m := v.(type) {
	case *[]byte:
		return *m, nil
	case []byte:
		return m, nil
	}
	return nil, errors.New("bytesCodec: not bytes")
}

func (bytesCodec) Unmarshal(data []byte, v any) error {
	m, ok := v.(*[]byte)
	if !ok {
		return errors.New("bytesCodec: not *[]byte")
	}
	*m = append((*m)[:0], data...)
	return nil
}

func (bytesCodec) Name() string { return "bytes" }

// dialGRPC connects a grpc-go client to addr over TLS.
func dialGRPC(t testing.TB, addr string) *grpc.ClientConn {
	cc, err := grpc.NewClient("passthrough:///"+addr,
		grpc.WithTransportCredentials(credentials.NewTLS(clientTLS())),
		grpc.WithDefaultCallOptions(grpc.ForceCodec(bytesCodec{})),
	)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

// rawClient is a hand-driven HTTP/2 client over TLS.
type rawClient struct {
	t    testing.TB
	tc   *tls.Conn
	fr   *http2.Framer // reads from tc, writes to tc
	buf  bytes.Buffer  // frames to write in one go
	bfr  *http2.Framer // writes into buf
	henc *hpack.Encoder
	hbuf bytes.Buffer
}

// dialRaw connects and writes the preface and an empty SETTINGS.
func dialRaw(t testing.TB, addr string) *rawClient {
	tc, err := tls.Dial("tcp", addr, clientTLS())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tc.Close() })
	rc := &rawClient{t: t, tc: tc, fr: http2.NewFramer(tc, tc)}
	rc.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	rc.bfr = http2.NewFramer(&rc.buf, nil)
	rc.bfr.AllowIllegalWrites = true
	rc.henc = hpack.NewEncoder(&rc.hbuf)
	return rc
}

// handshake writes the preface and SETTINGS, reads the server's SETTINGS
// and acknowledges them.
func (rc *rawClient) handshake() {
	rc.buf.WriteString(http2.ClientPreface)
	_ = rc.bfr.WriteSettings()
	rc.flush()
	for {
		f := rc.read()
		if sf, ok := f.(*http2.SettingsFrame); ok && !sf.IsAck() {
			break
		}
	}
	_ = rc.bfr.WriteSettingsAck()
	rc.flush()
}

// flush writes the buffered frames in one write.
func (rc *rawClient) flush() {
	rc.t.Helper()
	_ = rc.tc.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if _, err := rc.tc.Write(rc.buf.Bytes()); err != nil {
		rc.t.Fatalf("raw write: %v", err)
	}
	rc.buf.Reset()
}

func (rc *rawClient) read() http2.Frame {
	rc.t.Helper()
	f, err := rc.readErr()
	if err != nil {
		rc.t.Fatalf("raw read: %v", err)
	}
	return f
}

func (rc *rawClient) readErr() (http2.Frame, error) {
	_ = rc.tc.SetReadDeadline(time.Now().Add(10 * time.Second))
	return rc.fr.ReadFrame()
}

// headerBlock encodes a request for path plus extra fields.
func (rc *rawClient) headerBlock(path string, extra ...string) []byte {
	rc.hbuf.Reset()
	fields := []string{":method", "POST", ":scheme", "https", ":path", path, ":authority", "127.0.0.1", "content-type", "application/grpc"}
	fields = append(fields, extra...)
	for i := 0; i+1 < len(fields); i += 2 {
		_ = rc.henc.WriteField(hpack.HeaderField{Name: fields[i], Value: fields[i+1]})
	}
	return append([]byte(nil), rc.hbuf.Bytes()...)
}

// writeHeaders buffers a HEADERS frame opening stream id.
func (rc *rawClient) writeHeaders(id uint32, endStream bool, block []byte) {
	_ = rc.bfr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block, EndStream: endStream, EndHeaders: true})
}

// expectGoAway reads until a GOAWAY (returned) or the connection ends
// (nil).
func (rc *rawClient) expectGoAway() *http2.GoAwayFrame {
	for {
		f, err := rc.readErr()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				rc.t.Fatalf("timed out waiting for GOAWAY")
			}
			return nil
		}
		if ga, ok := f.(*http2.GoAwayFrame); ok {
			return ga
		}
	}
}

// expectClosed reads until the connection ends, failing on a timeout.
func (rc *rawClient) expectClosed() {
	for {
		_, err := rc.readErr()
		if err == nil {
			continue
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			rc.t.Fatalf("connection not closed: %v", err)
		}
		if errors.Is(err, io.EOF) || strings.Contains(err.Error(), "reset") || strings.Contains(err.Error(), "closed") || errors.Is(err, io.ErrUnexpectedEOF) {
			return
		}
		// Framing errors of a half-read connection also mean it ended.
		return
	}
}

// grpcFrame frames msg as one gRPC length-prefixed message.
func grpcFrame(msg []byte) []byte {
	b := make([]byte, 5+len(msg))
	b[1], b[2], b[3], b[4] = byte(len(msg)>>24), byte(len(msg)>>16), byte(len(msg)>>8), byte(len(msg))
	copy(b[5:], msg)
	return b
}

// withTimeout returns a context ending after d.
func withTimeout(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func tlsServer(c net.Conn) *tls.Conn { return tls.Server(c, serverTLS()) }
