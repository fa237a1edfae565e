package router

import (
	"bytes"
	"log/slog"
	"net/http/httptest"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/betcode-dev/betcode/relay/auth"
	"github.com/betcode-dev/betcode/relay/registry"
	"github.com/betcode-dev/betcode/relay/store"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
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
