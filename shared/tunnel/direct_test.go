package tunnel

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/protobuf/proto"
)

// directWorld is a tunnel over a real OpenTunnel stream whose agent serves
// a TestService natively and takes DirectOffers, and a listener standing
// for the relay's direct port.
type directWorld struct {
	svc    *testService
	gs     *grpc.Server
	client *Client
	ln     net.Listener
	dials  atomic.Int32
	// accepted gets each direct connection the "relay" took, or the error
	// AttachDirect gave.
	accepted chan net.Conn
	refused  chan error
	served   chan error // ServeDirect's result
}

func newDirectWorld(t *testing.T) *directWorld { return newDirectWorldVia(t, nil) }

// directEngine makes the direct worlds' relay end carry calls on the
// engine's HTTP/2 client (Client.UseEngine); bothDirectClients sets it.
var directEngine bool

// bothDirectClients runs test once with net/http's HTTP/2 client on the
// direct connection and once with the engine's (--front=engine).
func bothDirectClients(t *testing.T, test func(t *testing.T)) {
	for _, engine := range []bool{false, true} {
		name := "net-http"
		if engine {
			name = "engine"
		}
		t.Run(name, func(t *testing.T) {
			directEngine = engine
			t.Cleanup(func() { directEngine = false })
			test(t)
		})
	}
}

// newDirectWorldVia is newDirectWorld whose agent reaches the "relay"
// through via(address) instead, if via is set.
func newDirectWorldVia(t *testing.T, via func(target string) string) *directWorld {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	svc := &testService{started: make(chan struct{}, 1)}
	gs := grpc.NewServer()
	testpb.RegisterTestServiceServer(gs, svc)
	t.Cleanup(gs.Stop)
	relaySide, agentSide := grpcStreamPair(t)
	rc, ac := relaySide.(*Conn), agentSide.(*Conn)
	w := &directWorld{svc: svc, gs: gs, client: NewClient(rc, true), accepted: make(chan net.Conn, 4), refused: make(chan error, 4), served: make(chan error, 4)}
	t.Cleanup(func() { w.client.Close() })
	w.client.EnableDirect(rc.SendDirectOffer)
	if directEngine {
		w.client.UseEngine()
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	w.ln = ln
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			token := make([]byte, DirectTokenLen)
			if _, err := io.ReadFull(c, token); err != nil {
				c.Close()
				w.refused <- err
				continue
			}
			if err := w.client.AttachDirect(ctx, c, token); err != nil {
				c.Close()
				w.refused <- err
				continue
			}
			w.accepted <- c
		}
	}()

	addr := ln.Addr().String()
	if via != nil {
		addr = via(addr)
	}
	srv := &Server{Handler: gs, Native: gs, Remote: "relay"}
	ac.OnDirectOffer = func(token []byte) {
		go func() {
			w.served <- srv.ServeDirect(ctx, func(ctx context.Context) (net.Conn, error) {
				w.dials.Add(1)
				return (&net.Dialer{}).DialContext(ctx, "tcp", addr)
			}, token, 3)
		}()
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.ServeConn(ctx, ac)
	}()
	t.Cleanup(func() { ac.Close(); <-done })
	return w
}

func (w *directWorld) call(t *testing.T, body string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := proto.Marshal(&testpb.SimpleRequest{Payload: &testpb.Payload{Body: []byte(body)}})
	res, err := w.client.Invoke(ctx, "r", "grpc.testing.TestService", "UnaryCall", nil, req)
	if err != nil {
		t.Fatalf("call %q: %v", body, err)
	}
	var resp testpb.SimpleResponse
	if res.Code != 0 || proto.Unmarshal(res.Response, &resp) != nil || string(resp.Payload.Body) != body {
		t.Fatalf("call %q: code %d %q, body %q", body, res.Code, res.Message, resp.GetPayload().GetBody())
	}
}

// The first call goes over the stream and brings the agent's direct
// connection; later calls go over it. When it fails, calls go back to the
// stream, and the relay does not offer again at once.
func TestDirectConnectionCarriesCallsAndFallsBack(t *testing.T) {
	bothDirectClients(t, testDirectConnectionCarriesCallsAndFallsBack)
}

