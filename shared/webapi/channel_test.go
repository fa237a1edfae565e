package webapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// fakeChannels is a ChannelService that checks the caller as the relay
// would (the token, the machine it names) and echoes every message; a
// message "end" ends the call OK, "fail" with UNAVAILABLE.
type fakeChannels struct {
	pb.UnimplementedChannelServiceServer
	mu    sync.Mutex
	md    []metadata.MD
	ended chan string // the method, when a call returns
}

func (f *fakeChannels) check(ctx context.Context) error {
	md, _ := metadata.FromIncomingContext(ctx)
	f.mu.Lock()
	f.md = append(f.md, md)
	f.mu.Unlock()
	if v := md.Get("authorization"); len(v) != 1 || v[0] != "Bearer "+goodToken {
		return status.Error(codes.Unauthenticated, "invalid or revoked token")
	}
	if v := md.Get("x-betcode-machine-id"); len(v) != 1 || v[0] != "m1" {
		return betcodeErr(codes.PermissionDenied, "TOKEN_SCOPE", "this token reaches machine m1 only, not "+strings.Join(v, ","), nil)
	}
	return nil
}

func echo[Req, Resp any](f *fakeChannels, method string, s grpc.BidiStreamingServer[Req, Resp], data func(*Req) []byte, wrap func([]byte) *Resp) error {
	defer func() { f.ended <- method }()
	if err := f.check(s.Context()); err != nil {
		return err
	}
	for {
		m, err := s.Recv()
		if err != nil {
			return err
		}
		switch string(data(m)) {
		case "end":
			return nil
		case "fail":
			return status.Error(codes.Unavailable, "machine m1 is offline")
		}
		if err := s.Send(wrap(data(m))); err != nil {
			return err
		}
	}
}

func (f *fakeChannels) Open(s grpc.BidiStreamingServer[pb.OpenRequest, pb.OpenResponse]) error {
	return echo(f, "Open", s, (*pb.OpenRequest).GetData, func(b []byte) *pb.OpenResponse { return &pb.OpenResponse{Data: b} })
}

func (f *fakeChannels) Pair(s grpc.BidiStreamingServer[pb.PairRequest, pb.PairResponse]) error {
	return echo(f, "Pair", s, (*pb.PairRequest).GetData, func(b []byte) *pb.PairResponse { return &pb.PairResponse{Data: b} })
}

type channelServer struct {
	fake *fakeChannels
	h    *Handler
	url  string // ws://host
}

func newChannelServer(t *testing.T) *channelServer {
	t.Helper()
	fake := &fakeChannels{ended: make(chan string, 16)}
	gs := grpc.NewServer()
	pb.RegisterChannelServiceServer(gs, fake)
	lis := bufconn.Listen(1 << 20)
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = gs.Serve(lis)
	}()
	conn, err := grpc.NewClient("passthrough:///fake",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	h, err := New(Options{Conn: conn, Role: RoleRelay})
	if err != nil {
		t.Fatal(err)
	}
	h.timing.hello = time.Second
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		h.Close()
		srv.Close()
		conn.Close()
		gs.Stop()
		<-served
	})
	return &channelServer{fake: fake, h: h, url: "ws" + strings.TrimPrefix(srv.URL, "http")}
}

func (cs *channelServer) dial(t *testing.T, path string, hdr http.Header) (*websocket.Conn, context.Context) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	c, _, err := websocket.Dial(ctx, cs.url+path, &websocket.DialOptions{HTTPHeader: hdr})
	if err != nil {
		t.Fatal(err)
	}
	c.SetReadLimit(MaxCarrierMessage)
	t.Cleanup(func() { c.CloseNow() })
	return c, ctx
}

func sendHello(t *testing.T, ctx context.Context, c *websocket.Conn, token, machine string) {
	t.Helper()
	b, _ := json.Marshal(map[string]string{"type": "hello", "token": token, "machine": machine})
	if err := c.Write(ctx, websocket.MessageText, b); err != nil {
		t.Fatal(err)
	}
}

// expectClose reads until the socket ends and checks its close code and
// that its reason starts with reason.
func expectClose(t *testing.T, ctx context.Context, c *websocket.Conn, code websocket.StatusCode, reason string) {
	t.Helper()
	for {
		_, _, err := c.Read(ctx)
		if err == nil {
			continue
		}
		var ce websocket.CloseError
		if !errors.As(err, &ce) {
			t.Fatalf("socket ended with %v, want close %d", err, code)
		}
		if ce.Code != code || !strings.HasPrefix(ce.Reason, reason) {
			t.Fatalf("close %d %q, want %d %q…", ce.Code, ce.Reason, code, reason)
		}
		if len(ce.Reason) > maxCloseReason {
			t.Fatalf("close reason of %d bytes", len(ce.Reason))
		}
		return
	}
}

func TestChannelCarrier(t *testing.T) {
	cs := newChannelServer(t)
	for _, path := range []string{"/api/channel", "/api/pair"} {
		t.Run(path, func(t *testing.T) {
			c, ctx := cs.dial(t, path, nil)
			sendHello(t, ctx, c, goodToken, "m1")
			for _, msg := range [][]byte{[]byte("noise 1"), bytes.Repeat([]byte{0xAB}, 65535), {}} {
				if err := c.Write(ctx, websocket.MessageBinary, msg); err != nil {
					t.Fatal(err)
				}
				typ, got, err := c.Read(ctx)
				if err != nil || typ != websocket.MessageBinary || !bytes.Equal(got, msg) {
					t.Fatalf("echo of %d bytes: %v %d bytes, %v", len(msg), typ, len(got), err)
				}
			}
			if err := c.Write(ctx, websocket.MessageBinary, []byte("end")); err != nil {
				t.Fatal(err)
			}
			expectClose(t, ctx, c, websocket.StatusNormalClosure, "")
			want := map[string]string{"/api/channel": "Open", "/api/pair": "Pair"}[path]
			if m := <-cs.fake.ended; m != want {
				t.Fatalf("call %s ended, want %s", m, want)
			}
		})
	}
	cs.fake.mu.Lock()
	md := cs.fake.md[0]
	cs.fake.mu.Unlock()
	if md.Get("authorization")[0] != "Bearer "+goodToken || md.Get("x-betcode-machine-id")[0] != "m1" {
		t.Errorf("the call's metadata: %v", md)
	}
}

