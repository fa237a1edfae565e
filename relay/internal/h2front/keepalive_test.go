package h2front

import (
	"net/http"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/betcode-dev/betcode/shared/leakcheck"
)

// TestKeepalive: a silent connection is sent a PING after KeepaliveTime;
// a peer that answers keeps its connection (and is pinged again at the
// next silence), one that does not is closed KeepaliveTimeout later.
func TestKeepalive(t *testing.T) {
	leakcheck.Goroutines(t)
	const every, grace = 50 * time.Millisecond, 100 * time.Millisecond
	ts := startServer(t, http.NotFoundHandler(), func(s *Server) { s.KeepaliveTime, s.KeepaliveTimeout = every, grace })

	// nextPing reads until the server's keepalive PING.
	nextPing := func(rc *rawClient) *http2.PingFrame {
		for {
			if p, ok := rc.read().(*http2.PingFrame); ok && !p.IsAck() {
				return p
			}
		}
	}

	t.Run("answered", func(t *testing.T) {
		rc := dialRaw(t, ts.addr)
		rc.handshake()
		for range 3 {
			p := nextPing(rc)
			if p.Data != keepalivePing {
				t.Fatalf("PING data %q", p.Data)
			}
			_ = rc.bfr.WritePing(true, p.Data)
			rc.flush()
		}
		// Still open: a request is answered.
		rc.writeHeaders(1, true, rc.headerBlock("/x"))
		rc.flush()
		for {
			if h, ok := rc.read().(*http2.MetaHeadersFrame); ok {
				if h.PseudoValue("status") != "404" {
					t.Fatalf("status %q after the PINGs were answered", h.PseudoValue("status"))
				}
				break
			}
		}
	})

	t.Run("unanswered", func(t *testing.T) {
		rc := dialRaw(t, ts.addr)
		rc.handshake()
		nextPing(rc)
		start := time.Now()
		rc.expectClosed()
		if d := time.Since(start); d < grace/2 {
			t.Errorf("closed %v after the PING, before its timeout (%v)", d, grace)
		}
	})
}
