package grpcstream

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"errors"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/betcode-dev/betcode/relay/internal/grpcerr"
	"github.com/betcode-dev/betcode/relay/internal/h2front"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/leakcheck"
)

// tunnels is a TunnelService whose OpenTunnel runs open (each test sets
// it) and whose Register answers.
type tunnels struct {
	pb.UnimplementedTunnelServiceServer
	open func(pb.TunnelService_OpenTunnelServer) error
}

func (s *tunnels) OpenTunnel(st pb.TunnelService_OpenTunnelServer) error { return s.open(st) }

func (s *tunnels) Register(ctx context.Context, req *pb.RegisterRequest) (*pb.RegisterResponse, error) {
	return &pb.RegisterResponse{Accepted: true, Message: "registered " + req.MachineName}, nil
}

// tunnelStream is the typed OpenTunnel stream over a ServerStream.
type tunnelStream = Typed[pb.TunnelFrame, pb.TunnelFrame]

// pki is a CA, a server certificate for 127.0.0.1 and a client
// certificate named "machine-1".
type pki struct {
	pool   *x509.CertPool
	server tls.Certificate
	client tls.Certificate
}

func newPKI(t testing.TB) *pki {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	leaf := func(serial int64, cn string, eku x509.ExtKeyUsage) tls.Certificate {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{eku},
			IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	}
	p := &pki{pool: x509.NewCertPool(), server: leaf(2, "relay", x509.ExtKeyUsageServerAuth), client: leaf(3, "machine-1", x509.ExtKeyUsageClientAuth)}
	p.pool.AddCert(ca)
	return p
}

// start serves srv's OpenTunnel with Handler on the relay's HTTP/2 server
// (every other method on grpc-go's ServeHTTP) and returns its address.
func start(t testing.TB, p *pki, srv *tunnels) string {
	t.Helper()
	gs := grpc.NewServer()
	pb.RegisterTunnelServiceServer(gs, srv)
	front := &h2front.Server{Handler: Handler(pb.TunnelService_OpenTunnel_FullMethodName, func(ss *ServerStream) error {
		return srv.OpenTunnel(tunnelStream{ss})
	}, gs)}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{p.server}, ClientCAs: p.pool, ClientAuth: tls.VerifyClientCertIfGiven, NextProtos: []string{"h2"}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = front.Serve(tls.NewListener(ln, cfg))
	}()
	t.Cleanup(func() {
		_ = front.Close()
		<-done
		gs.Stop()
	})
	return ln.Addr().String()
}

// dial is a grpc-go client with the client certificate.
func dial(t testing.TB, p *pki, addr string) pb.TunnelServiceClient {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{
		RootCAs: p.pool, Certificates: []tls.Certificate{p.client}, ServerName: "127.0.0.1"})))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return pb.NewTunnelServiceClient(cc)
}

// h2Transport is net/http's client speaking only HTTP/2 (its stream
// window: 4 MiB).
func h2Transport(cfg *tls.Config) *http.Transport {
	tr := &http.Transport{TLSClientConfig: cfg, ForceAttemptHTTP2: true, Protocols: new(http.Protocols)}
	tr.Protocols.SetHTTP2(true)
	return tr
}

