package h2client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/betcode-dev/betcode/shared/leakcheck"
)

// blockingBody is a request body whose Close blocks until release is
// closed, as the relay's server request body does while a handler holds its
// client connection's lock. Read blocks until Close is entered.
type blockingBody struct {
	closing chan struct{} // closed when Close is entered
	release chan struct{}
	once    sync.Once
}

func newBlockingBody() *blockingBody {
	return &blockingBody{closing: make(chan struct{}), release: make(chan struct{})}
}

func (b *blockingBody) Read([]byte) (int, error) {
	<-b.closing
	return 0, errors.New("body closed")
}

func (b *blockingBody) Close() error {
	b.once.Do(func() { close(b.closing) })
	<-b.release
	return nil
}

// TestReqBodyCloseBlocks: the reader goroutine ends a call whose request
// body's Close blocks (a reset from the server, a malformed answer, a
// connection error). While that Close is blocked, other calls on the Conn
// complete and the server's PINGs are answered; after a connection error,
// Close returns.
func TestReqBodyCloseBlocks(t *testing.T) {
	tests := []struct {
		name      string
		hit       func(rc *rawConn, id uint32) // ends stream id
		connFails bool
	}{
		{name: "RST_STREAM", hit: func(rc *rawConn, id uint32) { rc.fr.WriteRSTStream(id, http2.ErrCodeCancel) }},
		{name: "malformed answer", hit: func(rc *rawConn, id uint32) { rc.writeHeaders(id, false, "x-no-status", "1") }},
		{name: "connection error", connFails: true, hit: func(rc *rawConn, id uint32) {
			rc.fr.WritePushPromise(http2.PushPromiseParam{StreamID: id, PromiseID: 2, EndHeaders: true,
				BlockFragment: rc.encode(":method", "GET", ":scheme", "http", ":authority", "x", ":path", "/p")})
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			leakcheck.Goroutines(t)
			got := make(chan string, 10)
			addr := startRaw(t, func(rc *rawConn) {
				tc.hit(rc, rc.nextHeaders().StreamID)
				rc.drain(func(f http2.Frame) {
					switch f := f.(type) {
					case *http2.MetaHeadersFrame:
						rc.writeHeaders(f.StreamID, true, ":status", "200")
						rc.fr.WritePing(false, [8]byte{'s', 'r', 'v'})
					case *http2.PingFrame:
						if f.IsAck() && f.Data == [8]byte{'s', 'r', 'v'} {
							got <- "ping ack"
						}
					}
				})
			})
			cc, _ := dial(t, addr, Options{})
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			body := newBlockingBody()
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/", body)
			// The failed call's own goroutine may close the body too, and
			// wait in that Close as a caller may: it runs apart, and its
			// Close is let go at the end.
			first := make(chan error, 1)
			go func() {
				_, err := cc.RoundTrip(req)
				first <- err
			}()
			defer func() { // before the goroutine check
				close(body.release)
				if err := <-first; err == nil {
					t.Error("call succeeded")
				}
			}()
			select {
			case <-body.closing:
			case <-ctx.Done():
				t.Fatal("request body not closed")
			}
			if tc.connFails {
				closed := make(chan struct{})
				go func() { cc.Close(); close(closed) }()
				select {
				case <-closed:
				case <-ctx.Done():
					t.Fatal("Close hung: the reader is stuck in the request body's Close")
				}
				return
			}
			resp, err := cc.RoundTrip(simpleReq(ctx, addr))
			if err != nil {
				t.Fatalf("second call: %v", err)
			}
			resp.Body.Close()
			select {
			case <-got:
			case <-ctx.Done():
				t.Fatal("server PING not answered")
			}
			if err := cc.Err(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// gateConn holds, once armed, the first write carrying a DATA frame with
// END_STREAM until release is closed: the body writer stops between
// writing its END_STREAM and going on.
type gateConn struct {
	net.Conn
	armed   atomic.Bool
	blocked chan struct{} // closed when the write is held
	release chan struct{}
}

func (g *gateConn) Write(p []byte) (int, error) {
	if g.armed.Load() && hasEndStreamData(p) {
		g.armed.Store(false)
		close(g.blocked)
		<-g.release
	}
	return g.Conn.Write(p)
}

// hasEndStreamData reports whether the frames in p include DATA with
// END_STREAM.
func hasEndStreamData(p []byte) bool {
	fr := http2.NewFramer(nil, bytes.NewReader(p))
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return false
		}
		if d, ok := f.(*http2.DataFrame); ok && d.StreamEnded() {
			return true
		}
	}
}

// TestNoResetAfterBothEnds: the answer has ended and the body writer is in
// the middle of writing the request's END_STREAM when the caller reads the
// answer's EOF. The stream ended both ways: no RST_STREAM may follow.
func TestNoResetAfterBothEnds(t *testing.T) {
	leakcheck.Goroutines(t)
	got := make(chan string, 10)
	addr := startRaw(t, func(rc *rawConn) {
		rc.drain(func(f http2.Frame) {
			switch f := f.(type) {
			case *http2.MetaHeadersFrame:
				got <- fmt.Sprintf("headers %d", f.StreamID)
				rc.writeHeaders(f.StreamID, false, ":status", "200")
				rc.fr.WriteData(f.StreamID, true, []byte("ok"))
			case *http2.DataFrame:
				if f.StreamEnded() {
					got <- fmt.Sprintf("end %d", f.StreamID)
				}
			case *http2.RSTStreamFrame:
				got <- fmt.Sprintf("rst %d %v", f.StreamID, f.ErrCode)
			}
		})
	})
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	g := &gateConn{Conn: nc, blocked: make(chan struct{}), release: make(chan struct{})}
	var releaseOnce sync.Once
	release := func() { releaseOnce.Do(func() { close(g.release) }) }
	defer release()
	cc, err := New(context.Background(), g, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })

	pr, pw := io.Pipe()
	defer pw.Close()
	resp, err := cc.RoundTrip(grpcReq(context.Background(), addr, "/x", pr))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the answer's END_STREAM", func() bool {
		n, ended := resp.Body.(Buffered).Buffered()
		return n == 2 && ended
	})
	g.armed.Store(true)
	pw.Close() // the body writer sends END_STREAM; its write is held
	select {
	case <-g.blocked:
	case <-time.After(5 * time.Second):
		t.Fatal("END_STREAM not written")
	}
	read := make(chan error, 1)
	go func() {
		_, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		read <- err
	}()
	// Before the fix the stream stayed open until the caller's EOF reset
	// it; now it closed when END_STREAM was buffered. Either way, release
	// the write only once it is out of the open streams.
	waitFor(t, "stream closed", func() bool { cc.mu.Lock(); defer cc.mu.Unlock(); return len(cc.streams) == 0 })
	release()
	if err := <-read; err != nil {
		t.Fatal(err)
	}
	// A second call: whatever the first left to write precedes its HEADERS.
	resp, err = cc.RoundTrip(simpleReq(context.Background(), addr))
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	var seen []string
	for e := range got {
		seen = append(seen, e)
		if e == "headers 3" {
			break
		}
	}
	if want := "headers 1,end 1,headers 3"; strings.Join(seen, ",") != want {
		t.Fatalf("server saw %s, want %s", strings.Join(seen, ","), want)
	}
}

