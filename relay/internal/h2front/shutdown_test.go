package h2front

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/betcode-dev/betcode/shared/leakcheck"
)

type connStatsKey struct{}

// connStats counts the streams served on one connection.
type connStats struct{ streams atomic.Int64 }

// countingServer runs the echo service and counts streams per connection;
// first is the first connection's stats.
func countingServer(t *testing.T, goaway chan<- struct{}) (*testServer, *echoService, *atomic.Pointer[connStats]) {
	svc := newEchoService()
	gs := newGRPCServer(t, svc)
	first := new(atomic.Pointer[connStats])
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if cs, ok := r.Context().Value(connStatsKey{}).(*connStats); ok {
			cs.streams.Add(1)
		}
		gs.ServeHTTP(w, r)
	})
	ts := startServer(t, h, func(s *Server) {
		s.ConnContext = func(ctx context.Context, _ net.Conn) context.Context {
			cs := &connStats{}
			first.CompareAndSwap(nil, cs)
			return context.WithValue(ctx, connStatsKey{}, cs)
		}
		s.onGoAway = func() { goaway <- struct{}{} }
	})
	return ts, svc, first
}

func bidiRound(t *testing.T, cs grpc.ClientStream, msg string) {
	t.Helper()
	in := []byte(msg)
	if err := cs.SendMsg(&in); err != nil {
		t.Fatal(err)
	}
	var out []byte
	if err := cs.RecvMsg(&out); err != nil {
		t.Fatal(err)
	}
	if string(out) != msg {
		t.Fatalf("got %q", out)
	}
}

func TestShutdownGraceful(t *testing.T) {
	leakcheck.Goroutines(t)
	goaway := make(chan struct{}, 4)
	ts, _, first := countingServer(t, goaway)
	cc := dialGRPC(t, ts.addr)
	ctx := withTimeout(t, 30*time.Second)
	cs, err := cc.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, "/"+svcName+"/Bidi")
	if err != nil {
		t.Fatal(err)
	}
	bidiRound(t, cs, "before")

	shutdown := make(chan error, 1)
	go func() { shutdown <- ts.srv.Shutdown(ctx) }()
	<-goaway
	// Frames are ordered: this answer follows the GOAWAY, so the client
	// has seen it when the round ends.
	bidiRound(t, cs, "after goaway")

	// A new call cannot use the old connection, and the listener is closed.
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	_, err = unaryCall(cctx, cc, []byte("new"))
	cancel()
	if err == nil {
		t.Fatal("a new call succeeded after Shutdown")
	}
	select {
	case err := <-shutdown:
		t.Fatalf("Shutdown returned (%v) with a stream open", err)
	default:
	}
	for i := range 10 {
		bidiRound(t, cs, fmt.Sprintf("draining %d", i))
	}
	if err := cs.CloseSend(); err != nil {
		t.Fatal(err)
	}
	var out []byte
	if err := cs.RecvMsg(&out); !errors.Is(err, io.EOF) {
		t.Fatalf("end of bidi: %v", err)
	}
	if err := <-shutdown; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if n := first.Load().streams.Load(); n != 1 {
		t.Fatalf("%d streams served on the old connection, want 1", n)
	}
	if err := ts.srv.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestShutdownTimeoutThenClose(t *testing.T) {
	leakcheck.Goroutines(t)
	goaway := make(chan struct{}, 4)
	ts, svc, _ := countingServer(t, goaway)
	cc := dialGRPC(t, ts.addr)
	cs, err := cc.NewStream(withTimeout(t, 30*time.Second), &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, "/"+svcName+"/Hang")
	if err != nil {
		t.Fatal(err)
	}
	msg := []byte("x")
	_ = cs.SendMsg(&msg)
	<-svc.started

	ctx, cancel := context.WithCancel(context.Background())
	shutdown := make(chan error, 1)
	go func() { shutdown <- ts.srv.Shutdown(ctx) }()
	<-goaway
	cancel()
	if err := <-shutdown; !errors.Is(err, context.Canceled) {
		t.Fatalf("Shutdown: %v", err)
	}
	if err := ts.srv.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-svc.cancelled:
	case <-time.After(10 * time.Second):
		t.Fatal("handler context not cancelled by Close")
	}
	var out []byte
	if err := cs.RecvMsg(&out); err == nil {
		t.Fatal("stream survived Close")
	}
}

// TestServeConnDirect covers ServeConn on an already-handshaken conn and
// the request fields a handler sees.
func TestServeConnDirect(t *testing.T) {
	leakcheck.Goroutines(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	type seen struct {
		proto, host, path, query, remote string
		tls                              bool
		local                            any
		cl                               int64
	}
	got := make(chan seen, 1)
	srv := &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- seen{r.Proto, r.Host, r.URL.Path, r.URL.RawQuery, r.RemoteAddr, r.TLS != nil,
			r.Context().Value(http.LocalAddrContextKey), r.ContentLength}
		w.Header().Set("X-A", "b")
		_, _ = io.WriteString(w, "hi")
	})}
	served := make(chan struct{})
	go func() {
		defer close(served)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		tc := tlsServer(c)
		if err := tc.Handshake(); err != nil {
			_ = tc.Close()
			return
		}
		srv.ServeConn(tc)
	}()
	rc := dialRaw(t, ln.Addr().String())
	rc.handshake()
	rc.writeHeaders(1, true, rc.headerBlock("/p/a?q=1"))
	rc.flush()
	s := <-got
	if s.proto != "HTTP/2.0" || s.host != "127.0.0.1" || s.path != "/p/a" || s.query != "q=1" ||
		s.remote != rc.tc.LocalAddr().String() || !s.tls || s.local == nil || s.cl != 0 {
		t.Fatalf("request %+v", s)
	}
	_ = rc.tc.Close()
	<-served
}
