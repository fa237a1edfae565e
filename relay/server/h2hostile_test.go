package server

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/betcode-dev/betcode/shared/mtls"
)

// TestHostileHTTP2 sends the relay's public port the frame-level attacks
// that HTTP/2 servers on the internet get, from a client holding a valid
// token (so the unauthenticated-connection timer does not end them first).
// Each attack must end with the relay closing the attacking connection or
// refusing the attacking stream, while another client's calls are still
// answered and the relay's goroutines come back down. Both fronts face
// the same attacks: net/http's, and the relay's own HTTP/2 engine
// (--front=engine, docs/relay-h2-engine.md).
func TestHostileHTTP2(t *testing.T) {
	for _, front := range []string{FrontNetHTTP, FrontEngine} {
		t.Run(strings.ReplaceAll(front, "/", "-"), func(t *testing.T) { testHostileHTTP2(t, front) })
	}
}

func testHostileHTTP2(t *testing.T, front string) {
	r := startWebRelay(t, func(c *Config) { c.Front = front })
	tok := r.token(t, "mallory")
	healthy := r.healthClient(t)
	healthy(t) // connected before the attacks, so the count below includes it
	base := runtime.NumGoroutine()

	t.Run("CONTINUATION flood", func(t *testing.T) {
		// A header block that never ends (CVE-2023-45288): the relay
		// must give up long before it has read all the attacker sends.
		h := dialH2(t, r)
		junk := hpackBlock(hpack.HeaderField{Name: "x-junk", Value: strings.Repeat("a", 8000)})
		first := hpackBlock(callFields(r.addr, "/betcode.v1.AgentService/ListSessions", tok)...)
		sent := 0
		err := h.write(func(fr *http2.Framer) error {
			if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: first}); err != nil {
				return err
			}
			for sent < 64<<20 && !h.ended() {
				if err := fr.WriteContinuation(1, false, junk); err != nil {
					return err
				}
				sent += len(junk)
			}
			return nil
		})
		end := h.waitEnd(t)
		t.Logf("the relay ended the connection after %d KiB of header block (%v; last write: %v)", sent>>10, end, err)
		if sent >= 64<<20 {
			t.Errorf("the relay read %d MiB of one header block without ending the connection", sent>>20)
		}
	})

	t.Run("HPACK bomb", func(t *testing.T) {
		// One 4 KiB value put in the dynamic table, then named by index
		// 4,000 times: a few KiB on the wire that decode to 16 MiB.
		h := dialH2(t, r)
		var buf bytes.Buffer
		enc := hpack.NewEncoder(&buf)
		for _, f := range callFields(r.addr, "/betcode.v1.AgentService/ListSessions", tok) {
			enc.WriteField(f)
		}
		enc.WriteField(hpack.HeaderField{Name: "x-bomb", Value: strings.Repeat("b", 4000)}) // indexed: 62
		for range 4000 {
			buf.WriteByte(0x80 | 62) // indexed header field 62: the bomb again
		}
		block := buf.Bytes()
		err := h.write(func(fr *http2.Framer) error {
			for i := 0; len(block) > 0; i++ {
				n := min(len(block), 16<<10)
				var err error
				if i == 0 {
					err = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block[:n], EndHeaders: n == len(block), EndStream: true})
				} else {
					err = fr.WriteContinuation(1, n == len(block), block[:n])
				}
				if err != nil {
					return err
				}
				block = block[n:]
			}
			return nil
		})
		if err != nil {
			t.Fatalf("write: %v", err)
		}
		status, end := h.waitStream(t, 1)
		t.Logf("stream 1: status %q, connection: %v", status, end)
		if status != "431" && end == "" {
			t.Errorf("a header list that decodes to 16 MiB was answered %q; want 431, a reset, or the connection ended", status)
		}
	})

	t.Run("PING flood, answers not read", func(t *testing.T) {
		// Each PING wants an answer the attacker never reads: the answers
		// queue in the relay until it gives up on the connection.
		h := dialH2Unread(t, r)
		sent := 0
		err := h.write(func(fr *http2.Framer) error {
			for ; sent < 2_000_000; sent++ {
				if err := fr.WritePing(false, [8]byte{byte(sent), byte(sent >> 8), byte(sent >> 16)}); err != nil {
					return err
				}
			}
			return nil
		})
		if err == nil || strings.Contains(err.Error(), "stopped reading") {
			t.Errorf("after %d PINGs whose answers were never read: %v; want the connection ended", sent, err)
		}
		t.Logf("the connection ended after %d PINGs: %v", sent, err)
		h.startReader()
		h.waitEnd(t)
	})

	t.Run("SETTINGS flood, answers not read", func(t *testing.T) {
		// net/http answers any number of SETTINGS frames with one ACK, so
		// nothing queues: the relay must keep reading them (no stall),
		// and a connection that never made a call is still closed by the
		// authentication timer.
		h := dialH2Unread(t, r)
		err := h.write(func(fr *http2.Framer) error {
			for range 500_000 {
				if err := fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 20}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil && strings.Contains(err.Error(), "stopped reading") {
			t.Error(err)
		}
		h.startReader()
		t.Logf("ended: %s", h.waitEnd(t))
	})

	t.Run("stream ids going backwards", func(t *testing.T) {
		h := dialH2(t, r)
		block := hpackBlock(callFields(r.addr, "/grpc.health.v1.Health/Check", tok)...)
		err := h.write(func(fr *http2.Framer) error {
			if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 5, BlockFragment: block, EndHeaders: true}); err != nil {
				return err
			}
			return fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: block, EndHeaders: true})
		})
		if err != nil {
			t.Fatalf("write: %v", err)
		}
		if end := h.waitEnd(t); !strings.Contains(end, "PROTOCOL_ERROR") {
			t.Errorf("connection ended with %q; want a GOAWAY with PROTOCOL_ERROR", end)
		}
	})

	t.Run("oversized frame", func(t *testing.T) {
		h := dialH2(t, r)
		block := hpackBlock(callFields(r.addr, "/grpc.health.v1.Health/Check", tok)...)
		err := h.write(func(fr *http2.Framer) error {
			if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block, EndHeaders: true}); err != nil {
				return err
			}
			// net/http reads frames of up to 1 MiB (and says so in its
			// SETTINGS); this one is four times that.
			return fr.WriteData(1, true, make([]byte, 4<<20))
		})
		if err != nil {
			t.Logf("write: %v", err)
		}
		// The GOAWAY can be lost to the reset that closing a connection
		// with unread input sends; either way the connection must end.
		if end := h.waitEnd(t); !strings.Contains(end, "FRAME_SIZE_ERROR") && !strings.Contains(end, "reset") {
			t.Errorf("connection ended with %q; want a GOAWAY with FRAME_SIZE_ERROR", end)
		}
	})

	t.Run("rapid reset", func(t *testing.T) {
		// CVE-2023-44487: streams opened and reset at once, as fast as
		// the client can write. The relay may throttle or end the
		// connection; it must keep answering others, and what the
		// streams started must end with them.
		h := dialH2(t, r)
		block := hpackBlock(callFields(r.addr, "/betcode.v1.AgentService/ListSessions", tok)...)
		var id uint32 = 1
		err := h.write(func(fr *http2.Framer) error {
			for ; id < 2*20_000 && !h.ended(); id += 2 {
				if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block, EndHeaders: true}); err != nil {
					return err
				}
				if err := fr.WriteRSTStream(id, http2.ErrCodeCancel); err != nil {
					return err
				}
			}
			return nil
		})
		t.Logf("%d streams opened and reset (last write: %v)", id/2, err)
		healthy(t)
		h.close()
		h.waitEnd(t)
	})

	healthy(t)
	// What the attacks started has ended: the relay's goroutines come back
	// to about where they were (a few belong to idle connections and
	// timers that come and go).
	// Nothing announces a goroutine's end: the count is checked on a
	// ticker, up to a deadline.
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	timeout := time.After(30 * time.Second)
	for n := runtime.NumGoroutine(); n > base+20; n = runtime.NumGoroutine() {
		select {
		case <-tick.C:
		case <-timeout:
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines 30 s after the attacks, %d before:\n%s", n, base, buf[:runtime.Stack(buf, true)])
		}
	}
}