func ctxFor(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func data(b []byte) *pb.TunnelFrame {
	return &pb.TunnelFrame{Payload: &pb.TunnelFrame_Stream{Stream: &pb.StreamFrame{Data: b}}}
}

// TestStream: a grpc-go client's bidirectional stream works as on
// grpc-go's server: messages both ways in order, the handler sees the
// request's metadata (binary values decoded) and the client's verified
// certificate, the client sees the handler's header and trailer metadata
// and a clean end.
func TestStream(t *testing.T) {
	leakcheck.Goroutines(t)
	p := newPKI(t)
	var got struct {
		md   metadata.MD
		peer *peer.Peer
	}
	addr := start(t, p, &tunnels{open: func(st pb.TunnelService_OpenTunnelServer) error {
		got.md, _ = metadata.FromIncomingContext(st.Context())
		got.peer, _ = peer.FromContext(st.Context())
		if err := st.SetHeader(metadata.Pairs("x-hello", "1")); err != nil {
			return err
		}
		st.SetTrailer(metadata.Pairs("x-bye", "2"))
		for {
			f, err := st.Recv()
			if errors.Is(err, io.EOF) {
				return nil
			}
			if err != nil {
				return err
			}
			if err := st.Send(f); err != nil {
				return err
			}
		}
	}})
	ctx := metadata.AppendToOutgoingContext(ctxFor(t), "x-handover", "1", "x-key-bin", string([]byte{0, 1, 2}))
	st, err := dial(t, p, addr).OpenTunnel(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i, size := range []int{0, 1, 100, 70 << 10, 256 << 10} {
		msg := bytes.Repeat([]byte{byte(i + 1)}, size)
		if err := st.Send(data(msg)); err != nil {
			t.Fatal(err)
		}
		f, err := st.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(f.GetStream().GetData(), msg) {
			t.Fatalf("message %d: %d bytes back, want %d", i, len(f.GetStream().GetData()), size)
		}
	}
	if err := st.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); err != io.EOF {
		t.Fatalf("end of the stream: %v, want io.EOF (status OK)", err)
	}
	if h, _ := st.Header(); strings.Join(h.Get("x-hello"), ",") != "1" {
		t.Errorf("header metadata %v", h)
	}
	if tr := st.Trailer(); strings.Join(tr.Get("x-bye"), ",") != "2" {
		t.Errorf("trailer metadata %v", tr)
	}
	if v := got.md.Get("x-handover"); len(v) != 1 || v[0] != "1" {
		t.Errorf("handler's metadata x-handover %v", v)
	}
	if v := got.md.Get("x-key-bin"); len(v) != 1 || v[0] != string([]byte{0, 1, 2}) {
		t.Errorf("handler's binary metadata %q", v)
	}
	info, ok := got.peer.AuthInfo.(credentials.TLSInfo)
	if !ok || len(info.State.VerifiedChains) == 0 || info.State.VerifiedChains[0][0].Subject.CommonName != "machine-1" {
		t.Errorf("handler's peer %+v: want the verified client certificate machine-1", got.peer)
	}
	if !strings.HasPrefix(got.peer.Addr.String(), "127.0.0.1:") {
		t.Errorf("peer address %v", got.peer.Addr)
	}
}

// TestStatus: the handler's error reaches the client with its code,
// message and BetCode error detail, whether or not messages went first;
// every other method is served by the next handler.
func TestStatus(t *testing.T) {
	leakcheck.Goroutines(t)
	p := newPKI(t)
	for _, sendFirst := range []bool{false, true} {
		addr := start(t, p, &tunnels{open: func(st pb.TunnelService_OpenTunnelServer) error {
			if sendFirst {
				if err := st.Send(data([]byte("hi"))); err != nil {
					return err
				}
			}
			return grpcerr.Status(codes.PermissionDenied, "MACHINE_REVOKED", "machine \"m\" was revoked: 100% gone ✓", nil).Err()
		}})
		st, err := dial(t, p, addr).OpenTunnel(ctxFor(t))
		if err != nil {
			t.Fatal(err)
		}
		if sendFirst {
			if _, err := st.Recv(); err != nil {
				t.Fatal(err)
			}
		}
		_, err = st.Recv()
		s := status.Convert(err)
		if s.Code() != codes.PermissionDenied || s.Message() != "machine \"m\" was revoked: 100% gone ✓" {
			t.Errorf("sent first %v: status %v %q", sendFirst, s.Code(), s.Message())
		}
		var reason string
		for _, d := range s.Details() {
			if ei, ok := d.(*errdetails.ErrorInfo); ok {
				reason = ei.Reason
			}
		}
		if reason != "MACHINE_REVOKED" {
			t.Errorf("sent first %v: BetCode error %q, want MACHINE_REVOKED", sendFirst, reason)
		}
		resp, err := dial(t, p, addr).Register(ctxFor(t), &pb.RegisterRequest{MachineName: "m"})
		if err != nil || resp.Message != "registered m" {
			t.Errorf("Register through the next handler: %v, %v", resp, err)
		}
	}
}

// TestBadRequests: a malformed request body (a hostile or broken client)
// ends the call with a clear status, never a crash; so do a request that
// is not gRPC and one with compression.
func TestBadRequests(t *testing.T) {
	leakcheck.Goroutines(t)
	p := newPKI(t)
	recvErr := make(chan error, 1)
	addr := start(t, p, &tunnels{open: func(st pb.TunnelService_OpenTunnelServer) error {
		for {
			if _, err := st.Recv(); err != nil {
				recvErr <- err
				if errors.Is(err, io.EOF) {
					return nil
				}
				return err
			}
		}
	}})
	tr := h2Transport(&tls.Config{RootCAs: p.pool, ServerName: "127.0.0.1", Certificates: []tls.Certificate{p.client}})
	t.Cleanup(tr.CloseIdleConnections)
	prefix := func(flag byte, n uint32) []byte {
		b := []byte{flag, 0, 0, 0, 0}
		binary.BigEndian.PutUint32(b[1:], n)
		return b
	}
	good, _ := proto.Marshal(data([]byte("x")))
	tests := []struct {
		name     string
		body     []byte
		header   map[string]string
		httpCode int
		code     codes.Code
		recv     string // what the handler's Recv says
	}{
		{"clean end", append(prefix(0, uint32(len(good))), good...), nil, 200, codes.OK, "EOF"},
		{"compressed flag", append(prefix(1, 1), 0), nil, 200, codes.Internal, "compressed"},
		{"unknown flag", append(prefix(7, 1), 0), nil, 200, codes.Internal, "flag"},
		{"larger than 4 MiB", prefix(0, MaxRecvMsgSize+1), nil, 200, codes.ResourceExhausted, "larger than max"},
		{"truncated prefix", []byte{0, 0}, nil, 200, codes.Internal, "inside a message prefix"},
		{"truncated message", append(prefix(0, 100), 1, 2, 3), nil, 200, codes.Internal, "inside a message"},
		{"not protobuf", append(prefix(0, 3), 0xff, 0xff, 0xff), nil, 200, codes.Internal, "unmarshal"},
		{"compression asked", nil, map[string]string{"Grpc-Encoding": "gzip"}, 200, codes.Unimplemented, ""},
		{"not gRPC", nil, map[string]string{"Content-Type": "text/plain"}, 415, 0, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequestWithContext(ctxFor(t), http.MethodPost, "https://"+addr+"/betcode.v1.TunnelService/OpenTunnel", bytes.NewReader(tc.body))
			req.Header.Set("Content-Type", "application/grpc")
			for k, v := range tc.header {
				req.Header.Set(k, v)
			}
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.httpCode {
				t.Fatalf("HTTP status %d, want %d", resp.StatusCode, tc.httpCode)
			}
			if tc.httpCode != 200 {
				return
			}
			gs := resp.Trailer.Get("Grpc-Status")
			if gs == "" {
				gs = resp.Header.Get("Grpc-Status")
			}
			if gs != strconv.Itoa(int(tc.code)) {
				t.Errorf("grpc-status %q, want %d", gs, tc.code)
			}
			if tc.recv == "" {
				return
			}
			err = <-recvErr
			if !strings.Contains(errString(err), tc.recv) {
				t.Errorf("handler's Recv: %v, want it to say %q", err, tc.recv)
			}
		})
	}
}