func testDirectConnectionCarriesCallsAndFallsBack(t *testing.T) {
	w := newDirectWorld(t)
	if w.client.Direct() {
		t.Fatal("direct before any call")
	}
	w.call(t, "first")
	var relayEnd net.Conn
	select {
	case relayEnd = <-w.accepted:
	case err := <-w.refused:
		t.Fatalf("the direct connection was refused: %v", err)
	case err := <-w.served:
		t.Fatalf("the agent gave up on the direct connection: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("no direct connection after the first call")
	}
	if !w.client.Direct() {
		t.Fatal("attached, but calls do not go direct")
	}
	for i := range 10 {
		w.call(t, "direct-"+string(rune('a'+i)))
	}

	relayEnd.Close()
	select {
	case <-w.served: // the agent saw it end
	case <-time.After(20 * time.Second):
		t.Fatal("the agent's direct connection did not end")
	}
	deadline := time.Now().Add(10 * time.Second)
	for w.client.Direct() {
		if time.Now().After(deadline) {
			t.Fatal("the relay still calls over a closed direct connection")
		}
		runtime.Gosched()
	}
	w.call(t, "after") // over the stream again
	if n := w.dials.Load(); n != 1 {
		t.Fatalf("the agent dialed %d times; want 1 (no new offer within DirectReofferAfter)", n)
	}
}

// A connection with a wrong token, or the right one a second time, is not
// attached; the agent gives up after its tries when every connection is
// refused, and calls stay on the stream.
func TestDirectConnectionRefused(t *testing.T) {
	w := newDirectWorld(t)
	if err := w.client.AttachDirect(context.Background(), nil, bytes.Repeat([]byte{7}, DirectTokenLen)); !errors.Is(err, errDirectToken) {
		t.Fatalf("attach with no offer outstanding: %v", err)
	}
	w.ln.Close() // every dial now fails: the replica is not there
	w.call(t, "first")
	select {
	case err := <-w.served:
		if !errors.Is(err, ErrDirectRefused) {
			t.Fatalf("ServeDirect: %v, want ErrDirectRefused", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the agent kept trying")
	}
	if n := w.dials.Load(); n != 3 {
		t.Fatalf("dialed %d times, want the 3 tries", n)
	}
	if w.client.Direct() {
		t.Fatal("direct without a connection")
	}
	w.call(t, "still on the stream")
}

// A relay that closes the connection after the token (another replica)
// counts as a refusal: ServeDirect dials again.
func TestServeDirectRetriesRefusedConnections(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var tokens atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				tok := make([]byte, DirectTokenLen)
				if _, err := io.ReadFull(c, tok); err == nil && bytes.Equal(tok, bytes.Repeat([]byte{9}, DirectTokenLen)) {
					tokens.Add(1)
				}
			}()
		}
	}()
	srv := &Server{Remote: "relay"}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = srv.ServeDirect(ctx, func(ctx context.Context) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "tcp", ln.Addr().String())
	}, bytes.Repeat([]byte{9}, DirectTokenLen), 4)
	if !errors.Is(err, ErrDirectRefused) {
		t.Fatalf("ServeDirect: %v, want ErrDirectRefused", err)
	}
	if n := tokens.Load(); n != 4 {
		t.Fatalf("the relay saw the token %d times, want 4", n)
	}
}

// freezer is a TCP proxy that can stop passing bytes without closing
// anything: a connection that died silently (a NAT mapping dropped).
type freezer struct {
	ln     net.Listener
	frozen chan struct{}
}

func newFreezer(t *testing.T, target string) *freezer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &freezer{ln: ln, frozen: make(chan struct{})}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			t.Cleanup(func() { c.Close(); u.Close() })
			go f.pipe(u, c)
			go f.pipe(c, u)
		}
	}()
	return f
}

// pipe copies src to dst until frozen, then holds both open and silent.
func (f *freezer) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		select {
		case <-f.frozen:
			return // drop it: nothing passes any more
		default:
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// A direct connection that goes silent (no FIN, no RST) is found dead by
// the relay's pings, and calls go back to the stream instead of hanging.
func TestDirectConnectionGoneSilentFallsBack(t *testing.T) {
	bothDirectClients(t, testDirectConnectionGoneSilentFallsBack)
}

func testDirectConnectionGoneSilentFallsBack(t *testing.T) {
	every, timeout := directPingEvery, directPingTimeout
	directPingEvery, directPingTimeout = 100*time.Millisecond, 200*time.Millisecond
	t.Cleanup(func() { directPingEvery, directPingTimeout = every, timeout })
	var f *freezer
	w := newDirectWorldVia(t, func(target string) string {
		f = newFreezer(t, target)
		return f.ln.Addr().String()
	})
	w.call(t, "first")
	select {
	case <-w.accepted:
	case err := <-w.refused:
		t.Fatalf("the direct connection was refused: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("no direct connection after the first call")
	}
	w.call(t, "direct")
	close(f.frozen)
	// The pings go unanswered: within a few ping periods the relay drops
	// the connection.
	deadline := time.Now().Add(10 * time.Second)
	for w.client.Direct() {
		if time.Now().After(deadline) {
			t.Fatal("the relay still trusts a direct connection that stopped answering")
		}
		runtime.Gosched()
	}
	w.call(t, "back on the stream")
}
