package limits

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/tunnel"
)

// echoAgent answers each Converse request with one event and QueueMessage
// with buffered=false.
type echoAgent struct {
	pb.UnimplementedAgentServiceServer
}

func (echoAgent) Converse(s grpc.BidiStreamingServer[pb.AgentRequest, pb.AgentEvent]) error {
	for {
		if _, err := s.Recv(); err != nil {
			return err
		}
		if err := s.Send(&pb.AgentEvent{Event: &pb.AgentEvent_TextDelta{TextDelta: &pb.TextDelta{Text: "echo"}}}); err != nil {
			return err
		}
	}
}

func (echoAgent) QueueMessage(context.Context, *pb.QueueMessageRequest) (*pb.QueueMessageResponse, error) {
	return &pb.QueueMessageResponse{}, nil
}

// The wiring MessageReader's documentation shows, around a real forward
// to a grpc-go server over both of the relay's transports: a message over
// the limit ends the call with RESOURCE_EXHAUSTED / MESSAGE_TOO_LARGE,
// whether it is the first message or comes once the answer is under way.
func TestMessageLimitAroundAForward(t *testing.T) {
	gs := grpc.NewServer()
	defer gs.Stop()
	pb.RegisterAgentServiceServer(gs, echoAgent{})
	for _, transport := range []string{"http2", "frames"} {
		t.Run(transport, func(t *testing.T) {
			testMessageLimitAroundAForward(t, forwarder(t, transport, gs))
		})
	}
}

// forwardFunc forwards one call, as the router does.
type forwardFunc func(ctx context.Context, w http.ResponseWriter, r *http.Request)

// forwarder forwards calls to h: over HTTP/2 (tunnel.ProxyCall, as to an
// agent serving HTTP/2 or another replica) or over the TunnelFrame call
// protocol on a pipe (tunnel.Forward to tunnel.Serve).
func forwarder(t *testing.T, transport string, h http.Handler) forwardFunc {
	if transport == "frames" {
		return func(ctx context.Context, w http.ResponseWriter, r *http.Request) {
			relaySide, agentSide := net.Pipe()
			served := make(chan struct{})
			go func() {
				defer close(served)
				_ = tunnel.Serve(context.Background(), agentSide, h, "relay")
			}()
			_ = tunnel.Forward(ctx, relaySide, w, r, "1", nil)
			<-served
		}
	}
	upstream := httptest.NewUnstartedServer(h)
	upstream.EnableHTTP2 = true
	upstream.StartTLS()
	t.Cleanup(upstream.Close)
	roots := x509.NewCertPool()
	roots.AddCert(upstream.Certificate())
	rt := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}, ForceAttemptHTTP2: true}
	t.Cleanup(rt.CloseIdleConnections)
	host := upstream.Listener.Addr().String()
	return func(ctx context.Context, w http.ResponseWriter, r *http.Request) {
		_ = tunnel.ProxyCall(ctx, rt, host, w, r, nil, nil)
	}
}

func testMessageLimitAroundAForward(t *testing.T, forward forwardFunc) {
	client := grpcClient(t, func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithCancelCause(r.Context())
		defer cancel(nil)
		body := MessageLimitReader(r.Body, 1024)
		body.OnTooLarge = cancel
		r.Body = body
		tw := TrackHeaders(w)
		forward(ctx, tw, r)
		if err := context.Cause(ctx); errors.Is(err, ErrMessageTooLarge) {
			WriteExhausted(tw, CodeMessageTooLarge, err.Error())
		}
	})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	tooLarge := wantStatus{reason: CodeMessageTooLarge, msg: "request message too large: 2"}

	t.Run("small messages pass", func(t *testing.T) {
		if _, err := client.QueueMessage(ctx, &pb.QueueMessageRequest{IdempotencyKey: "k"}); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("unary", func(t *testing.T) {
		_, err := client.QueueMessage(ctx, &pb.QueueMessageRequest{IdempotencyKey: strings.Repeat("k", 2048)})
		checkStatus(t, err, tooLarge)
	})
	t.Run("mid-stream", func(t *testing.T) {
		s, err := client.Converse(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Send(&pb.AgentRequest{}); err != nil {
			t.Fatal(err)
		}
		ev, err := s.Recv()
		if err != nil || ev.GetTextDelta().GetText() != "echo" {
			t.Fatalf("first answer %v, %v; want the echo", ev, err)
		}
		_ = s.Send(&pb.AgentRequest{Request: &pb.AgentRequest_Message{Message: &pb.UserMessage{Content: strings.Repeat("x", 2048)}}})
		evs, err := recvAll(s.Recv)
		checkStatus(t, err, tooLarge)
		for _, ev := range evs {
			if !proto.Equal(ev, &pb.AgentEvent{Event: &pb.AgentEvent_TextDelta{TextDelta: &pb.TextDelta{Text: "echo"}}}) {
				t.Fatalf("unexpected event %v", ev)
			}
		}
	})
}