// idleBody is a request body that holds first, says so, and then waits
// with nothing buffered until it is closed, as an idle bidi stream's body
// (an end-to-end channel between its messages) does on the relay.
type idleBody struct {
	mu      sync.Mutex
	first   []byte
	closed  chan struct{}
	once    sync.Once
	waiting *atomic.Int64 // reads blocked for lack of bytes
}

func (b *idleBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	if len(b.first) > 0 {
		n := copy(p, b.first)
		b.first = b.first[n:]
		b.mu.Unlock()
		return n, nil
	}
	b.mu.Unlock()
	b.waiting.Add(1)
	defer b.waiting.Add(-1)
	<-b.closed
	return 0, errors.New("body closed")
}

func (b *idleBody) Buffered() (int, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.first), false
}

func (b *idleBody) Close() error {
	b.once.Do(func() { close(b.closed) })
	return nil
}

// TestIdleStreamsHoldNoReadBuffer: a stream whose request body has nothing
// to read, and whose answer so far has been read, holds no pooled buffer
// while it waits (before: 32 KiB for the next read of the request, the
// 16 KiB that carried its first bytes, and 16 KiB for the answer): the
// relay keeps one such stream per idle end-to-end channel, and issue 22
// allows it 8 KiB.
func TestIdleStreamsHoldNoReadBuffer(t *testing.T) {
	leakcheck.Goroutines(t)
	addr := startAnswering(t, frame([]byte("an answer, read")), false)
	cc, _ := dial(t, addr, Options{})
	const n = 400
	var waiting atomic.Int64
	before := liveHeap()
	bodies := make([]*idleBody, 0, n)
	resps := make([]*http.Response, 0, n)
	for range n {
		b := &idleBody{first: frame([]byte("hello")), closed: make(chan struct{}), waiting: &waiting}
		resp, err := cc.RoundTrip(grpcReq(context.Background(), addr, "/t/Idle", b))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := readMsg(resp.Body); err != nil {
			t.Fatal(err)
		}
		bodies, resps = append(bodies, b), append(resps, resp)
	}
	waitFor(t, "every stream's body writer waiting", func() bool { return waiting.Load() == n })
	per := float64(liveHeap()-before) / n / 1024
	for i, b := range bodies {
		b.Close()
		resps[i].Body.Close()
	}
	t.Logf("heap per idle stream: %.1f KiB", per)
	if per > 8 {
		t.Errorf("each idle stream holds %.1f KiB of heap, want at most 8 (no read buffer while it waits)", per)
	}
}
