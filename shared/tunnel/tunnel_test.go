package tunnel

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/conntest"
)

// testService is the "agent side" service the calls reach.
type testService struct {
	testpb.UnimplementedTestServiceServer
	cancelled chan struct{}
	started   chan struct{} // gets a value when a "slow" call starts
}

func (s *testService) UnaryCall(ctx context.Context, req *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	grpc.SetHeader(ctx, metadata.Pairs("echo-header", strings.Join(md.Get("x-custom"), ",")))
	if blob := md.Get("x-blob-bin"); len(blob) > 0 {
		grpc.SetHeader(ctx, metadata.Pairs("echo-blob-bin", strings.Join(blob, "|")))
	}
	grpc.SetTrailer(ctx, metadata.Pairs("echo-user", strings.Join(md.Get("x-betcode-user"), ",")))
	switch string(req.GetPayload().GetBody()) {
	case "unavailable": // the agent's own answer, not a broken tunnel
		return nil, status.Error(codes.Unavailable, "agent busy")
	case "long error": // the longest an agent's error gets: a 16 KiB stderr tail, not ASCII
		st, _ := status.New(codes.FailedPrecondition, longErrorMessage).WithDetails(&errdetails.ErrorInfo{Reason: "CLI_FAILED", Domain: "betcode.dev"})
		return nil, st.Err()
	case "fail":
		st, _ := status.New(codes.NotFound, "no such thing").WithDetails(&errdetails.ErrorInfo{Reason: "SESSION_NOT_FOUND", Domain: "betcode.dev"})
		return nil, st.Err()
	case "slow":
		if s.started != nil {
			s.started <- struct{}{}
		}
		<-ctx.Done()
		if s.cancelled != nil {
			close(s.cancelled)
		}
		return nil, ctx.Err()
	}
	return &testpb.SimpleResponse{Payload: req.GetPayload()}, nil
}

func (s *testService) StreamingOutputCall(req *testpb.StreamingOutputCallRequest, stream testpb.TestService_StreamingOutputCallServer) error {
	for _, p := range req.ResponseParameters {
		if err := stream.Send(&testpb.StreamingOutputCallResponse{Payload: &testpb.Payload{Body: make([]byte, p.Size)}}); err != nil {
			return err
		}
	}
	return nil
}

func (s *testService) FullDuplexCall(stream testpb.TestService_FullDuplexCallServer) error {
	for {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := stream.Send(&testpb.StreamingOutputCallResponse{Payload: req.Payload}); err != nil {
			return err
		}
	}
}

// harness wires client → relay-style HTTP/2 proxy → yamux over transport →
// agent-style grpc.Server.
type harness struct {
	client testpb.TestServiceClient
	svc    *testService
}

// The three ways a call can cross the tunnel.
var modes = []string{"frames", "http2-native", "http2-handler"}

func newHarness(t *testing.T, transport, mode string) *harness {
	t.Helper()
	svc := &testService{}
	gs := grpc.NewServer()
	testpb.RegisterTestServiceServer(gs, svc)

	relayConn, agentConn := transportPair(t, transport)
	client := NewClient(relayConn, mode != "frames")
	srv := &Server{Handler: gs, Remote: "relay"}
	if mode == "http2-native" {
		srv.Native = gs
	}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.ServeConn(context.Background(), agentConn)
	}()
	t.Cleanup(func() {
		client.Close()
		agentConn.Close()
		gs.Stop()
		<-served
	})
	cc := startFront(t, client)
	return &harness{client: testpb.NewTestServiceClient(cc), svc: svc}
}

// startFront serves HTTP/2 (cleartext) on loopback, forwarding every call
// through client as the relay does (the relay's identity header set), and
// returns a gRPC client of it. Both close when the test ends.
func startFront(t *testing.T, client *Client) *grpc.ClientConn {
	t.Helper()
	proxy := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = client.Forward(r.Context(), w, r, "req-1", http.Header{"x-betcode-user": {"alice"}})
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: proxy, Protocols: new(http.Protocols)}
	hs.Protocols.SetUnencryptedHTTP2(true)
	go hs.Serve(ln)
	cc, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cc.Close()
		hs.Close()
	})
	return cc
}

// transportPair returns the two ends of the byte transport yamux runs on.
func transportPair(t *testing.T, kind string) (net.Conn, net.Conn) {
	switch kind {
	case "pipe":
		return net.Pipe()
	case "tcp":
		return conntest.TCPPair(t)
	case "grpc-stream":
		return grpcStreamPair(t)
	}
	t.Fatalf("unknown transport %q", kind)
	return nil, nil
}

// tunnelServer is a minimal TunnelService whose OpenTunnel hands the stream
// over as a Conn.
type tunnelServer struct {
	pb.UnimplementedTunnelServiceServer
	conns chan net.Conn
}

