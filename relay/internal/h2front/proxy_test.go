package h2front

import (
	"bytes"
	"io"
	"net/http"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/betcode-dev/betcode/shared/leakcheck"
)

// bufferedBody is what the request body offers besides io.ReadCloser.
type bufferedBody interface {
	Buffered() (n int, ended bool)
}

// bodyStart is what a proxy-like handler saw of the body when it started.
type bodyStart struct {
	n     int
	ended bool
}

// proxyHandler forwards like a byte proxy: it copies the request body
// elsewhere and answers with one framed message and a Trailer:-prefixed
// grpc-status, without flushing.
func proxyHandler(seen chan<- bodyStart) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if bb, ok := r.Body.(bufferedBody); ok && seen != nil {
			n, ended := bb.Buffered()
			select {
			case seen <- bodyStart{n, ended}:
			default:
			}
		}
		var upstream bytes.Buffer
		if _, err := io.Copy(&upstream, r.Body); err != nil {
			return
		}
		reply := []byte("proxied:")
		if upstream.Len() > 5 {
			reply = append(reply, upstream.Bytes()[5:]...)
		}
		w.Header().Set("Content-Type", "application/grpc")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(grpcFrame(reply))
		w.Header().Set(http.TrailerPrefix+"Grpc-Status", "0")
	})
}

func TestProxyHandlerGRPCClient(t *testing.T) {
	leakcheck.Goroutines(t)
	ts := startServer(t, proxyHandler(nil), nil)
	cc := dialGRPC(t, ts.addr)
	for range 10 {
		out, err := unaryCall(withTimeout(t, 10*time.Second), cc, []byte("abc"))
		if err != nil {
			t.Fatal(err)
		}
		if string(out) != "proxied:abc" {
			t.Fatalf("got %q", out)
		}
	}
}

// TestClosedBodySaysNothingBuffered: a handler that closed the request body
// (a RoundTripper does, even when its dial failed) and then asks what it
// holds is told neither bytes nor an end, and a read fails: a whole request
// must not look like an empty one (the relay once forwarded a stream that
// way, and the agent answered "cardinality violation").
func TestClosedBodySaysNothingBuffered(t *testing.T) {
	leakcheck.Goroutines(t)
	type seen struct {
		before, after bodyStart
		readErr       error
	}
	got := make(chan seen, 1)
	ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		bb := r.Body.(bufferedBody)
		var s seen
		s.before.n, s.before.ended = bb.Buffered()
		r.Body.Close()
		s.after.n, s.after.ended = bb.Buffered()
		_, s.readErr = r.Body.Read(make([]byte, 16))
		got <- s
		w.Header().Set("Grpc-Status", "0")
		w.Header().Set("Content-Type", "application/grpc")
		w.WriteHeader(http.StatusOK)
	}), nil)
	rc := dialRaw(t, ts.addr)
	rc.handshake()
	msg := grpcFrame([]byte("abc"))
	// The whole request in one flush: the handler starts with it buffered
	// (TestUnaryAnswerOneWrite).
	rc.writeHeaders(1, false, rc.headerBlock(unaryPath))
	_ = rc.bfr.WriteData(1, true, msg)
	rc.flush()
	var s seen
	select {
	case s = <-got:
	case <-withTimeout(t, 10*time.Second).Done():
		t.Fatal("the handler never ran")
	}
	if !s.before.ended || s.before.n != len(msg) {
		t.Fatalf("before Close the body held %d bytes (ended %v), want the whole %d-byte request", s.before.n, s.before.ended, len(msg))
	}
	if s.after.n != 0 || s.after.ended {
		t.Errorf("after Close the body says %d bytes, ended %v; want 0, not ended", s.after.n, s.after.ended)
	}
	if s.readErr == nil || s.readErr == io.EOF {
		t.Errorf("a read after Close returned %v, want an error that is not EOF", s.readErr)
	}
}