func errString(err error) string {
	if errors.Is(err, io.EOF) {
		return "EOF"
	}
	return err.Error()
}

// TestPeerThatTakesNothing: a handler whose sender is held by the peer's
// flow control (the peer stopped reading) still ends: the stream is reset
// and the held send fails, nothing is left running.
func TestPeerThatTakesNothing(t *testing.T) {
	leakcheck.Goroutines(t)
	p := newPKI(t)
	sendErr := make(chan error, 1)
	addr := start(t, p, &tunnels{open: func(st pb.TunnelService_OpenTunnelServer) error {
		sent := make(chan struct{})
		go func() {
			msg := data(make([]byte, 64<<10))
			for i := 0; ; i++ {
				if i == 63 {
					// 63 messages fill most of the client's 4 MiB
					// stream window: this one blocks.
					close(sent)
				}
				if err := st.Send(msg); err != nil {
					sendErr <- err
					return
				}
			}
		}()
		<-sent
		return nil
	}})
	tr := h2Transport(&tls.Config{RootCAs: p.pool, ServerName: "127.0.0.1"})
	t.Cleanup(tr.CloseIdleConnections)
	pr, pw := io.Pipe()
	t.Cleanup(func() { pw.Close() })
	req, _ := http.NewRequestWithContext(ctxFor(t), http.MethodPost, "https://"+addr+"/betcode.v1.TunnelService/OpenTunnel", pr)
	req.Header.Set("Content-Type", "application/grpc")
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	// The response is never read: the sender fills the stream's window
	// and blocks; the handler has returned.
	select {
	case err := <-sendErr:
		if err == nil {
			t.Fatal("the held send succeeded")
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the held send never failed: the handler is stuck behind it")
	}
}

// TestDetach: a handler that detaches its call returns at once, and the
// call goes on without it: messages both ways after it returned, then the
// status its holder ends it with; a call whose client goes away while
// detached ends its context, and its holder's end leaves nothing running.
func TestDetach(t *testing.T) {
	leakcheck.Goroutines(t)
	p := newPKI(t)
	type held struct {
		st  tunnelStream
		end func(error)
	}
	calls := make(chan held, 2)
	returned := make(chan struct{}, 2)
	addr := start(t, p, &tunnels{open: func(st pb.TunnelService_OpenTunnelServer) error {
		defer func() { returned <- struct{}{} }()
		ts := st.(tunnelStream)
		end, ok := ts.Detach()
		if !ok {
			return status.Error(codes.Internal, "h2front cannot detach")
		}
		calls <- held{ts, end}
		return status.Error(codes.Internal, "a detached handler's error is not the status")
	}})

	st, err := dial(t, p, addr).OpenTunnel(ctxFor(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(data([]byte("ping"))); err != nil {
		t.Fatal(err)
	}
	h := <-calls
	<-returned
	f, err := h.st.Recv()
	if err != nil || string(f.GetStream().GetData()) != "ping" {
		t.Fatalf("detached Recv: %v, %v", f, err)
	}
	if err := h.st.Send(data([]byte("pong"))); err != nil {
		t.Fatal(err)
	}
	if f, err := st.Recv(); err != nil || string(f.GetStream().GetData()) != "pong" {
		t.Fatalf("client Recv: %v, %v", f, err)
	}
	h.end(grpcerr.Status(codes.Unavailable, "RELAY_DRAINING", "draining", nil).Err())
	h.end(nil) // a second end does nothing
	if _, err := st.Recv(); status.Code(err) != codes.Unavailable {
		t.Fatalf("the call's end: %v, want the holder's UNAVAILABLE", err)
	}

	// The client goes away: the detached call's context ends.
	ctx, cancel := context.WithCancel(ctxFor(t))
	st2, err := dial(t, p, addr).OpenTunnel(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := st2.Send(data([]byte("x"))); err != nil {
		t.Fatal(err)
	}
	h = <-calls
	<-returned
	cancel()
	select {
	case <-h.st.Context().Done():
	case <-time.After(10 * time.Second):
		t.Fatal("a detached call's context outlived its client")
	}
	h.end(nil)
}

// FuzzRecvMsg: whatever a peer sends as the request body, RecvMsg returns
// messages, then io.EOF or a status error; it never panics.
func FuzzRecvMsg(f *testing.F) {
	good, _ := proto.Marshal(data([]byte("hello")))
	f.Add(append([]byte{0, 0, 0, 0, byte(len(good))}, good...))
	f.Add([]byte{1, 0, 0, 0, 1, 0})
	f.Add([]byte{0, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{0, 0, 0, 0, 3, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, body []byte) {
		req := httptest.NewRequest(http.MethodPost, "/betcode.v1.TunnelService/OpenTunnel", bytes.NewReader(body))
		s := &ServerStream{w: httptest.NewRecorder(), body: req.Body, ctx: req.Context(), sem: make(chan struct{}, 1)}
		for range 1000 {
			var m pb.TunnelFrame
			err := s.RecvMsg(&m)
			if errors.Is(err, io.EOF) {
				return
			}
			if err != nil {
				if _, ok := status.FromError(err); !ok {
					t.Fatalf("RecvMsg: %v is not a status", err)
				}
				return
			}
		}
	})
}