// healthClient returns a check that the relay answers another client's
// gRPC call within 10 s, over one connection kept for the test.
func (r *webRelay) healthClient(t *testing.T) func(t *testing.T) {
	cfg, err := mtls.ClientConfig(r.caFile, "", "", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	cc, err := grpc.NewClient(r.addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	hc := healthpb.NewHealthClient(cc)
	return func(t *testing.T) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		res, err := hc.Check(ctx, &healthpb.HealthCheckRequest{})
		if err != nil || res.Status != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("another client's health check: %v %v", res, err)
		}
	}
}

// callFields are the header fields of a gRPC call with a token.
func callFields(authority, path, token string) []hpack.HeaderField {
	return []hpack.HeaderField{
		{Name: ":method", Value: "POST"}, {Name: ":scheme", Value: "https"},
		{Name: ":authority", Value: authority}, {Name: ":path", Value: path},
		{Name: "content-type", Value: "application/grpc"}, {Name: "te", Value: "trailers"},
		{Name: "authorization", Value: "Bearer " + token},
	}
}

// hpackBlock encodes fields with a fresh encoder.
func hpackBlock(fields ...hpack.HeaderField) []byte {
	var buf bytes.Buffer
	enc := hpack.NewEncoder(&buf)
	for _, f := range fields {
		enc.WriteField(f)
	}
	return buf.Bytes()
}

