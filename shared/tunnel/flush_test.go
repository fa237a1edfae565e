package tunnel

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// fakeRoundTripper answers every request with resp.
type fakeRoundTripper struct{ resp *http.Response }

func (f fakeRoundTripper) RoundTrip(*http.Request) (*http.Response, error) { return f.resp, nil }

// flushRecorder is a ResponseWriter that reports each Flush.
type flushRecorder struct {
	*httptest.ResponseRecorder
	flushed chan int // the bytes written so far, at each Flush
}

func (f *flushRecorder) Flush() { f.flushed <- f.Body.Len() }

// chunkBody returns its chunks one Read at a time, then blocks until
// released.
type chunkBody struct {
	chunks  [][]byte
	release chan struct{}
}

func (b *chunkBody) Read(p []byte) (int, error) {
	if len(b.chunks) == 0 {
		<-b.release
		return 0, io.EOF
	}
	n := copy(p, b.chunks[0])
	b.chunks = b.chunks[1:]
	return n, nil
}

func (b *chunkBody) Close() error { return nil }

// bufferedChunkBody is a chunkBody that says what it holds.
type bufferedChunkBody struct{ *chunkBody }

func (b bufferedChunkBody) Buffered() (int, bool) {
	if len(b.chunks) == 0 {
		return 0, false
	}
	return len(b.chunks[0]), false
}

// An agent's message that exactly fills the copy loop's read buffer must
// reach the client before the agent's next one, whatever the body can say
// about itself: the relay's own front sends nothing until a flush, so a
// bidi call whose agent waits for the client's reply would otherwise hang.
// Bytes the body already holds are flushed with the next read's.
func TestForwardFlushesWhatIsHere(t *testing.T) {
	for _, tc := range []struct {
		name     string
		buffered bool
		chunks   []int
		flushAt  []int // bytes written at each flush before the body blocks
	}{
		{"a read that fills the buffer, net/http's body", false, []int{quietChunk}, []int{0, quietChunk}},
		{"a read that fills the buffer, a body that says it holds nothing more", true, []int{quietChunk}, []int{quietChunk}},
		{"two chunks already here leave in one flush", true, []int{100, 200}, []int{300}},
		{"net/http's body: headers, then each read flushed", false, []int{100, 200}, []int{0, 100, 300}},
		// A stream resumed on an idle session: its headers must reach the
		// client now, not with the session's next event (net/http's body
		// cannot say, so its headers always go at once).
		{"headers with nothing behind them, a body that says so", true, nil, []int{0}},
		{"headers with nothing behind them, net/http's body", false, nil, []int{0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cb := &chunkBody{release: make(chan struct{})}
			for _, n := range tc.chunks {
				cb.chunks = append(cb.chunks, []byte(strings.Repeat("x", n)))
			}
			var body io.ReadCloser = cb
			if tc.buffered {
				body = bufferedChunkBody{cb}
			}
			resp := &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/grpc"}}, Body: body, Trailer: http.Header{}}
			w := &flushRecorder{ResponseRecorder: httptest.NewRecorder(), flushed: make(chan int, 8)}
			r := httptest.NewRequest("POST", "/grpc.testing.TestService/FullDuplexCall", nil)
			done := make(chan error, 1)
			go func() {
				done <- forwardH2(context.Background(), fakeRoundTripper{resp}, "http", "machine", w, r, nil, nil)
			}()
			for i, want := range tc.flushAt {
				select {
				case got := <-w.flushed:
					if got != want {
						t.Fatalf("flush %d after %d bytes; want %d", i, got, want)
					}
				case <-time.After(10 * time.Second):
					t.Fatalf("no flush %d (want one after %d bytes) while the agent waits", i, want)
				}
			}
			select {
			case got := <-w.flushed:
				t.Fatalf("an extra flush after %d bytes", got)
			default:
			}
			close(cb.release)
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		})
	}
}
