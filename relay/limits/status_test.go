package limits

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/tunnel"
)

// grpcClient serves h over HTTP/2 with TLS and returns an AgentService
// client for it.
func grpcClient(t *testing.T, h http.HandlerFunc) pb.AgentServiceClient {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	conn, err := grpc.NewClient(srv.Listener.Addr().String(),
		grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: roots})))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return pb.NewAgentServiceClient(conn)
}

// wantStatus is what a refused call's status must carry.
type wantStatus struct {
	reason     string
	msg        string            // substring of the status message
	metadata   map[string]string // ErrorInfo metadata
	retryDelay time.Duration     // RetryInfo; 0: none
}

func checkStatus(t *testing.T, err error, want wantStatus) {
	t.Helper()
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.ResourceExhausted {
		t.Fatalf("err = %v, want RESOURCE_EXHAUSTED", err)
	}
	if !strings.Contains(st.Message(), want.msg) {
		t.Fatalf("message %q, want it to contain %q", st.Message(), want.msg)
	}
	var info *errdetails.ErrorInfo
	var retry *errdetails.RetryInfo
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.ErrorInfo:
			info = d
		case *errdetails.RetryInfo:
			retry = d
		}
	}
	wantInfo := &errdetails.ErrorInfo{Reason: want.reason, Domain: "betcode.dev", Metadata: want.metadata}
	if !proto.Equal(info, wantInfo) {
		t.Fatalf("ErrorInfo = %v, want %v", info, wantInfo)
	}
	switch {
	case want.retryDelay == 0 && retry != nil:
		t.Fatalf("RetryInfo = %v, want none", retry)
	case want.retryDelay != 0 && (retry == nil || retry.RetryDelay.AsDuration() != want.retryDelay):
		t.Fatalf("RetryInfo = %v, want a delay of %v", retry, want.retryDelay)
	}
}

func checkErrorEvent(t *testing.T, ev *pb.AgentEvent, code string, details map[string]string) {
	t.Helper()
	e := ev.GetError()
	if e == nil || e.Code != code || !e.IsFatal || e.Message == "" {
		t.Fatalf("event %v, want a fatal ErrorEvent %s", ev, code)
	}
	want := &pb.ErrorEvent{Code: code, Message: e.Message, IsFatal: true, Details: details}
	if !proto.Equal(e, want) {
		t.Fatalf("ErrorEvent %v, want %v", e, want)
	}
}

var rateLimited = wantStatus{
	reason: CodeRateLimited, msg: "rate limit exceeded: retry after 1235 ms",
	metadata: map[string]string{"retry_after_ms": "1235"}, retryDelay: 1235 * time.Millisecond,
}

func TestWritersToGRPCClients(t *testing.T) {
	tooManyStreams := wantStatus{reason: CodeTooManyStreams, msg: "at most 64"}
	tooLarge := wantStatus{reason: CodeMessageTooLarge, msg: "request message too large: 2"}
	rateLimit := func(w http.ResponseWriter, r *http.Request) { WriteRateLimited(w, r, 1234567*time.Microsecond) }
	streamCap := func(w http.ResponseWriter, _ *http.Request) {
		WriteExhausted(w, CodeTooManyStreams, (&StreamLimitError{Scope: ScopeToken, Limit: 64}).Error())
	}
	// sizeCap reads the request through a 1 KiB MessageReader, as the
	// router forwards it; with events it has already answered one
	// AgentEvent (the call was under way) when the limit is hit.
	sizeCap := func(events bool) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			tw := TrackHeaders(w)
			if events {
				b, _ := proto.Marshal(&pb.AgentEvent{Sequence: 1, Event: &pb.AgentEvent_TextDelta{TextDelta: &pb.TextDelta{Text: "hi"}}})
				tw.Header().Set("Content-Type", "application/grpc")
				tw.WriteHeader(http.StatusOK)
				tw.Write(tunnel.Frame(b))
				tw.Flush()
			}
			_, err := io.Copy(io.Discard, MessageLimitReader(r.Body, 1024))
			if !errors.Is(err, ErrMessageTooLarge) {
				t.Errorf("reading the body: %v, want ErrMessageTooLarge", err)
			}
			WriteExhausted(tw, CodeMessageTooLarge, err.Error())
		}
	}
	big := &pb.QueueMessageRequest{IdempotencyKey: strings.Repeat("k", 2048)}
	bigTurn := &pb.AgentRequest{Request: &pb.AgentRequest_Message{Message: &pb.UserMessage{Content: strings.Repeat("x", 2048)}}}

	tests := []struct {
		name    string
		handler http.HandlerFunc
		call    func(context.Context, pb.AgentServiceClient) ([]*pb.AgentEvent, error)
		events  func(t *testing.T, evs []*pb.AgentEvent)
		want    wantStatus
	}{
		{
			name: "rate limited unary", handler: rateLimit, call: unary(&pb.QueueMessageRequest{}), want: rateLimited,
		},
		{
			name: "rate limited Converse", handler: rateLimit, call: converse(nil), want: rateLimited,
			events: oneErrorEvent(CodeRateLimited, map[string]string{"retry_after_ms": "1235"}),
		},
		{
			name: "rate limited ResumeSession", handler: rateLimit, call: resume, want: rateLimited,
			events: oneErrorEvent(CodeRateLimited, map[string]string{"retry_after_ms": "1235"}),
		},
		{name: "too many streams unary", handler: streamCap, call: unary(&pb.QueueMessageRequest{}), want: tooManyStreams},
		{name: "too many streams Converse", handler: streamCap, call: converse(nil), want: tooManyStreams, events: noEvents},
		{name: "message too large unary", handler: sizeCap(false), call: unary(big), want: tooLarge},
		{
			name: "message too large mid-stream", handler: sizeCap(true), call: converse(bigTurn), want: tooLarge,
			events: func(t *testing.T, evs []*pb.AgentEvent) {
				if len(evs) != 1 || evs[0].GetTextDelta().GetText() != "hi" {
					t.Fatalf("events %v, want the one sent before the limit was hit", evs)
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			client := grpcClient(t, tc.handler)
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			evs, err := tc.call(ctx, client)
			checkStatus(t, err, tc.want)
			if tc.events != nil {
				tc.events(t, evs)
			}
		})
	}
}