func TestChannelCarrierRefusals(t *testing.T) {
	cs := newChannelServer(t)
	long := strings.Repeat("m", 200)
	for _, tc := range []struct {
		name          string
		token, mach   string
		first         func(context.Context, *websocket.Conn) error
		code          websocket.StatusCode
		reason        string
		reachesMethod bool
	}{
		{name: "wrong token", token: "bct_bad", mach: "m1", code: 4401, reason: "UNAUTHENTICATED: invalid or revoked token", reachesMethod: true},
		{name: "another machine", token: goodToken, mach: "m2", code: 4403, reason: "TOKEN_SCOPE: this token reaches machine m1 only", reachesMethod: true},
		{name: "no token", token: "", mach: "m1", code: 4401, reason: "UNAUTHENTICATED"},
		{name: "machine offline", token: goodToken, mach: "m1", code: 4503, reason: "UNAVAILABLE: machine m1 is offline", reachesMethod: true,
			first: func(ctx context.Context, c *websocket.Conn) error {
				return c.Write(ctx, websocket.MessageBinary, []byte("fail"))
			}},
		{name: "text after hello", token: goodToken, mach: "m1", code: websocket.StatusProtocolError, reason: "protocol error", reachesMethod: true,
			first: func(ctx context.Context, c *websocket.Conn) error {
				return c.Write(ctx, websocket.MessageText, []byte("{}"))
			}},
		{name: "message too large", token: goodToken, mach: "m1", code: websocket.StatusMessageTooBig, reachesMethod: true,
			first: func(ctx context.Context, c *websocket.Conn) error {
				return c.Write(ctx, websocket.MessageBinary, make([]byte, MaxCarrierMessage+1))
			}},
		{name: "long reason cut", token: goodToken, mach: long, code: 4403, reason: "TOKEN_SCOPE: this token reaches machine m1 only, not mmm", reachesMethod: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, ctx := cs.dial(t, "/api/channel", nil)
			sendHello(t, ctx, c, tc.token, tc.mach)
			if tc.first != nil {
				if err := tc.first(ctx, c); err != nil {
					t.Fatal(err)
				}
			}
			expectClose(t, ctx, c, tc.code, tc.reason)
			if tc.reachesMethod {
				<-cs.fake.ended // the call ended too
			}
		})
	}
	t.Run("not a hello", func(t *testing.T) {
		c, ctx := cs.dial(t, "/api/channel", nil)
		if err := c.Write(ctx, websocket.MessageBinary, []byte("x")); err != nil {
			t.Fatal(err)
		}
		expectClose(t, ctx, c, websocket.StatusPolicyViolation, "hello expected")
	})
	t.Run("no hello in time", func(t *testing.T) {
		c, ctx := cs.dial(t, "/api/pair", nil)
		expectClose(t, ctx, c, websocket.StatusPolicyViolation, "no hello")
	})
	t.Run("foreign origin", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, resp, err := websocket.Dial(ctx, cs.url+"/api/channel", &websocket.DialOptions{HTTPHeader: http.Header{"Origin": {"https://evil.example"}}})
		if err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
			t.Fatalf("a foreign origin's socket: %v %v", resp, err)
		}
	})
}

// TestChannelCarrierClientCloses: the client's close cancels the call, and
// the handler's Close ends open channels with 1001.
func TestChannelCarrierClientCloses(t *testing.T) {
	cs := newChannelServer(t)
	c, ctx := cs.dial(t, "/api/channel", nil)
	sendHello(t, ctx, c, goodToken, "m1")
	if err := c.Write(ctx, websocket.MessageBinary, []byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Read(ctx); err != nil {
		t.Fatal(err)
	}
	c.Close(websocket.StatusNormalClosure, "")
	select {
	case <-cs.fake.ended:
	case <-ctx.Done():
		t.Fatal("the call is still running after the client closed")
	}

	c2, ctx2 := cs.dial(t, "/api/channel", nil)
	sendHello(t, ctx2, c2, goodToken, "m1")
	if err := c2.Write(ctx2, websocket.MessageBinary, []byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c2.Read(ctx2); err != nil {
		t.Fatal(err)
	}
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		cs.h.Close()
	}()
	expectClose(t, ctx2, c2, websocket.StatusGoingAway, "server shutting down")
	<-closed
	<-cs.fake.ended
}

func TestTruncateReason(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"short", "short"},
		{strings.Repeat("a", 123), strings.Repeat("a", 123)},
		{strings.Repeat("a", 124), strings.Repeat("a", 123)},
		{"a" + strings.Repeat("é", 70), "a" + strings.Repeat("é", 61)}, // 1+122 bytes: é not split
	} {
		if got := truncateReason(tc.in); got != tc.want {
			t.Errorf("truncateReason(%d bytes) = %d bytes %q", len(tc.in), len(got), got)
		}
	}
}