func TestTrailersOnlyAnswer(t *testing.T) {
	leakcheck.Goroutines(t)
	ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Grpc-Status", "5")
		w.Header().Set("Grpc-Message", "nope")
		w.Header().Set("Content-Type", "application/grpc")
		w.WriteHeader(http.StatusOK)
	}), nil)
	cc := dialGRPC(t, ts.addr)
	_, err := unaryCall(withTimeout(t, 10*time.Second), cc, []byte("abc"))
	if st := status.Convert(err); st.Code() != codes.NotFound || st.Message() != "nope" {
		t.Fatalf("got %v", err)
	}

	// On the wire it is one HEADERS frame with END_STREAM.
	rc := dialRaw(t, ts.addr)
	rc.handshake()
	rc.writeHeaders(1, true, rc.headerBlock(unaryPath))
	rc.flush()
	for {
		f := rc.read()
		if f.Header().StreamID != 1 {
			continue
		}
		mh, ok := f.(*http2.MetaHeadersFrame)
		if !ok || !mh.StreamEnded() {
			t.Fatalf("got %v, want HEADERS with END_STREAM", f)
		}
		if mh.PseudoValue("status") != "200" || headerValue(mh, "grpc-status") != "5" || headerValue(mh, "grpc-message") != "nope" {
			t.Fatalf("fields %v", mh.Fields)
		}
		break
	}
}

func headerValue(mh *http2.MetaHeadersFrame, name string) string {
	for _, hf := range mh.Fields {
		if hf.Name == name {
			return hf.Value
		}
	}
	return ""
}

// TestUnaryAnswerOneWrite checks that a unary answer (HEADERS, DATA and
// trailers) costs exactly one write to the connection, and that the
// handler starts with the whole request body buffered.
func TestUnaryAnswerOneWrite(t *testing.T) {
	leakcheck.Goroutines(t)
	seen := make(chan bodyStart, 1)
	ts := startServer(t, proxyHandler(seen), nil)
	rc := dialRaw(t, ts.addr)
	sc := ts.nextConn(t)
	rc.handshake()
	// Make sure the server is idle: a PING round trip.
	ping := func() {
		_ = rc.bfr.WritePing(false, [8]byte{1})
		rc.flush()
		for {
			if pf, ok := rc.read().(*http2.PingFrame); ok && pf.IsAck() {
				return
			}
		}
	}
	ping()

	for i := range 5 {
		id := uint32(2*i + 1)
		before := sc.writes.Load()
		msg := grpcFrame([]byte("one write"))
		rc.writeHeaders(id, false, rc.headerBlock(unaryPath))
		_ = rc.bfr.WriteData(id, true, msg)
		rc.flush()

		var gotData, gotTrailers bool
		for !gotTrailers {
			f := rc.read()
			if f.Header().StreamID != id {
				continue
			}
			switch f := f.(type) {
			case *http2.MetaHeadersFrame:
				if f.StreamEnded() {
					gotTrailers = headerValue(f, "grpc-status") == "0"
					if !gotTrailers {
						t.Fatalf("trailers %v", f.Fields)
					}
				} else if f.PseudoValue("status") != "200" {
					t.Fatalf("headers %v", f.Fields)
				}
			case *http2.DataFrame:
				gotData = gotData || bytes.Contains(f.Data(), []byte("proxied:one write"))
			case *http2.RSTStreamFrame:
				t.Fatalf("RST_STREAM %v", f.ErrCode)
			}
		}
		if !gotData {
			t.Fatal("no DATA")
		}
		ping()
		if n := sc.writes.Load() - before; n != 2 {
			t.Fatalf("request %d: %d conn writes for answer + PING ack, want 2", i, n)
		}
		bs := <-seen
		if !bs.ended || bs.n != len(msg) {
			t.Fatalf("handler started with %d bytes buffered, ended=%v", bs.n, bs.ended)
		}
	}
}
