package tunnel

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding/gzip"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// directHarness is a directWorld with an HTTP/2 front that forwards every
// call through the tunnel's Client, as the relay does; the direct
// connection is attached.
type directHarness struct {
	*harness
	w        *directWorld
	cc       *grpc.ClientConn
	relayEnd net.Conn // the relay's end of the direct connection
}

func newDirectHarness(t *testing.T) *directHarness {
	t.Helper()
	w := newDirectWorld(t)
	cc := startFront(t, w.client)
	h := &directHarness{harness: &harness{client: testpb.NewTestServiceClient(cc), svc: w.svc}, w: w, cc: cc}

	// The first call brings the direct connection.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := h.client.UnaryCall(ctx, &testpb.SimpleRequest{Payload: &testpb.Payload{Body: []byte("first")}}); err != nil {
		t.Fatalf("first call: %v", err)
	}
	select {
	case h.relayEnd = <-w.accepted:
	case err := <-w.refused:
		t.Fatalf("the direct connection was refused: %v", err)
	case <-ctx.Done():
		t.Fatal("no direct connection after the first call")
	}
	if !w.client.Direct() {
		t.Fatal("attached, but calls do not go direct")
	}
	return h
}

// Every kind of call works over the direct connection, as over the stream.
func TestDirectForwardedCalls(t *testing.T) { bothDirectClients(t, testDirectForwardedCalls) }

func testDirectForwardedCalls(t *testing.T) {
	h := newDirectHarness(t)
	checkForwardedCalls(t, h.harness)
	if !h.w.client.Direct() {
		t.Fatal("the direct connection went away during the calls")
	}
}

// Unary calls over the direct connection: the agent's answers pass on as it
// sent them, malformed calls get the agent's own refusal, and a connection
// lost mid-call is TUNNEL_DISCONNECTED, the next call going over the
// stream.
func TestDirectUnaryCalls(t *testing.T) { bothDirectClients(t, testDirectUnaryCalls) }

func testDirectUnaryCalls(t *testing.T) {
	h := newDirectHarness(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	call := func(ctx context.Context, body string, opts ...grpc.CallOption) (*testpb.SimpleResponse, error) {
		return h.client.UnaryCall(ctx, &testpb.SimpleRequest{Payload: &testpb.Payload{Body: []byte(body)}}, opts...)
	}

	t.Run("the agent's UNAVAILABLE is its own, not a broken tunnel", func(t *testing.T) {
		_, err := call(ctx, "unavailable")
		st := status.Convert(err)
		if st.Code() != codes.Unavailable || st.Message() != "agent busy" || reason(st) != "" {
			t.Fatalf("got %v (reason %q), want the agent's UNAVAILABLE as it sent it", err, reason(st))
		}
	})
	t.Run("binary metadata both ways", func(t *testing.T) {
		blob := string([]byte{0, 1, 2, 0xfe, 0xff, '\n'})
		var hdr metadata.MD
		_, err := call(metadata.AppendToOutgoingContext(ctx, "x-blob-bin", blob), "hello", grpc.Header(&hdr))
		if err != nil {
			t.Fatal(err)
		}
		if got := hdr.Get("echo-blob-bin"); len(got) != 1 || got[0] != blob {
			t.Fatalf("echoed binary header = %q, want %q", got, blob)
		}
	})
	t.Run("a large message", func(t *testing.T) {
		body := strings.Repeat("0123456789abcdef", 1<<16) // 1 MiB: several DATA frames each way
		resp, err := call(ctx, body)
		if err != nil || string(resp.GetPayload().GetBody()) != body {
			t.Fatalf("got %d bytes, %v", len(resp.GetPayload().GetBody()), err)
		}
	})
	t.Run("a compressed call", func(t *testing.T) {
		resp, err := call(ctx, "squeezed", grpc.UseCompressor(gzip.Name))
		if err != nil || string(resp.GetPayload().GetBody()) != "squeezed" {
			t.Fatalf("got %v, %v", resp, err)
		}
	})
	for _, tt := range []struct {
		name string
		msgs int
		want string
	}{
		{"no request message", 0, "request message"},
		{"two request messages", 2, "request messages"},
	} {
		t.Run(tt.name+" is refused", func(t *testing.T) {
			s, err := h.cc.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}, "/grpc.testing.TestService/UnaryCall")
			if err != nil {
				t.Fatal(err)
			}
			for range tt.msgs {
				if err := s.SendMsg(&testpb.SimpleRequest{}); err != nil {
					t.Fatal(err)
				}
			}
			s.CloseSend()
			err = s.RecvMsg(new(testpb.SimpleResponse))
			if st := status.Convert(err); st.Code() != codes.Internal || !strings.Contains(st.Message(), tt.want) {
				t.Fatalf("got %v, want INTERNAL: ...%s...", err, tt.want)
			}
		})
	}
	t.Run("the direct connection lost mid-call is TUNNEL_DISCONNECTED", func(t *testing.T) {
		go func() {
			<-h.svc.started
			h.relayEnd.Close()
		}()
		_, err := call(ctx, "slow")
		st := status.Convert(err)
		if st.Code() != codes.Unavailable || reason(st) != "TUNNEL_DISCONNECTED" {
			t.Fatalf("got %v (reason %q), want UNAVAILABLE / TUNNEL_DISCONNECTED", err, reason(st))
		}
		// The next call goes over the stream.
		if resp, err := call(ctx, "after"); err != nil || string(resp.GetPayload().GetBody()) != "after" {
			t.Fatalf("after the direct connection: %v, %v", resp, err)
		}
		if h.w.client.Direct() {
			t.Fatal("still direct after the connection closed")
		}
	})
}

func reason(st *status.Status) string {
	for _, d := range st.Details() {
		if ei, ok := d.(*errdetails.ErrorInfo); ok {
			return ei.Reason
		}
	}
	return ""
}