// h2Attacker is a raw HTTP/2 connection to the relay: frames written by
// the test, frames read by a goroutine that notes how the connection and
// each stream ended. (A Framer may read in one goroutine while another
// writes, as net/http's own server does.)
type h2Attacker struct {
	c       *tls.Conn
	fr      *http2.Framer
	started bool
	done    chan struct{} // closed when the reader stops
	end     string        // how the connection ended; set before done closes
	streams chan streamEnd
}

// streamEnd is how the relay answered one stream.
type streamEnd struct {
	id     uint32
	status string // the answer's :status, or "RST_STREAM <code>"
}

// dialH2 opens an HTTP/2 connection to r's public port, sends the preface
// and an empty SETTINGS frame, and reads the relay's frames.
func dialH2(t *testing.T, r *webRelay) *h2Attacker {
	t.Helper()
	h := dialH2Unread(t, r)
	h.startReader()
	return h
}

// dialH2Unread is dialH2 that leaves the relay's frames unread until
// startReader (or for the test to read with h.fr).
func dialH2Unread(t *testing.T, r *webRelay) *h2Attacker {
	t.Helper()
	c := r.dialTLS(t, "h2")
	if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	h := &h2Attacker{c: c, fr: http2.NewFramer(c, c), done: make(chan struct{}), streams: make(chan streamEnd, 64)}
	h.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	if err := h.fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Close()
		h.startReader()
		<-h.done
	})
	return h
}

// startReader starts reading the relay's frames, once.
func (h *h2Attacker) startReader() {
	if h.started {
		return
	}
	h.started = true
	go func() {
		defer close(h.done)
		for {
			f, err := h.fr.ReadFrame()
			if err != nil {
				h.end = "closed: " + err.Error()
				return
			}
			var e streamEnd
			switch f := f.(type) {
			case *http2.GoAwayFrame:
				h.end = "GOAWAY " + f.ErrCode.String()
				return
			case *http2.MetaHeadersFrame:
				e = streamEnd{f.StreamID, f.PseudoValue("status")}
			case *http2.RSTStreamFrame:
				e = streamEnd{f.StreamID, "RST_STREAM " + f.ErrCode.String()}
			default:
				continue
			}
			select {
			case h.streams <- e:
			default: // nobody asked about this one
			}
		}
	}()
}

// write runs fn with the connection's framer, failing any write that the
// relay blocks for 20 s (it neither reads nor closes).
func (h *h2Attacker) write(fn func(*http2.Framer) error) error {
	h.c.SetWriteDeadline(time.Now().Add(20 * time.Second))
	defer h.c.SetWriteDeadline(time.Time{})
	err := fn(h.fr)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return errors.New("the relay stopped reading without closing the connection: " + err.Error())
	}
	return err
}

// ended reports whether the reader has seen the connection end.
func (h *h2Attacker) ended() bool {
	select {
	case <-h.done:
		return true
	default:
		return false
	}
}

// close closes the attacker's side.
func (h *h2Attacker) close() { h.c.Close() }

// waitEnd waits up to 20 s for the connection to end and says how.
func (h *h2Attacker) waitEnd(t *testing.T) string {
	t.Helper()
	select {
	case <-h.done:
		return h.end
	case <-time.After(20 * time.Second):
		t.Fatal("the relay kept the attacking connection open")
		return ""
	}
}

// waitStream waits up to 20 s for the relay's answer on stream id, or the
// connection's end.
func (h *h2Attacker) waitStream(t *testing.T, id uint32) (status, end string) {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case e := <-h.streams:
			if e.id == id {
				return e.status, ""
			}
		case <-h.done:
			return "", h.end
		case <-timeout:
			t.Fatalf("no answer on stream %d", id)
		}
	}
}
