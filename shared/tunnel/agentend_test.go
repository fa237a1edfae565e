package tunnel

import (
	"context"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"
)

// cutter is a TCP proxy whose connections can all be ended at once, each
// side getting an orderly close (FIN): to the relay it looks as if the
// agent's process had ended.
type cutter struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func newCutter(t *testing.T, target string) *cutter {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &cutter{ln: ln}
	t.Cleanup(func() { ln.Close(); c.cut() })
	go func() {
		for {
			down, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				down.Close()
				continue
			}
			c.mu.Lock()
			c.conns = append(c.conns, down, up)
			c.mu.Unlock()
			go func() { io.Copy(up, down); up.(*net.TCPConn).CloseWrite() }()
			go func() { io.Copy(down, up); down.(*net.TCPConn).CloseWrite() }()
		}
	}()
	return c
}

// cut closes every connection through the proxy.
func (c *cutter) cut() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cn := range c.conns {
		cn.Close()
	}
	c.conns = nil
}

// A direct connection that the agent's end closes mid-call (the relay reads
// EOF, as when the agent's process is killed) ends the call UNAVAILABLE /
// TUNNEL_DISCONNECTED, never as if the agent had finished it: an EOF of
// the connection is not the end of the call's answer.
func TestDirectConnectionEndedByAgentMidCall(t *testing.T) {
	bothDirectClients(t, testDirectConnectionEndedByAgentMidCall)
}

func testDirectConnectionEndedByAgentMidCall(t *testing.T) {
	var cut *cutter
	w := newDirectWorldVia(t, func(target string) string {
		cut = newCutter(t, target)
		return cut.ln.Addr().String()
	})
	client := testpb.NewTestServiceClient(startFront(t, w.client))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := client.UnaryCall(ctx, &testpb.SimpleRequest{}); err != nil {
		t.Fatalf("first call: %v", err)
	}
	select {
	case <-w.accepted:
	case err := <-w.refused:
		t.Fatalf("the direct connection was refused: %v", err)
	case <-ctx.Done():
		t.Fatal("no direct connection after the first call")
	}
	s, err := client.FullDuplexCall(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(&testpb.StreamingOutputCallRequest{Payload: &testpb.Payload{Body: []byte("ping")}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recv(); err != nil {
		t.Fatalf("the echo over the direct connection: %v", err)
	}
	cut.cut()
	_, err = s.Recv()
	st := status.Convert(err)
	if st.Code() != codes.Unavailable || reason(st) != "TUNNEL_DISCONNECTED" {
		t.Fatalf("after the agent's end closed: %v (reason %q); want UNAVAILABLE, TUNNEL_DISCONNECTED", err, reason(st))
	}
}
