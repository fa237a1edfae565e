package h2front

import (
	"net/http"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/betcode-dev/betcode/shared/leakcheck"
)

// TestResetUnblocksAWriteAndTellsTheClient: a handler whose writes wait for
// a client that does not grant window (it reads, but never sends
// WINDOW_UPDATE) is reset from another goroutine, as the relay's drain does
// with a stream it ended: the blocked Write returns an error, and the
// client gets RST_STREAM(REFUSED_STREAM), which gRPC clients retry.
func TestResetUnblocksAWriteAndTellsTheClient(t *testing.T) {
	leakcheck.Goroutines(t)
	writers := make(chan http.ResponseWriter, 1)
	writeErr := make(chan error, 1)
	ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writers <- w
		buf := make([]byte, 16<<10)
		for {
			if _, err := w.Write(buf); err != nil {
				writeErr <- err
				return
			}
		}
	}), nil)
	rc := dialRaw(t, ts.addr)
	rc.handshake()
	rc.writeHeaders(1, true, rc.headerBlock("/download"))
	rc.flush()
	w := <-writers
	// Read until the stream's window (65,535 bytes) is used up.
	got := 0
	for got < 65535 {
		if d, ok := rc.read().(*http2.DataFrame); ok && d.StreamID == 1 {
			got += len(d.Data())
		}
	}
	w.(Resetter).Reset()
	select {
	case err := <-writeErr:
		if err == nil {
			t.Fatal("the blocked Write returned no error")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the blocked Write did not return after Reset")
	}
	for {
		f := rc.read()
		if rst, ok := f.(*http2.RSTStreamFrame); ok && rst.StreamID == 1 {
			if rst.ErrCode != http2.ErrCodeRefusedStream {
				t.Fatalf("RST_STREAM %v, want REFUSED_STREAM", rst.ErrCode)
			}
			break
		}
	}
	w.(Resetter).Reset() // once over, a no-op
}