func (s *tunnelServer) OpenTunnel(stream pb.TunnelService_OpenTunnelServer) error {
	ctx, cancel := context.WithCancel(stream.Context())
	s.conns <- NewConn(stream, cancel, Addr("relay"), Addr("agent"))
	<-ctx.Done()
	return nil
}

// grpcStreamPair runs a real OpenTunnel stream over loopback TCP.
func grpcStreamPair(t *testing.T) (relaySide, agentSide net.Conn) {
	ts := &tunnelServer{conns: make(chan net.Conn, 1)}
	gs := grpc.NewServer()
	pb.RegisterTunnelServiceServer(gs, ts)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go gs.Serve(ln)
	cc, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	st, err := pb.NewTunnelServiceClient(cc).OpenTunnel(ctx)
	if err != nil {
		t.Fatal(err)
	}
	agent := NewConn(st, cancel, Addr("agent"), Addr("relay"))
	// The stream reaches the server on its first frame.
	if _, err := agent.Write([]byte{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		cc.Close()
		gs.Stop()
	})
	return <-ts.conns, agent
}

type forwardCase struct{ transport, mode string }

// forwardCases is every mode on a real OpenTunnel stream, and the frame
// protocol on the other transports too.
func forwardCases() []forwardCase {
	var out []forwardCase
	for _, m := range modes {
		out = append(out, forwardCase{"grpc-stream", m})
	}
	// net.Pipe has no buffer: an HTTP/2 client and server both write their
	// settings first, so only the yamux mode runs on it.
	return append(out, forwardCase{"pipe", "frames"}, forwardCase{"tcp", "frames"}, forwardCase{"tcp", "http2-native"})
}

func TestForwardedCalls(t *testing.T) {
	for _, tc := range forwardCases() {
		t.Run(tc.transport+"/"+tc.mode, func(t *testing.T) {
			checkForwardedCalls(t, newHarness(t, tc.transport, tc.mode))
		})
	}
}

// checkForwardedCalls makes every kind of call through h and checks what
// its client sees.
func checkForwardedCalls(t *testing.T, h *harness) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	t.Run("unary with metadata both ways", func(t *testing.T) {
		var hdr, tr metadata.MD
		ctx := metadata.AppendToOutgoingContext(ctx, "x-custom", "v1", "x-betcode-user", "mallory")
		resp, err := h.client.UnaryCall(ctx, &testpb.SimpleRequest{Payload: &testpb.Payload{Body: []byte("hello")}}, grpc.Header(&hdr), grpc.Trailer(&tr))
		if err != nil {
			t.Fatal(err)
		}
		if string(resp.Payload.Body) != "hello" {
			t.Errorf("body %q", resp.Payload.Body)
		}
		if got := hdr.Get("echo-header"); len(got) != 1 || got[0] != "v1" {
			t.Errorf("response header echo = %v", got)
		}
		if got := tr.Get("echo-user"); len(got) != 1 || got[0] != "alice" {
			t.Errorf("the relay's identity must override the client's: trailer = %v", got)
		}
	})
	t.Run("status and details pass through", func(t *testing.T) {
		_, err := h.client.UnaryCall(ctx, &testpb.SimpleRequest{Payload: &testpb.Payload{Body: []byte("fail")}})
		st := status.Convert(err)
		if st.Code() != codes.NotFound || st.Message() != "no such thing" || len(st.Details()) != 1 {
			t.Fatalf("got %v (details %v)", err, st.Details())
		}
	})
	t.Run("server streaming", func(t *testing.T) {
		req := &testpb.StreamingOutputCallRequest{}
		for i := 0; i < 500; i++ {
			req.ResponseParameters = append(req.ResponseParameters, &testpb.ResponseParameters{Size: int32(i % 100)})
		}
		s, err := h.client.StreamingOutputCall(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for {
			m, err := s.Recv()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(m.Payload.Body) != n%100 {
				t.Fatalf("message %d has %d bytes", n, len(m.Payload.Body))
			}
			n++
		}
		if n != 500 {
			t.Fatalf("got %d messages", n)
		}
	})
	t.Run("bidi", func(t *testing.T) {
		s, err := h.client.FullDuplexCall(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 50; i++ {
			body := []byte(strings.Repeat("x", i))
			if err := s.Send(&testpb.StreamingOutputCallRequest{Payload: &testpb.Payload{Body: body}}); err != nil {
				t.Fatal(err)
			}
			m, err := s.Recv()
			if err != nil || len(m.Payload.Body) != i {
				t.Fatalf("echo %d: %v %v", i, m, err)
			}
		}
		s.CloseSend()
		if _, err := s.Recv(); !errors.Is(err, io.EOF) {
			t.Fatalf("after half-close: %v", err)
		}
	})
	t.Run("deadline and cancellation reach the agent", func(t *testing.T) {
		h.svc.cancelled = make(chan struct{})
		dctx, dcancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer dcancel()
		_, err := h.client.UnaryCall(dctx, &testpb.SimpleRequest{Payload: &testpb.Payload{Body: []byte("slow")}})
		if status.Code(err) != codes.DeadlineExceeded {
			t.Fatalf("got %v", err)
		}
		select {
		case <-h.svc.cancelled:
		case <-ctx.Done():
			t.Fatal("the agent-side handler was never cancelled")
		}
	})
}

func TestInvoke(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			svc := &testService{}
			gs := grpc.NewServer()
			defer gs.Stop()
			testpb.RegisterTestServiceServer(gs, svc)
			a, b := transportPair(t, "grpc-stream")
			client := NewClient(a, mode != "frames")
			defer client.Close()
			srv := &Server{Handler: gs, Remote: "relay"}
			if mode == "http2-native" {
				srv.Native = gs
			}
			served := make(chan struct{})
			go func() {
				defer close(served)
				_ = srv.ServeConn(context.Background(), b)
			}()
			defer func() { b.Close(); <-served }()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			tests := []struct {
				body string
				code int
			}{{"hello", 0}, {"fail", int(codes.NotFound)}}
			for _, tt := range tests {
				req, _ := proto.Marshal(&testpb.SimpleRequest{Payload: &testpb.Payload{Body: []byte(tt.body)}})
				res, err := client.Invoke(ctx, "r1", "grpc.testing.TestService", "UnaryCall", nil, req)
				if err != nil {
					t.Fatal(err)
				}
				if res.Code != tt.code {
					t.Fatalf("%s: code %d (%s), want %d", tt.body, res.Code, res.Message, tt.code)
				}
				if tt.code == 0 {
					var resp testpb.SimpleResponse
					if err := proto.Unmarshal(res.Response, &resp); err != nil || string(resp.Payload.Body) != tt.body {
						t.Fatalf("response %v %v", &resp, err)
					}
				} else if res.Message != "no such thing" {
					t.Fatalf("message %q", res.Message)
				}
			}
		})
	}
}

