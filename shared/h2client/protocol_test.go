package h2client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/betcode-dev/betcode/shared/leakcheck"
)

// TestRequestEncoding: pseudo-headers, lower-cased regular headers without
// connection-specific ones, a header block split into CONTINUATION frames;
// a 1xx answer is skipped, trailers arrive before EOF, and a RST_STREAM
// NO_ERROR after END_STREAM (request body still open) does not fail the
// call but does close the request body.
func TestRequestEncoding(t *testing.T) {
	leakcheck.Goroutines(t)
	got := make(chan map[string]string, 1)
	long := strings.Repeat("v", 40<<10) // over 16 KiB: needs CONTINUATION
	addr := startRaw(t, func(rc *rawConn) {
		h := rc.nextHeaders()
		m := map[string]string{}
		for _, f := range h.Fields {
			m[f.Name] += f.Value
		}
		got <- m
		id := h.StreamID
		rc.writeHeaders(id, false, ":status", "100")
		rc.writeHeaders(id, false, ":status", "200", "x-a", "1", "x-a", "2")
		rc.fr.WriteData(id, false, []byte("hi"))
		rc.writeHeaders(id, true, "x-t", "done")
		rc.fr.WriteRSTStream(id, http2.ErrCodeNo)
		rc.drain(nil)
	})
	cc, _ := dial(t, addr, Options{})
	pr, pw := io.Pipe()
	defer pw.Close()
	body := newCloseFlag(pr)
	req, _ := http.NewRequest(http.MethodPut, "http://u.example/a%2Fb/c?q=1&r", body)
	req.Host = "h.example"
	req.Header.Set("X-Custom", "v")
	req.Header.Set("X-Long", long)
	req.Header.Set("Connection", "close")
	req.Header.Set("Keep-Alive", "1")
	req.Header.Set("Upgrade", "x")
	req.Header.Set("Transfer-Encoding", "chunked")
	req.Header.Set("Te", "trailers")
	resp, err := cc.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	m := <-got
	want := map[string]string{
		":method": "PUT", ":scheme": "http", ":authority": "h.example", ":path": "/a%2Fb/c?q=1&r",
		"x-custom": "v", "x-long": long, "te": "trailers",
	}
	for k, v := range want {
		if m[k] != v {
			t.Errorf("%s = %.40q, want %.40q", k, m[k], v)
		}
	}
	for _, k := range []string{"connection", "keep-alive", "upgrade", "transfer-encoding", "host"} {
		if _, ok := m[k]; ok {
			t.Errorf("%s sent", k)
		}
	}
	if resp.StatusCode != 200 || strings.Join(resp.Header["X-A"], ",") != "1,2" {
		t.Fatalf("status %d header %v", resp.StatusCode, resp.Header)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil || string(b) != "hi" {
		t.Fatalf("body %q, %v", b, err)
	}
	if resp.Trailer.Get("X-T") != "done" {
		t.Fatalf("trailer %v", resp.Trailer)
	}
	resp.Body.Close()
	// The reader closes it from a goroutine of its own (stopReqBody).
	body.waitClosed(t)
}

// TestInvalidHeader: a header value with CR, LF or NUL fails RoundTrip.
func TestInvalidHeader(t *testing.T) {
	leakcheck.Goroutines(t)
	addr := startRaw(t, func(rc *rawConn) { rc.drain(nil) })
	cc, _ := dial(t, addr, Options{})
	for _, v := range []string{"a\r\nb: c", "a\nb", "a\x00"} {
		req := simpleReq(context.Background(), addr)
		req.Header["X-Bad"] = []string{v}
		if _, err := cc.RoundTrip(req); err == nil || !strings.Contains(err.Error(), "invalid value") {
			t.Fatalf("%q: %v", v, err)
		}
	}
	if cc.Err() != nil {
		t.Fatal(cc.Err())
	}
}

// TestMaxConcurrentStreams: with the peer's limit at 1, a second call waits
// until the first is done.
func TestMaxConcurrentStreams(t *testing.T) {
	leakcheck.Goroutines(t)
	got := make(chan string, 10)
	addr := startRaw(t, func(rc *rawConn) {
		rc.drain(func(f http2.Frame) {
			switch f := f.(type) {
			case *http2.MetaHeadersFrame:
				got <- "headers"
				rc.writeHeaders(f.StreamID, f.StreamID > 1, ":status", "200")
			case *http2.RSTStreamFrame:
				got <- "rst " + f.ErrCode.String()
			}
		})
	}, http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: 1})
	cc, _ := dial(t, addr, Options{})
	waitFor(t, "SETTINGS", func() bool { cc.mu.Lock(); defer cc.mu.Unlock(); return cc.gotSettings })
	resp1, err := cc.RoundTrip(simpleReq(context.Background(), addr))
	if err != nil {
		t.Fatal(err)
	}
	<-got
	done := make(chan error, 1)
	go func() {
		resp, err := cc.RoundTrip(simpleReq(context.Background(), addr))
		if err == nil {
			_, err = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		done <- err
	}()
	select {
	case e := <-got:
		t.Fatalf("second stream opened while the first is open: %s", e)
	case <-time.After(50 * time.Millisecond): // a negative check, not synchronisation
	}
	resp1.Body.Close() // RST_STREAM CANCEL frees the slot
	if e := <-got; e != "rst CANCEL" {
		t.Fatalf("got %q", e)
	}
	if e := <-got; e != "headers" {
		t.Fatalf("got %q", e)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestSendFlowControl: a 5000-byte body against a peer whose initial window
// is 1000, lowered to 500 mid-stream (window goes negative), then refilled
// by WINDOW_UPDATEs; the server checks no DATA exceeds its window.
func TestSendFlowControl(t *testing.T) {
	leakcheck.Goroutines(t)
	result := make(chan string, 1)
	addr := startRaw(t, func(rc *rawConn) {
		win, total, step := int64(1000), 0, 0
		rc.drain(func(f http2.Frame) {
			d, ok := f.(*http2.DataFrame)
			if !ok {
				return
			}
			win -= int64(len(d.Data()))
			total += len(d.Data())
			rc.fr.WriteWindowUpdate(0, uint32(len(d.Data())))
			if win < 0 {
				result <- "window exceeded"
				return
			}
			if win == 0 && step == 0 {
				step++
				rc.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 500})
				win -= 500
				rc.fr.WriteWindowUpdate(d.StreamID, 600)
				win += 600
			} else if win == 0 && step == 1 {
				step++
				rc.fr.WriteWindowUpdate(d.StreamID, 10000)
				win += 10000
			}
			if d.StreamEnded() {
				rc.writeHeaders(d.StreamID, true, ":status", "200")
				result <- strings.Repeat("x", total)
			}
		})
	}, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1000})
	cc, _ := dial(t, addr, Options{})
	waitFor(t, "SETTINGS", func() bool { cc.mu.Lock(); defer cc.mu.Unlock(); return cc.gotSettings })
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/", newBufBody(make([]byte, 5000)))
	resp, err := cc.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if r := <-result; len(r) != 5000 {
		t.Fatalf("server: %.40s (%d)", r, len(r))
	}
}