func unary(req *pb.QueueMessageRequest) func(context.Context, pb.AgentServiceClient) ([]*pb.AgentEvent, error) {
	return func(ctx context.Context, c pb.AgentServiceClient) ([]*pb.AgentEvent, error) {
		_, err := c.QueueMessage(ctx, req)
		return nil, err
	}
}

// converse opens Converse, sends a small request and then req (if set), and
// reads events until the status.
func converse(req *pb.AgentRequest) func(context.Context, pb.AgentServiceClient) ([]*pb.AgentEvent, error) {
	return func(ctx context.Context, c pb.AgentServiceClient) ([]*pb.AgentEvent, error) {
		s, err := c.Converse(ctx)
		if err != nil {
			return nil, err
		}
		// Sends may fail once the server has answered; Recv has the status.
		_ = s.Send(&pb.AgentRequest{})
		if req != nil {
			_ = s.Send(req)
		}
		return recvAll(s.Recv)
	}
}

func resume(ctx context.Context, c pb.AgentServiceClient) ([]*pb.AgentEvent, error) {
	s, err := c.ResumeSession(ctx, &pb.ResumeSessionRequest{})
	if err != nil {
		return nil, err
	}
	return recvAll(s.Recv)
}

func recvAll(recv func() (*pb.AgentEvent, error)) ([]*pb.AgentEvent, error) {
	var evs []*pb.AgentEvent
	for {
		ev, err := recv()
		if err != nil {
			return evs, err
		}
		evs = append(evs, ev)
	}
}

func oneErrorEvent(code string, details map[string]string) func(*testing.T, []*pb.AgentEvent) {
	return func(t *testing.T, evs []*pb.AgentEvent) {
		if len(evs) != 1 {
			t.Fatalf("%d events before the status, want one ErrorEvent", len(evs))
		}
		checkErrorEvent(t, evs[0], code, details)
	}
}

func noEvents(t *testing.T, evs []*pb.AgentEvent) {
	if len(evs) != 0 {
		t.Fatalf("events %v before the status, want none", evs)
	}
}

func TestRetryAfterMillis(t *testing.T) {
	tests := []struct {
		name string
		d    time.Duration
		want int64
	}{
		{"zero is one", 0, 1},
		{"negative is one", -time.Second, 1},
		{"a nanosecond rounds up", time.Nanosecond, 1},
		{"whole milliseconds", 250 * time.Millisecond, 250},
		{"rounds up", 250*time.Millisecond + 1, 251},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := retryAfterMillis(tc.d); got != tc.want {
				t.Fatalf("retryAfterMillis(%v) = %d, want %d", tc.d, got, tc.want)
			}
		})
	}
}

// WriteRateLimited leaves calls other than event streams trailers-only
// and never needs the request beyond its path.
func TestWriteRateLimitedNilRequest(t *testing.T) {
	rec := httptest.NewRecorder()
	WriteRateLimited(rec, nil, time.Second)
	if got := rec.Header().Get("Grpc-Status"); got != "8" {
		t.Fatalf("grpc-status %q, want 8", got)
	}
	if rec.Body.Len() != 0 {
		t.Fatalf("body of %d bytes, want a trailers-only answer", rec.Body.Len())
	}
}
