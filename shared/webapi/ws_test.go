package webapi

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"google.golang.org/grpc/codes"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

type testWS struct {
	t   *testing.T
	c   *websocket.Conn
	ctx context.Context
}

func (ts *testServer) dial(t *testing.T, origin string) (*testWS, *http.Response, error) {
	t.Helper()
	// A bound on the socket's whole life in the test, not a wait: generous,
	// as a slow-client test on a loaded two-core machine takes ~10 s.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	h := http.Header{}
	if origin != "" {
		h.Set("Origin", origin)
	}
	c, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(ts.srv.URL, "http")+"/api/ws", &websocket.DialOptions{HTTPHeader: h})
	if err != nil {
		return nil, resp, err
	}
	c.SetReadLimit(64 << 20)
	t.Cleanup(func() { c.CloseNow() })
	return &testWS{t: t, c: c, ctx: ctx}, resp, nil
}

// hello opens an authenticated socket and returns it with its snapshot.
func (ts *testServer) hello(t *testing.T, extra map[string]any) (*testWS, Event) {
	t.Helper()
	ws, _, err := ts.dial(t, ts.srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]any{"type": "hello", "token": goodToken}
	for k, v := range extra {
		m[k] = v
	}
	ws.send(m)
	snap := ws.read()
	if snap["type"] != "snapshot" {
		t.Fatalf("first message %v, want snapshot", snap)
	}
	return ws, snap
}

func (w *testWS) send(m map[string]any) {
	w.t.Helper()
	b, _ := json.Marshal(m)
	if err := w.c.Write(w.ctx, websocket.MessageText, b); err != nil {
		w.t.Fatal(err)
	}
}

func (w *testWS) read() Event {
	w.t.Helper()
	_, b, err := w.c.Read(w.ctx)
	if err != nil {
		w.t.Fatalf("read: %v", err)
	}
	var e Event
	if err := json.Unmarshal(b, &e); err != nil {
		w.t.Fatalf("message %q: %v", b, err)
	}
	return e
}