func TestTunnelLossMidCallIsTunnelDisconnected(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			svc := &testService{started: make(chan struct{}, 1)}
			gs := grpc.NewServer()
			defer gs.Stop()
			testpb.RegisterTestServiceServer(gs, svc)
			a, b := transportPair(t, "grpc-stream")
			client := NewClient(a, mode != "frames")
			defer client.Close()
			srv := &Server{Handler: gs, Remote: "relay"}
			if mode == "http2-native" {
				srv.Native = gs
			}
			served := make(chan struct{})
			go func() {
				defer close(served)
				_ = srv.ServeConn(context.Background(), b)
			}()
			defer func() { <-served }()
			proxy := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_ = client.Forward(r.Context(), w, r, "r", nil)
			})
			ln, _ := net.Listen("tcp", "127.0.0.1:0")
			hs := &http.Server{Handler: proxy, Protocols: new(http.Protocols)}
			hs.Protocols.SetUnencryptedHTTP2(true)
			go hs.Serve(ln)
			defer hs.Close()
			cc, _ := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
			defer cc.Close()
			go func() {
				<-svc.started
				b.Close() // the machine's tunnel goes away mid-call
			}()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			_, err := testpb.NewTestServiceClient(cc).UnaryCall(ctx, &testpb.SimpleRequest{Payload: &testpb.Payload{Body: []byte("slow")}})
			st := status.Convert(err)
			var reason string
			for _, d := range st.Details() {
				if ei, ok := d.(*errdetails.ErrorInfo); ok {
					reason = ei.Reason
				}
			}
			if st.Code() != codes.Unavailable || reason != "TUNNEL_DISCONNECTED" {
				t.Fatalf("got %v (reason %q), want UNAVAILABLE / TUNNEL_DISCONNECTED", err, reason)
			}
		})
	}
}

func TestParseTimeout(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"100m", 100 * time.Millisecond, true},
		{"5S", 5 * time.Second, true},
		{"2H", 2 * time.Hour, true},
		{"3M", 3 * time.Minute, true},
		{"7u", 7 * time.Microsecond, true},
		{"99999999n", 99999999, true},
		{"", 0, false},
		{"m", 0, false},
		{"10x", 0, false},
		{"-1S", 0, false},
		{"123456789S", 0, false}, // more than 8 digits
	}
	for _, tt := range tests {
		got, ok := parseTimeout(tt.in)
		if got != tt.want || ok != tt.ok {
			t.Errorf("parseTimeout(%q) = %v, %v; want %v, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}