// TestCloseDuringCalls: Close fails a waiting RoundTrip and a blocked Read
// with an error wrapping the cause; later calls fail fast.
func TestCloseDuringCalls(t *testing.T) {
	leakcheck.Goroutines(t)
	addr := startRaw(t, func(rc *rawConn) {
		h := rc.nextHeaders()
		rc.writeHeaders(h.StreamID, false, ":status", "200")
		rc.drain(nil)
	})
	cc, _ := dial(t, addr, Options{})
	resp, err := cc.RoundTrip(simpleReq(context.Background(), addr))
	if err != nil {
		t.Fatal(err)
	}
	rt := make(chan error, 1)
	go func() { _, err := cc.RoundTrip(simpleReq(context.Background(), addr)); rt <- err }()
	rd := make(chan error, 1)
	go func() { _, err := resp.Body.Read(make([]byte, 1)); rd <- err }()
	cc.Close()
	cc.Close() // idempotent
	for _, ch := range []chan error{rt, rd} {
		if err := <-ch; !errors.Is(err, errClosed) {
			t.Fatalf("got %v", err)
		}
	}
	if _, err := cc.RoundTrip(simpleReq(context.Background(), addr)); !errors.Is(err, errClosed) {
		t.Fatalf("got %v", err)
	}
	resp.Body.Close()
}

// errAfter is a request body that yields some bytes, then an error.
type errAfter struct{ n int }

func (e *errAfter) Read(p []byte) (int, error) {
	if e.n == 0 {
		return 0, errors.New("disk on fire")
	}
	m := min(len(p), e.n)
	e.n -= m
	return m, nil
}
func (e *errAfter) Close() error { return nil }

// TestRequestBodyError: a request body read error resets the stream with
// CANCEL and fails the call.
func TestRequestBodyError(t *testing.T) {
	leakcheck.Goroutines(t)
	got := make(chan string, 10)
	addr := startRaw(t, func(rc *rawConn) {
		rc.drain(func(f http2.Frame) {
			if r, ok := f.(*http2.RSTStreamFrame); ok {
				got <- "rst " + r.ErrCode.String()
			}
		})
	})
	cc, _ := dial(t, addr, Options{})
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/", &errAfter{n: 100})
	if _, err := cc.RoundTrip(req); err == nil || !strings.Contains(err.Error(), "disk on fire") {
		t.Fatalf("got %v", err)
	}
	if e := <-got; e != "rst CANCEL" {
		t.Fatalf("server saw %q", e)
	}
	if cc.Err() != nil {
		t.Fatal(cc.Err())
	}
}

