package fakecore

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"
)

type req struct{ seq int }

// Requests are numbered from 1 in arrival order; a request that takes a
// queued reply gets the first one, one that does not leaves the queue alone.
func TestRecordNumbersAndTakesQueuedReplies(t *testing.T) {
	c := New[req, string](nil)
	c.Enqueue("first", "second")
	for _, tt := range []struct {
		take       bool
		wantReply  string
		wantQueued bool
		wantLeft   int
	}{
		{true, "first", true, 1},
		{false, "", false, 1},
		{true, "second", true, 0},
		{true, "", false, 0},
	} {
		var r req
		reply, queued := c.Record(func(seq int) req { r = req{seq: seq}; return r }, tt.take)
		if reply != tt.wantReply || queued != tt.wantQueued || c.Pending() != tt.wantLeft {
			t.Fatalf("request %d: reply %q queued %v pending %d; want %q %v %d", r.seq, reply, queued, c.Pending(), tt.wantReply, tt.wantQueued, tt.wantLeft)
		}
	}
	reqs := c.Requests()
	if len(reqs) != 4 || reqs[0].seq != 1 || reqs[3].seq != 4 {
		t.Fatalf("requests %v", reqs)
	}
}

// Wait wakes on each new request and gives up with its context.
func TestWait(t *testing.T) {
	c := New[req, string](nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got := make(chan []req, 1)
	go func() {
		reqs, _ := c.WaitRequests(ctx, 2)
		got <- reqs
	}()
	for range 2 {
		c.Record(func(seq int) req { return req{seq: seq} }, false)
	}
	if reqs := <-got; len(reqs) != 2 {
		t.Fatalf("WaitRequests(2) returned %d requests", len(reqs))
	}
	short, stop := context.WithCancel(ctx)
	stop()
	if _, err := c.WaitRequests(short, 3); !errors.Is(err, context.Canceled) {
		t.Fatalf("WaitRequests past its context: %v", err)
	}
}

// A stalled reply's sleep ends when the server closes; a zero one returns
// at once; the listener serves and then stops.
func TestSleepAndClose(t *testing.T) {
	c := New[req, string](nil)
	if !c.Sleep(context.Background(), 0) {
		t.Fatal("Sleep(0) was cut short")
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.RecordOther(r)
		w.WriteHeader(http.StatusNoContent)
	})
	if err := c.Listen("", "fake test", h); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(c.URL() + "/x")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if o := c.OtherRequests(); len(o) != 1 || o[0] != "GET /x" {
		t.Fatalf("other requests %v", o)
	}
	slept := make(chan bool, 1)
	go func() { slept <- c.Sleep(context.Background(), -1) }()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if <-slept {
		t.Fatal("a stalled sleep finished instead of being cut short by Close")
	}
	if _, err := http.Get(c.URL() + "/x"); err == nil {
		t.Fatal("still serving after Close")
	}
}
