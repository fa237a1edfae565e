package webapi

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// readSession reads a socket's items of one session until the event with
// sequence until, and checks that they are exactly after+1..until in
// order, with one replay_done, which follows an event it names (or names
// after itself when nothing was missed).
func readSession(t *testing.T, w *testWS, id string, after, until uint64) {
	t.Helper()
	want := after + 1
	dones := 0
	for want <= until {
		e := w.read()
		switch e["type"] {
		case "ack":
			continue
		case "replay_done":
			dones++
			if seq := uint64(e["seq"].(float64)); seq != want-1 || dones > 1 {
				t.Fatalf("replay_done %v after seq %d (%d replay_done)", e, want-1, dones)
			}
			continue
		case "lead_output":
		default:
			t.Fatalf("message %v, want session items", e)
		}
		if e["sessionId"] != id {
			t.Fatalf("message %v of another session", e)
		}
		if seq := uint64(e["seq"].(float64)); seq != want {
			t.Fatalf("seq %d, want %d (after %d): a gap or a duplicate", seq, want, after)
		}
		want++
	}
	if dones == 0 { // the last event was the one replay_done waited for
		w.expect(Event{"type": "replay_done", "sessionId": id, "seq": until})
	}
}

// feedSubs is the number of subscriptions of the session's shared feed
// (-1: no feed).
// waitFeedSubs waits, on the handler's feed events, until session id's
// shared feed has n subscriptions.
func waitFeedSubs(t *testing.T, ts *testServer, id string, n int) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for feedSubs(ts, id) != n {
		select {
		case <-ts.feeds:
		case <-deadline:
			t.Fatalf("%d subscriptions on the shared feed of %s, want %d", feedSubs(ts, id), id, n)
		}
	}
}

func feedSubs(ts *testServer, id string) int {
	ts.h.hubsMu.Lock()
	defer ts.h.hubsMu.Unlock()
	n := -1
	for _, hub := range ts.h.hubs {
		hub.mu.Lock()
		if f := hub.feeds[id]; f != nil {
			f.mu.Lock()
			n = len(f.subs)
			f.mu.Unlock()
		}
		hub.mu.Unlock()
	}
	return n
}

// TestWebSocketsShareSessionStream checks that the sockets of one caller
// watching one session share one stream, and that each still gets exactly
// the events after its own afterSequence, once and in order, while events
// keep coming as they subscribe.
func TestWebSocketsShareSessionStream(t *testing.T) {
	ts := newTestServer(t, Options{})
	ts.fake.addSession(&pb.SessionSummary{Id: "s1"})
	for i := range 3 {
		ts.fake.appendEvent("s1", textEvent(fmt.Sprint(i)))
	}
	// The sockets are read one after the other: the events must fit in
	// a socket's queue (maxQueued) while it waits for its turn.
	const sockets, events = 6, 300
	var wss []*testWS
	for range sockets {
		ws, _ := ts.hello(t, nil)
		wss = append(wss, ws)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range events {
			ts.fake.appendEvent("s1", textEvent(fmt.Sprint(i)))
			if i%16 == 0 {
				time.Sleep(time.Millisecond) // pacing: events keep arriving while the sockets subscribe
			}
		}
	})
	for i, ws := range wss {
		ws.send(map[string]any{"type": "subscribe", "id": "x", "sessionId": "s1", "afterSequence": i % 4})
	}
	for i, ws := range wss {
		readSession(t, ws, "s1", uint64(i%4), 3+events)
	}
	wg.Wait()
	// Caught up, every subscription rides the one feed.
	waitFeedSubs(t, ts, "s1", sockets)
	ts.fake.appendEvent("s1", textEvent("live"))
	for _, ws := range wss {
		ws.expect(Event{"type": "lead_output", "seq": 4 + events, "text": "live"})
	}

	// Resubscribing from further back replays the gap, then joins again.
	wss[0].send(map[string]any{"type": "subscribe", "sessionId": "s1", "afterSequence": 100})
	readSession(t, wss[0], "s1", 100, 4+events)
	ts.fake.appendEvent("s1", textEvent("more"))
	for _, ws := range wss {
		ws.expect(Event{"type": "lead_output", "seq": 5 + events, "text": "more"})
	}

	// The feed ends with its last subscription.
	for _, ws := range wss {
		ws.send(map[string]any{"type": "unsubscribe", "id": "u", "sessionId": "s1"})
		ws.expect(Event{"type": "ack", "id": "u"})
	}
	if n := feedSubs(ts, "s1"); n != -1 {
		t.Fatalf("feed with %d subscriptions left after every unsubscribe", n)
	}
}

// TestWebSocketSlowClientSharedFeed checks that a socket that stops reading
// is closed (1013) without holding up another socket on the same feed.
func TestWebSocketSlowClientSharedFeed(t *testing.T) {
	ts := newTestServer(t, Options{})
	ts.h.timing.enqueue, ts.h.timing.write = 50*time.Millisecond, 500*time.Millisecond
	ts.fake.addSession(&pb.SessionSummary{Id: "s1"})
	fast, _ := ts.hello(t, map[string]any{"subscriptions": []map[string]any{{"sessionId": "s1"}}})
	slow, _ := ts.hello(t, map[string]any{"subscriptions": []map[string]any{{"sessionId": "s1"}}})
	fast.expect(Event{"type": "replay_done", "seq": 0})
	slow.expect(Event{"type": "replay_done", "seq": 0})
	waitFeedSubs(t, ts, "s1", 2)
	big := strings.Repeat("x", 64<<10)
	// The producer keeps pace with the fast client; the slow one reads
	// nothing until the end.
	const events = 300
	for seq := 1; seq <= events; seq++ {
		ts.fake.appendEvent("s1", textEvent(big))
		fast.expect(Event{"type": "lead_output", "seq": seq})
	}
	n := 0
	for {
		_, _, err := slow.c.Read(slow.ctx)
		if err != nil {
			if websocket.CloseStatus(err) != websocket.StatusTryAgainLater && n >= events {
				t.Fatalf("slow client: %v after %d messages, want it cut off (1013)", err, n)
			}
			break
		}
		n++
	}
	if n >= events {
		t.Fatalf("the slow client got all %d events; want it cut off", n)
	}
}

// TestWebSocketLongReplayIsPaced checks that replaying a long history goes
// at the client's pace (a socket's own stream waits for room in its queue)
// rather than overflowing the queue of a client that reads slowly.
func TestWebSocketLongReplayIsPaced(t *testing.T) {
	ts := newTestServer(t, Options{})
	ts.fake.addSession(&pb.SessionSummary{Id: "s1"})
	const events = 3 * maxQueued
	for i := range events {
		ts.fake.appendEvent("s1", textEvent(fmt.Sprint(i)))
	}
	ws, _ := ts.hello(t, map[string]any{"subscriptions": []map[string]any{{"sessionId": "s1"}}})
	for seq := 1; seq <= events; seq++ {
		if seq < 2*sendQueue {
			time.Sleep(2 * time.Millisecond) // slower than the stream
		}
		ws.expect(Event{"type": "lead_output", "seq": seq})
	}
	ws.expect(Event{"type": "replay_done", "seq": events})
	ts.fake.appendEvent("s1", textEvent("live"))
	ws.expect(Event{"type": "lead_output", "seq": events + 1})
	waitFeedSubs(t, ts, "s1", 1)
}