// expect reads the next message and checks the given fields.
func (w *testWS) expect(want Event) Event {
	w.t.Helper()
	got := w.read()
	for k, v := range want {
		if g, _ := json.Marshal(got[k]); string(g) != mustJSON(v) {
			w.t.Fatalf("message %v: %s = %s, want %s", got, k, g, mustJSON(v))
		}
	}
	return got
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func textEvent(s string) *pb.AgentEvent {
	return &pb.AgentEvent{Event: &pb.AgentEvent_TextDelta{TextDelta: &pb.TextDelta{Text: s}}}
}

func TestWebSocketOrigin(t *testing.T) {
	ts := newTestServer(t, Options{AllowedOrigins: []string{"https://app.example.com"}})
	if _, resp, err := ts.dial(t, "https://evil.example.com"); err == nil || resp == nil || resp.StatusCode != 403 {
		t.Fatalf("foreign origin: %v %v, want 403", err, resp)
	}
	for _, o := range []string{"https://app.example.com", ts.srv.URL, ""} {
		ws, _, err := ts.dial(t, o)
		if err != nil {
			t.Fatalf("origin %q: %v", o, err)
		}
		ws.c.CloseNow()
	}
}

func TestWebSocketBadToken(t *testing.T) {
	ts := newTestServer(t, Options{})
	ws, _, err := ts.dial(t, "")
	if err != nil {
		t.Fatal(err)
	}
	ws.send(map[string]any{"type": "hello", "token": "bct_bad"})
	ws.expect(Event{"type": "error", "code": "UNAUTHENTICATED"})
	if _, _, err := ws.c.Read(ws.ctx); websocket.CloseStatus(err) != 4401 {
		t.Fatalf("close: %v, want 4401", err)
	}
}

func TestWebSocketStream(t *testing.T) {
	ts := newTestServer(t, Options{})
	ts.fake.addSession(&pb.SessionSummary{Id: "s1", Name: "one"})
	ts.fake.appendEvent("s1", textEvent("a"))
	ts.fake.appendEvent("s1", textEvent("b"))
	ts.fake.allow = []string{"Bash(ls)"}

	ws, snap := ts.hello(t, nil)
	if mustJSON(snap["sessions"]) == "[]" || !strings.Contains(mustJSON(snap["permissionRules"]), "Bash(ls)") || snap["machine"] == nil {
		t.Fatalf("snapshot = %v", snap)
	}

	ws.send(map[string]any{"type": "subscribe", "id": "1", "sessionId": "s1", "afterSequence": 0})
	var got []Event
	for len(got) < 4 {
		got = append(got, ws.read())
	}
	// The ack may come at any point; the session's items come in order.
	var items []string
	for _, e := range got {
		switch e["type"] {
		case "ack":
			if e["id"] != "1" {
				t.Fatalf("ack %v", e)
			}
		default:
			items = append(items, mustJSON(e["type"])+mustJSON(e["seq"]))
		}
	}
	if strings.Join(items, ",") != `"lead_output"1,"lead_output"2,"replay_done"2` {
		t.Fatalf("stream = %v", got)
	}
	ts.fake.appendEvent("s1", textEvent("c"))
	ws.expect(Event{"type": "lead_output", "seq": 3, "text": "c", "sessionId": "s1"})

	t.Run("malformed and unknown messages", func(t *testing.T) {
		if err := ws.c.Write(ws.ctx, websocket.MessageText, []byte("{oops")); err != nil {
			t.Fatal(err)
		}
		if e := ws.expect(Event{"type": "error", "code": "INVALID_ARGUMENT"}); e["seq"] != nil {
			t.Fatalf("error has a seq: %v", e)
		}
		ws.send(map[string]any{"type": "dance", "id": "d"})
		ws.expect(Event{"type": "error", "id": "d", "code": "INVALID_ARGUMENT"})
		ws.send(map[string]any{"type": "ping", "id": "p"})
		ws.expect(Event{"type": "pong", "id": "p"})
	})

	t.Run("actions", func(t *testing.T) {
		ws.send(map[string]any{"type": "permission_response", "id": "a1", "sessionId": "s1", "requestId": "r1", "behavior": "deny", "message": "no"})
		ws.expect(Event{"type": "ack", "id": "a1", "sequence": 7})
		ws.send(map[string]any{"type": "permission_response", "id": "a2", "sessionId": "s1", "requestId": "r1", "behavior": "allow"})
		ws.expect(Event{"type": "error", "id": "a2", "sessionId": "s1", "code": "PERMISSION_NOT_PENDING"})
		ws.send(map[string]any{"type": "user_message", "id": "a3", "sessionId": "s1", "text": "hi"})
		ws.expect(Event{"type": "ack", "id": "a3"})
		ws.send(map[string]any{"type": "cancel", "id": "a4"})
		ws.expect(Event{"type": "error", "id": "a4", "code": "INVALID_ARGUMENT"})
	})

	t.Run("session list", func(t *testing.T) {
		pending := &pb.AgentEvent{Sequence: 4, Event: &pb.AgentEvent_PermissionRequest{PermissionRequest: &pb.PermissionRequest{RequestId: "r9", ToolName: "Bash"}}}
		ts.fake.pushUpdate(&pb.SessionUpdate{Session: &pb.SessionSummary{Id: "s2"}})
		if e := ws.expect(Event{"type": "session_created"}); !strings.Contains(mustJSON(e), `"id":"s2"`) {
			t.Fatalf("session_created = %v", e)
		}
		ts.fake.pushUpdate(&pb.SessionUpdate{Session: &pb.SessionSummary{Id: "s1", PendingPrompts: 1, AgentStatus: pb.AgentStatus_WAITING_FOR_USER},
			Pending: []*pb.AgentEvent{pending}, Cause: pending})
		u := ws.expect(Event{"type": "session_updated"})
		if !strings.Contains(mustJSON(u), `"requestId":"r9"`) || !strings.Contains(mustJSON(u), `"status":"waiting"`) {
			t.Fatalf("session_updated = %v", u)
		}
		status := &pb.AgentEvent{Event: &pb.AgentEvent_StatusChange{StatusChange: &pb.StatusChange{Status: pb.AgentStatus_THINKING}}}
		ts.fake.pushUpdate(&pb.SessionUpdate{Session: &pb.SessionSummary{Id: "s1", AgentStatus: pb.AgentStatus_THINKING}, Cause: status})
		ws.expect(Event{"type": "session_updated"})
		ws.expect(Event{"type": "permission_resolved", "sessionId": "s1", "requestId": "r9"})
		ws.expect(Event{"type": "session_status", "sessionId": "s1", "status": "running", "agentStatus": "thinking"})
		ts.fake.pushUpdate(&pb.SessionUpdate{Session: &pb.SessionSummary{Id: "s2"}, Deleted: true})
		ws.expect(Event{"type": "session_deleted", "sessionId": "s2"})
	})

	t.Run("rules pushed", func(t *testing.T) {
		st, _, body := ts.call(t, "POST", "/api/permission-rules", goodToken, map[string]any{"toolName": "Edit", "behavior": "deny"})
		if st != 201 {
			t.Fatalf("add rule = %d %s", st, body)
		}
		if e := ws.expect(Event{"type": "permission_rules_updated"}); !strings.Contains(mustJSON(e["rules"]), `"rule":"Edit"`) {
			t.Fatalf("rules = %v", e)
		}
	})

	t.Run("unsubscribe and resubscribe caught up", func(t *testing.T) {
		ws.send(map[string]any{"type": "unsubscribe", "id": "u", "sessionId": "s1"})
		ws.expect(Event{"type": "ack", "id": "u"})
		ws.send(map[string]any{"type": "subscribe", "sessionId": "s1", "afterSequence": 3})
		ws.expect(Event{"type": "replay_done", "sessionId": "s1", "seq": 3})
		ws.send(map[string]any{"type": "subscribe", "sessionId": "gone", "afterSequence": 0})
		if e := ws.expect(Event{"type": "subscription_ended", "sessionId": "gone", "code": "SESSION_NOT_FOUND"}); e["retryAfterMs"] != nil {
			t.Fatalf("a final end carries retryAfterMs: %v", e)
		}
		// The relay's hint for a machine moving between replicas is passed
		// on (the web app subscribes again after it); a final end has none.
		ws.send(map[string]any{"type": "subscribe", "sessionId": movingSession, "afterSequence": 0})
		ws.expect(Event{"type": "subscription_ended", "sessionId": movingSession, "code": "MACHINE_OFFLINE", "retryAfterMs": 100})
	})

	closed := make(chan struct{})
	go func() {
		defer close(closed)
		ts.h.Close()
	}()
	if _, _, err := ws.c.Read(ws.ctx); websocket.CloseStatus(err) != websocket.StatusGoingAway {
		t.Fatalf("after Close: %v, want 1001", err)
	}
	<-closed
}

func TestWebSocketHelloSubscriptions(t *testing.T) {
	ts := newTestServer(t, Options{})
	ts.fake.addSession(&pb.SessionSummary{Id: "s1"})
	for _, s := range []string{"a", "b", "c", "d"} {
		ts.fake.appendEvent("s1", textEvent(s))
	}
	ws, _ := ts.hello(t, map[string]any{"subscriptions": []map[string]any{{"sessionId": "s1", "afterSequence": 2}}})
	ws.expect(Event{"type": "lead_output", "seq": 3, "text": "c"})
	ws.expect(Event{"type": "lead_output", "seq": 4, "text": "d"})
	ws.expect(Event{"type": "replay_done", "seq": 4})
}

func TestWebSocketHelloTimeout(t *testing.T) {
	ts := newTestServer(t, Options{})
	ts.h.timing.hello = 50 * time.Millisecond
	ws, _, err := ts.dial(t, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := ws.c.Read(ws.ctx); websocket.CloseStatus(err) != websocket.StatusPolicyViolation {
		t.Fatalf("without hello: %v, want close 1008", err)
	}
}

func TestWebSocketNotHello(t *testing.T) {
	ts := newTestServer(t, Options{})
	ws, _, err := ts.dial(t, "")
	if err != nil {
		t.Fatal(err)
	}
	ws.send(map[string]any{"type": "ping"})
	ws.expect(Event{"type": "error", "code": "INVALID_ARGUMENT"})
	if _, _, err := ws.c.Read(ws.ctx); websocket.CloseStatus(err) != websocket.StatusPolicyViolation {
		t.Fatalf("close: %v, want 1008", err)
	}
}

// TestWebSocketSlowClient checks that a client that stops reading is cut
// off rather than buffered without bound.
func TestWebSocketSlowClient(t *testing.T) {
	ts := newTestServer(t, Options{})
	ts.h.timing.enqueue, ts.h.timing.write = 20*time.Millisecond, 200*time.Millisecond
	ts.fake.addSession(&pb.SessionSummary{Id: "s1"})
	big := strings.Repeat("x", 256<<10)
	for range 200 {
		ts.fake.appendEvent("s1", textEvent(big))
	}
	ws, _ := ts.hello(t, map[string]any{"subscriptions": []map[string]any{{"sessionId": "s1"}}})
	// The client reads nothing until the server has given up on it.
	done := make(chan struct{})
	go func() {
		defer close(done)
		ts.h.hubsMu.Lock()
		var s *socket
		for _, hub := range ts.h.hubs {
			hub.mu.Lock()
			for x := range hub.subs {
				s = x
			}
			hub.mu.Unlock()
		}
		ts.h.hubsMu.Unlock()
		if s != nil {
			<-s.ctx.Done()
		}
	}()
	<-done
	n := 0
	for {
		if _, _, err := ws.c.Read(ws.ctx); err != nil {
			break
		}
		n++
	}
	if n >= 200 {
		t.Fatalf("the slow client got all %d events; want it cut off", n)
	}
}

// TestWebSocketsShareWatch checks that the sockets of one caller share one
// WatchSessions stream, which ends with the last of them, and that each
// still checks its own token.
func TestWebSocketsShareWatch(t *testing.T) {
	ts := newTestServer(t, Options{})
	ts.fake.addSession(&pb.SessionSummary{Id: "s1"})
	a, _ := ts.hello(t, nil)
	b, snap := ts.hello(t, nil)
	if !strings.Contains(mustJSON(snap["sessions"]), `"id":"s1"`) {
		t.Fatalf("second snapshot = %v", snap)
	}
	ts.fake.pushUpdate(&pb.SessionUpdate{Session: &pb.SessionSummary{Id: "s2"}})
	a.expect(Event{"type": "session_created"})
	b.expect(Event{"type": "session_created"})
	c, snap := ts.hello(t, nil)
	if !strings.Contains(mustJSON(snap["sessions"]), `"id":"s2"`) {
		t.Fatalf("third snapshot misses the new session: %v", snap)
	}
	ts.fake.mu.Lock()
	n := ts.fake.watches
	ts.fake.mu.Unlock()
	if n != 1 {
		t.Fatalf("%d WatchSessions streams for three sockets of one caller, want 1", n)
	}

	bad, _, err := ts.dial(t, "")
	if err != nil {
		t.Fatal(err)
	}
	bad.send(map[string]any{"type": "hello", "token": "bct_bad"})
	bad.expect(Event{"type": "error", "code": "UNAUTHENTICATED"})

	for _, w := range []*testWS{a, b, c} {
		w.c.Close(websocket.StatusNormalClosure, "")
	}
	<-ts.fake.watchEnd // the shared stream ended with the last socket
}

// TestWebSocketWatchFails checks that the sockets of a failed session-list
// stream are told and closed (1012), and that a new socket starts afresh.
func TestWebSocketWatchFails(t *testing.T) {
	ts := newTestServer(t, Options{})
	a, _ := ts.hello(t, nil)
	b, _ := ts.hello(t, nil)
	ts.fake.watchErr <- betcodeErr(codes.Unavailable, "AGENT_SHUTTING_DOWN", "agent is shutting down", nil)
	for _, w := range []*testWS{a, b} {
		w.expect(Event{"type": "error", "code": "AGENT_SHUTTING_DOWN"})
		if _, _, err := w.c.Read(w.ctx); websocket.CloseStatus(err) != websocket.StatusServiceRestart {
			t.Fatalf("close: %v, want 1012", err)
		}
	}
	c, _ := ts.hello(t, nil)
	ts.fake.mu.Lock()
	if ts.fake.watches != 2 {
		t.Fatalf("%d WatchSessions calls, want 2 (a fresh one after the failure)", ts.fake.watches)
	}
	ts.fake.mu.Unlock()
	// The machine moving between relay replicas: the relay's hint goes
	// with the error, so that the app comes back when it says.
	ts.fake.watchErr <- betcodeErr(codes.Unavailable, "MACHINE_OFFLINE", "Target machine is not connected", map[string]string{"retry_after_ms": "100"})
	c.expect(Event{"type": "error", "code": "MACHINE_OFFLINE", "retryAfterMs": 100})
	if _, _, err := c.c.Read(c.ctx); websocket.CloseStatus(err) != websocket.StatusServiceRestart {
		t.Fatalf("close: %v, want 1012", err)
	}
}
