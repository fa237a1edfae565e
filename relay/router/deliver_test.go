package router

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/betcode-dev/betcode/relay/auth"
	"github.com/betcode-dev/betcode/relay/registry"
	"github.com/betcode-dev/betcode/relay/store"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/conntest"
	"github.com/betcode-dev/betcode/shared/tunnel"
)

// TestDeliverBuffered: a device's sealed envelope for its offline machine
// is stored as it came (ciphertext and routing fields), keyed by the outer
// idempotency key, and answered DeliverResponse{buffered}; the same key
// again is not stored twice.
func TestDeliverBuffered(t *testing.T) {
	st := scopeStore(t)
	rt := &Router{Auth: auth.New(st, auth.Options{}), Registry: registry.New(), Store: st, Log: slog.New(slog.DiscardHandler)}
	device := auth.Identity{UserID: "alice", TokenID: "tok-dev", Scope: store.ScopeDevice, ScopeMachine: "m-1"}
	req, _ := proto.Marshal(&pb.DeliverRequest{Sealed: []byte("ciphertext"), IdempotencyKey: "outer-1"})
	for range 2 {
		r := grpcRequest(t.Context(), deliverPath, "", device)
		r.Body = httptestBody(tunnel.Frame(req))
		rec := httptest.NewRecorder()
		rt.ServeHTTP(rec, r)
		if code, msg := statusOf(rec); code != "0" {
			t.Fatalf("answered %s %q; want buffered", code, msg)
		}
		body, err := tunnel.Unframe(rec.Body.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		var resp pb.DeliverResponse
		if err := proto.Unmarshal(body, &resp); err != nil || !resp.Buffered || resp.Accepted {
			t.Fatalf("answer %v, %v; want buffered", &resp, err)
		}
	}
	msgs, err := st.Pending(t.Context(), "m-1", 0, 10)
	if err != nil || len(msgs) != 1 {
		t.Fatalf("pending = %d, %v; want the one envelope", len(msgs), err)
	}
	m := msgs[0]
	if m.Service != "/betcode.v1.ChannelService" && m.Service != "betcode.v1.ChannelService" || m.Method != "Deliver" ||
		m.IdempotencyKey != "outer-1" || !bytes.Equal(m.Payload, req) {
		t.Fatalf("stored %+v", m)
	}
	// Without an outer key it cannot be deduplicated: refused.
	bare, _ := proto.Marshal(&pb.DeliverRequest{Sealed: []byte("ciphertext")})
	r := grpcRequest(t.Context(), deliverPath, "", device)
	r.Body = httptestBody(tunnel.Frame(bare))
	rec := httptest.NewRecorder()
	rt.ServeHTTP(rec, r)
	if code, _ := statusOf(rec); code != "3" {
		t.Fatalf("without a key: %s; want INVALID_ARGUMENT", code)
	}
}

func httptestBody(b []byte) *bodyReader { return &bodyReader{bytes.NewReader(b)} }

type bodyReader struct{ *bytes.Reader }

func (bodyReader) Close() error { return nil }

// flakyBuffer fails its first failPending Pending and failAck Ack calls,
// as PostgreSQL does while it restarts.
type flakyBuffer struct {
	store.Store
	failPending, failAck atomic.Int64
}

var errRestarting = errors.New("FATAL: the database system is shutting down (SQLSTATE 57P03)")

func (s *flakyBuffer) Pending(ctx context.Context, machineID string, after int64, limit int) ([]store.Message, error) {
	if s.failPending.Add(-1) >= 0 {
		return nil, errRestarting
	}
	return s.Store.Pending(ctx, machineID, after, limit)
}

func (s *flakyBuffer) Ack(ctx context.Context, machineID string, ids ...int64) error {
	if s.failAck.Add(-1) >= 0 {
		return errRestarting
	}
	return s.Store.Ack(ctx, machineID, ids...)
}

// queueAgent takes QueueMessage calls and counts them by idempotency key.
type queueAgent struct {
	pb.UnimplementedAgentServiceServer
	mu   sync.Mutex
	keys map[string]int
}

func (a *queueAgent) QueueMessage(_ context.Context, req *pb.QueueMessageRequest) (*pb.QueueMessageResponse, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.keys[req.GetIdempotencyKey()]++
	return &pb.QueueMessageResponse{}, nil
}

// TestDeliveryOutlastsAStoreRestart: a machine connects while PostgreSQL
// restarts. Its buffered messages are still delivered at once, each once,
// and acknowledged, rather than left for its next heartbeat, up to 30 s
// later (the chaos soak found messages that waited so).
func TestDeliveryOutlastsAStoreRestart(t *testing.T) {
	base := scopeStore(t)
	for i, key := range []string{"k1", "k2"} {
		req, _ := proto.Marshal(&pb.QueueMessageRequest{SessionId: "s1", IdempotencyKey: key, Message: &pb.UserMessage{Content: fmt.Sprint("hi ", i)}})
		if _, _, err := base.Enqueue(t.Context(), store.Message{MachineID: "m-1", OwnerID: "alice", IdempotencyKey: key,
			Service: "betcode.v1.AgentService", Method: "QueueMessage", Payload: req}, store.Limits{}); err != nil {
			t.Fatal(err)
		}
	}
	st := &flakyBuffer{Store: base}
	st.failPending.Store(3)
	st.failAck.Store(2)

	agent := &queueAgent{keys: map[string]int{}}
	gs := grpc.NewServer()
	pb.RegisterAgentServiceServer(gs, agent)
	relayEnd, agentEnd := conntest.TCPPair(t) // HTTP/2's two first writes cross: a net.Pipe would hold both
	client := tunnel.NewClient(relayEnd, true)
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = (&tunnel.Server{Handler: gs, Native: gs, Remote: "relay"}).ServeConn(context.Background(), agentEnd)
	}()
	t.Cleanup(func() { client.Close(); agentEnd.Close(); gs.Stop(); <-served })

	rt := &Router{Registry: registry.New(), Store: st, Log: slog.New(slog.DiscardHandler), RetryFirst: time.Millisecond}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	rt.Deliver(ctx, &registry.Tunnel{MachineID: "m-1", OwnerID: "alice", Client: client})

	agent.mu.Lock()
	got := maps.Clone(agent.keys)
	agent.mu.Unlock()
	if got["k1"] != 1 || got["k2"] != 1 || len(got) != 2 {
		t.Errorf("the agent took %v, want k1 and k2 once each", got)
	}
	if left, err := base.Pending(t.Context(), "m-1", 0, 10); err != nil || len(left) != 0 {
		t.Errorf("%d messages still buffered (%v), want none: each delivered one acknowledged", len(left), err)
	}
}