// TestGoAwayRefused: a stream above GOAWAY's last-stream-id fails with a
// retryable error and the idle connection closes.
func TestGoAwayRefused(t *testing.T) {
	leakcheck.Goroutines(t)
	addr := startRaw(t, func(rc *rawConn) {
		rc.nextHeaders()
		rc.fr.WriteGoAway(0, http2.ErrCodeNo, []byte("draining"))
		rc.drain(nil)
	})
	cc, _ := dial(t, addr, Options{})
	_, err := cc.RoundTrip(simpleReq(context.Background(), addr))
	var ge *goAwayRefusedError
	if !errors.As(err, &ge) || !strings.Contains(err.Error(), "retryable") {
		t.Fatalf("got %v", err)
	}
	if err := cc.Err(); err == nil || !strings.Contains(err.Error(), "GOAWAY") {
		t.Fatalf("Err() = %v", err)
	}
	if _, err := cc.RoundTrip(simpleReq(context.Background(), addr)); err == nil {
		t.Fatal("new call after GOAWAY succeeded")
	}
}

// TestContentLength: content-length comes only from req.ContentLength (a
// header of that name is dropped), and the body is held to it: a body
// longer or shorter fails the call, before the stream opens if RoundTrip
// sees it, else with RST_STREAM CANCEL and no byte beyond the length sent.
func TestContentLength(t *testing.T) {
	leakcheck.Goroutines(t)
	got := make(chan string, 10)
	addr := startRaw(t, func(rc *rawConn) {
		sent := map[uint32]int{}
		rc.drain(func(f http2.Frame) {
			id, end := f.Header().StreamID, false
			switch f := f.(type) {
			case *http2.MetaHeadersFrame:
				var cl []string
				for _, hf := range f.Fields {
					if hf.Name == "content-length" {
						cl = append(cl, hf.Value)
					}
				}
				got <- fmt.Sprintf("headers %d cl=%s", id, strings.Join(cl, ","))
				end = f.StreamEnded()
			case *http2.DataFrame:
				sent[id] += len(f.Data())
				end = f.StreamEnded()
			case *http2.RSTStreamFrame:
				got <- fmt.Sprintf("rst %d %v after %d bytes", id, f.ErrCode, sent[id])
			}
			if end {
				rc.writeHeaders(id, true, ":status", "200")
			}
		})
	})
	cc, _ := dial(t, addr, Options{})
	streaming := func(s string) io.ReadCloser { return io.NopCloser(strings.NewReader(s)) }
	buffered := func(s string) io.ReadCloser { return newBufBody([]byte(s)) }
	tests := []struct {
		name    string
		body    io.ReadCloser
		length  int64
		callErr string   // empty: the call succeeds
		srvSees []string // in order
	}{
		{"buffered, header dropped", buffered("abc"), 3, "", []string{"headers 1 cl=3"}},
		{"streaming, unknown length", streaming("abc"), 0, "", []string{"headers 3 cl="}},
		{"buffered, too long", buffered("0123456789"), 5, "larger than its ContentLength of 5", nil},
		{"buffered, too short", buffered("abc"), 10, "ended after 3 bytes, before its ContentLength of 10", nil},
		{"streaming, too long", streaming("0123456789"), 5, "larger than its ContentLength of 5",
			[]string{"headers 5 cl=5", "rst 5 CANCEL after 0 bytes"}},
		{"streaming, too short", streaming("abc"), 10, "ended after 3 bytes, before its ContentLength of 10",
			[]string{"headers 7 cl=10", "rst 7 CANCEL after 3 bytes"}},
	}
	for _, tc := range tests {
		req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/", tc.body)
		req.ContentLength = tc.length
		req.Header.Set("Content-Length", "999")
		resp, err := cc.RoundTrip(req)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		if tc.callErr == "" && err != nil || tc.callErr != "" && (err == nil || !strings.Contains(err.Error(), tc.callErr)) {
			t.Fatalf("%s: call error %v, want %q", tc.name, err, tc.callErr)
		}
		for _, want := range tc.srvSees {
			select {
			case e := <-got:
				if e != want {
					t.Fatalf("%s: server saw %q, want %q", tc.name, e, want)
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("%s: server did not see %q", tc.name, want)
			}
		}
	}
	if err := cc.Err(); err != nil {
		t.Fatal(err)
	}
}
