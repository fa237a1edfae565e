package router

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/betcode-dev/betcode/relay/auth"
	"github.com/betcode-dev/betcode/relay/peer"
	"github.com/betcode-dev/betcode/relay/pki"
	"github.com/betcode-dev/betcode/relay/registry"
	"github.com/betcode-dev/betcode/relay/store"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/tunnel"
)

// movedStore is a store whose only machine record names where the machine
// is now; a call to anything else panics (the test does not expect one).
type movedStore struct {
	store.Store
	m store.Machine
}

func (s movedStore) GetMachine(context.Context, string) (store.Machine, error) { return s.m, nil }

func (s movedStore) Enqueue(context.Context, store.Message, store.Limits) (int64, bool, error) {
	return 1, false, nil
}

// holderReplica is a replica that holds the machine now: an HTTP/2 TLS
// server with the relay certificate that answers every call OK and hands
// each request body to got. fw forwards to it as replicas do.
func holderReplica(t *testing.T) (fw *peer.Forwarder, addr string, got <-chan []byte) {
	t.Helper()
	dir := t.TempDir()
	if _, err := pki.Init(dir, []string{"localhost", "127.0.0.1"}, pki.Options{}); err != nil {
		t.Fatal(err)
	}
	fw, err := peer.NewEngine(filepath.Join(dir, pki.RelayCertFile), filepath.Join(dir, pki.RelayKeyFile), filepath.Join(dir, pki.CACertFile))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fw.Close)
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, pki.RelayCertFile), filepath.Join(dir, pki.RelayKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	bodies := make(chan []byte, 4)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b bytes.Buffer
		b.ReadFrom(r.Body)
		bodies <- b.Bytes()
		w.Header().Set("Content-Type", "application/grpc")
		w.Header().Set("Trailer", "Grpc-Status")
		w.WriteHeader(http.StatusOK)
		w.Header().Set("Grpc-Status", "0")
	}))
	srv.EnableHTTP2 = true
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return fw, srv.Listener.Addr().String(), bodies
}

// serverBody is a request body as a server gives it: the whole request
// arrived (END_STREAM), readable until Close, which makes later reads fail.
// It says what it holds, as the relay's own front does.
type serverBody struct {
	rest   []byte
	closed bool
}

func (b *serverBody) Read(p []byte) (int, error) {
	if b.closed {
		return 0, http.ErrBodyReadAfterClose
	}
	if len(b.rest) == 0 {
		return 0, io.EOF
	}
	n := copy(p, b.rest)
	b.rest = b.rest[n:]
	return n, nil
}

func (b *serverBody) Close() error { b.closed = true; return nil }

func (b *serverBody) Buffered() (int, bool) {
	if b.closed {
		return 0, false
	}
	return len(b.rest), true
}

// TestToPeerFollowsAMachineThatMoved: the replica a call was sent to has
// died (nothing listens at its address) and the machine has already
// registered with another replica, as its agent redials within 250 ms. The
// call reaches the machine on the other replica instead of failing
// MACHINE_OFFLINE, or, for QueueMessage, being buffered here where it would
// wait for that replica's next heartbeat (the chaos soak found a queued
// message that waited so). A stream's request goes again only when nothing
// of it was sent, and then whole: the failed dial closed the body it was
// given (a RoundTripper's contract), which once sent the stream on without
// its message and the agent answered INTERNAL "cardinality violation"
// (seen 8-11 times in each 5-minute chaos soak).
func TestToPeerFollowsAMachineThatMoved(t *testing.T) {
	fw, nowAddr, got := holderReplica(t)
	// The replica that died: nothing listens there.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()

	for _, path := range []string{queueMessagePath, "/betcode.v1.AgentService/ResumeSession"} {
		t.Run(path, func(t *testing.T) {
			rt := &Router{Self: "127.0.0.1:1", Peers: fw, PresenceTTL: time.Minute, Registry: registry.New(),
				Store: movedStore{m: store.Machine{ID: "m1", Replica: nowAddr, LastSeen: time.Now()}},
				Log:   slog.New(slog.DiscardHandler)}
			body := tunnel.Frame([]byte("request"))
			r := httptest.NewRequest(http.MethodPost, path, nil)
			r.Body = &serverBody{rest: body}
			r.Header.Set("Content-Type", "application/grpc")
			w := httptest.NewRecorder()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			rt.toPeer(ctx, w, r.WithContext(ctx), dead, "u1", "m1", time.Now())
			if st := w.Result().Trailer.Get("Grpc-Status"); st != "0" {
				t.Fatalf("grpc-status %q (%s), want 0 from the replica the machine moved to", st, w.Result().Trailer.Get("Grpc-Message"))
			}
			select {
			case b := <-got:
				if !bytes.Equal(b, body) {
					t.Errorf("the replica got %q, want the whole request %q", b, body)
				}
			default:
				t.Error("the replica the machine moved to got no request")
			}
		})
	}
}

