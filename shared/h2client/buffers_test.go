package h2client

import (
	"context"
	"io"
	"testing"

	"github.com/betcode-dev/betcode/shared/leakcheck"
)

// TestIdleConnectionsHoldNoBuffers: a connection that carried calls and is
// now idle (a tunnel whose machine was called once) holds neither its
// 64 KiB read buffer nor its 64 KiB write buffer.
func TestIdleConnectionsHoldNoBuffers(t *testing.T) {
	leakcheck.Goroutines(t)
	addr := startAnswering(t, frame(pattern(0, 10000)), true)
	const n = 8 // startRaw takes up to 10 connections
	before := liveHeap()
	for range n {
		cc, _ := dial(t, addr, Options{})
		resp, err := cc.RoundTrip(grpcReq(context.Background(), addr, "/t/Once", newBufBody(frame([]byte("a call")))))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	per := float64(liveHeap()-before) / n / 1024
	t.Logf("heap per idle connection after a call: %.1f KiB", per)
	if per > 48 {
		t.Errorf("each idle connection holds %.1f KiB of heap, want at most 48 (no read or write buffer while idle)", per)
	}
}
