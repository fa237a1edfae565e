package h2front

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/betcode-dev/betcode/shared/leakcheck"
)

// TestCombinedFlushesLoseNone: many streams of one connection each write a
// few bytes and flush at once, then hold their calls open. Flushes of one
// connection are combined (a flush may leave its bytes to another handler's),
// so the test checks what a client relies on: every stream's bytes arrive
// while every handler still holds its call: no flush was skipped without
// another one sending its bytes. (How many writes they took is logged: it
// depends on the scheduler.)
func TestCombinedFlushesLoseNone(t *testing.T) {
	leakcheck.Goroutines(t)
	const streams = 64
	release := make(chan struct{})
	var ready sync.WaitGroup
	ready.Add(streams)
	ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ready.Done()
		ready.Wait() // all streams open: each flush sees the others
		fmt.Fprintf(w, "hello from %s", r.URL.Path)
		w.(http.Flusher).Flush()
		<-release
	}), func(s *Server) { s.MaxConcurrentStreams = streams })
	defer close(release)
	rc := dialRaw(t, ts.addr)
	rc.handshake()
	for i := range streams {
		rc.writeHeaders(uint32(2*i+1), true, rc.headerBlock(fmt.Sprintf("/s%d", i)))
	}
	rc.flush()
	c := ts.nextConn(t)
	got := map[uint32]string{}
	deadline := time.Now().Add(10 * time.Second)
	for len(got) < streams {
		if time.Now().After(deadline) {
			t.Fatalf("after 10 s, %d of %d streams' bytes arrived", len(got), streams)
		}
		if d, ok := rc.read().(*http2.DataFrame); ok {
			got[d.StreamID] += string(d.Data())
		}
	}
	for i := range streams {
		id := uint32(2*i + 1)
		if want := fmt.Sprintf("hello from /s%d", i); got[id] != want {
			t.Errorf("stream %d: %q, want %q", id, got[id], want)
		}
	}
	t.Logf("%d streams' flushes took %d writes", streams, c.writes.Load())
}