// TestBufferedCallIsSentOnToTheMachinesReplica: a replica that stores a
// QueueMessage for a machine it does not hold (it drains, or its record was
// stale) while the machine is online at another replica sends a copy
// there at once, rather than leave it for that replica's next heartbeat
// (the chaos soak found a message that waited so). The copy carries the
// same request, idempotency key included: the machine takes it once.
func TestBufferedCallIsSentOnToTheMachinesReplica(t *testing.T) {
	fw, holder, got := holderReplica(t)
	rt := &Router{Self: "127.0.0.1:1", Peers: fw, PresenceTTL: time.Minute, Registry: registry.New(),
		Store: movedStore{m: store.Machine{ID: "m1", Replica: holder, LastSeen: time.Now()}},
		Log:   slog.New(slog.DiscardHandler)}
	req, err := proto.Marshal(&pb.QueueMessageRequest{SessionId: "s1", IdempotencyKey: "k1", Message: &pb.UserMessage{Content: "hi"}})
	if err != nil {
		t.Fatal(err)
	}
	body := tunnel.Frame(req)
	r := httptest.NewRequest(http.MethodPost, queueMessagePath, bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/grpc")
	w := httptest.NewRecorder()
	rt.offline(w, r, "u1", "m1", false)
	if st := w.Result().Trailer.Get("Grpc-Status"); st != "0" {
		t.Fatalf("grpc-status %q, want 0 (buffered)", st)
	}
	select {
	case b := <-got:
		if !bytes.Equal(b, body) {
			t.Errorf("the holder got %q, want the buffered request %q", b, body)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the machine's replica got no copy of the buffered call")
	}
}

// countingStore is a store whose one machine record can change, counting
// the reads of it.
type countingStore struct {
	store.Store
	mu    sync.Mutex
	m     store.Machine
	reads int
}

func (s *countingStore) GetMachine(context.Context, string) (store.Machine, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reads++
	return s.m, nil
}

func (s *countingStore) set(m store.Machine) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m = m
}

// ownerOnly lets each user reach its own machines.
type ownerOnly struct{}

func (ownerOnly) CanReach(_ context.Context, userID, owner, _ string) (bool, error) {
	return userID == owner, nil
}
func (ownerOnly) Audit(store.AuditEvent) {}

// TestOfflineRecordIsReadAgainSoon: a machine between replicas (a drain
// closed its tunnel; its agent registers with another within a few hundred
// milliseconds) leaves a record with no replica for a moment. A replica
// that read it then must see the machine back on its next call a moment
// later, not answer MACHINE_OFFLINE for the second it trusts a record that
// names a replica (the chaos soak's drains: clients waited 1.3-1.6 s).
func TestOfflineRecordIsReadAgainSoon(t *testing.T) {
	fw, holder, got := holderReplica(t)
	st := &countingStore{m: store.Machine{ID: "m1", OwnerID: "u1", LastSeen: time.Now()}}
	rt := &Router{Self: "127.0.0.1:1", Peers: fw, PresenceTTL: time.Minute, Registry: registry.New(),
		Store: st, Auth: ownerOnly{}, Log: slog.New(slog.DiscardHandler)}
	call := func() (string, string) {
		r := httptest.NewRequest(http.MethodPost, "/betcode.v1.AgentService/ResumeSession", bytes.NewReader(tunnel.Frame([]byte("req"))))
		r.Header.Set("Content-Type", "application/grpc")
		r.Header.Set(MachineHeader, "m1")
		w := httptest.NewRecorder()
		rt.route(r.Context(), w, r, auth.Identity{UserID: "u1"}, false)
		res := w.Result()
		code := res.Trailer.Get("Grpc-Status")
		if code == "" {
			code = res.Header.Get("Grpc-Status")
		}
		return code, res.Header.Get("Grpc-Message") + res.Trailer.Get("Grpc-Message")
	}
	age := func(d time.Duration) { // as if d had passed since the record was read
		v, ok := rt.machines.Load("m1")
		if !ok {
			t.Fatal("the router kept no copy of the record")
		}
		e := v.(machineEntry)
		e.at = e.at.Add(-d)
		rt.machines.Store("m1", e)
	}

	if code, msg := call(); code != "14" || !strings.Contains(msg, "not connected") {
		t.Fatalf("a machine with no replica answered %s %q, want 14 (not connected)", code, msg)
	}
	st.set(store.Machine{ID: "m1", OwnerID: "u1", Replica: holder, LastSeen: time.Now()}) // it registered there
	age(200 * time.Millisecond)
	if code, msg := call(); code != "0" {
		t.Fatalf("200 ms after reading it offline, a call for the machine now on another replica answered %s %q, want 0 from there", code, msg)
	}
	<-got
	// A record that names the replica holding the machine is trusted longer:
	// the calls that follow cost no store round trip.
	reads := st.reads
	age(200 * time.Millisecond)
	if code, msg := call(); code != "0" {
		t.Fatalf("second call answered %s %q", code, msg)
	}
	<-got
	if st.reads != reads {
		t.Errorf("a call 200 ms after reading a record that names a live replica read the store again (%d reads, want %d)", st.reads, reads)
	}
}

// retryAfterOf returns the retry_after_ms of a recorded trailers-only
// answer's ErrorInfo ("" for none).
func retryAfterOf(t *testing.T, rec *httptest.ResponseRecorder) string {
	t.Helper()
	v := rec.Result().Header.Get("Grpc-Status-Details-Bin")
	if v == "" {
		return ""
	}
	b, err := base64.RawStdEncoding.DecodeString(strings.TrimRight(v, "="))
	if err != nil {
		t.Fatalf("status details: %v", err)
	}
	var st spb.Status
	if err := proto.Unmarshal(b, &st); err != nil {
		t.Fatalf("status details: %v", err)
	}
	for _, d := range st.GetDetails() {
		var info errdetails.ErrorInfo
		if d.UnmarshalTo(&info) == nil {
			return info.GetMetadata()["retry_after_ms"]
		}
	}
	return ""
}

// TestMovingMachineIsTriedAgainSoon: a stream for a machine that was
// connected moments ago (its tunnel ended: its replica drains or died) is
// answered MACHINE_OFFLINE with retry_after_ms 100, so its client tries
// again within 100 ms rather than on its doubling schedule, which found
// the machine up to half a second after it was back (the chaos soak's
// drains); one long gone gets no such hint, and its clients back off.
func TestMovingMachineIsTriedAgainSoon(t *testing.T) {
	for _, tc := range []struct {
		name  string
		seen  time.Duration // before now
		retry string
	}{
		{"seen a second ago", time.Second, "100"},
		{"seen a minute ago", time.Minute, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := &countingStore{m: store.Machine{ID: "m1", OwnerID: "u1", LastSeen: time.Now().Add(-tc.seen)}}
			rt := &Router{Self: "127.0.0.1:1", PresenceTTL: time.Minute, Registry: registry.New(),
				Store: st, Auth: ownerOnly{}, Log: slog.New(slog.DiscardHandler)}
			r := httptest.NewRequest(http.MethodPost, "/betcode.v1.AgentService/ResumeSession", bytes.NewReader(tunnel.Frame([]byte("req"))))
			r.Header.Set("Content-Type", "application/grpc")
			r.Header.Set(MachineHeader, "m1")
			w := httptest.NewRecorder()
			rt.route(r.Context(), w, r, auth.Identity{UserID: "u1"}, false)
			if code, msg := statusOf(w); code != "14" || !strings.Contains(msg, "not connected") {
				t.Fatalf("answered %s %q, want 14 (not connected)", code, msg)
			}
			if got := retryAfterOf(t, w); got != tc.retry {
				t.Errorf("retry_after_ms %q, want %q", got, tc.retry)
			}
		})
	}
}
