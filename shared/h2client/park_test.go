package h2client

import (
	"context"
	"io"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/net/http2"

	"github.com/betcode-dev/betcode/shared/callpark"
	"github.com/betcode-dev/betcode/shared/leakcheck"
)

// notifyingBody is a request body that calls back (callpark.Notifier), as
// the relay's front's bodies do: Read never blocks on it while the client
// parks.
type notifyingBody struct {
	mu     sync.Mutex
	buf    []byte
	ended  bool
	closed bool
	notify func()
	reads  atomic.Int64 // reads that found nothing
}

func (b *notifyingBody) push(p []byte, end bool) {
	b.mu.Lock()
	b.buf = append(b.buf, p...)
	b.ended = b.ended || end
	f := b.notify
	b.notify = nil
	b.mu.Unlock()
	if f != nil {
		go f()
	}
}

func (b *notifyingBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.closed:
		return 0, http.ErrBodyReadAfterClose
	case len(b.buf) > 0:
		n := copy(p, b.buf)
		b.buf = b.buf[n:]
		return n, nil
	case b.ended:
		return 0, io.EOF
	}
	b.reads.Add(1) // a reader that would have waited
	return 0, nil
}

func (b *notifyingBody) Buffered() (int, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.buf), b.ended && len(b.buf) == 0
}

func (b *notifyingBody) Notify(f func()) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.buf) > 0 || b.ended || b.closed {
		return false
	}
	b.notify = f
	return true
}

func (b *notifyingBody) Close() error {
	b.mu.Lock()
	b.closed = true
	f := b.notify
	b.notify = nil
	b.mu.Unlock()
	if f != nil {
		go f()
	}
	return nil
}

// TestParkedRequestBodies: a request body that calls back is not waited
// on: streams whose bodies have nothing hold no goroutine, and what their
// bodies receive later, and their end, still reach the server.
func TestParkedRequestBodies(t *testing.T) {
	leakcheck.Goroutines(t)
	var data, ends atomic.Int64
	addr := startRaw(t, func(rc *rawConn) {
		rc.drain(func(f http2.Frame) {
			switch f := f.(type) {
			case *http2.MetaHeadersFrame:
				rc.writeHeaders(f.StreamID, false, ":status", "200", "content-type", "application/grpc")
				rc.fr.WriteData(f.StreamID, false, frame([]byte("taken")))
			case *http2.DataFrame:
				data.Add(int64(len(f.Data())))
				if f.StreamEnded() {
					ends.Add(1)
				}
			}
		})
	})
	cc, _ := dial(t, addr, Options{})
	const n = 200
	first := frame([]byte("hello"))
	base := runtime.NumGoroutine()
	bodies := make([]*notifyingBody, n)
	resps := make([]*http.Response, n)
	for i := range bodies {
		b := &notifyingBody{buf: append([]byte(nil), first...)}
		resp, err := cc.RoundTrip(grpcReq(context.Background(), addr, "/t/Parked", b))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := readMsg(resp.Body); err != nil {
			t.Fatal(err)
		}
		bodies[i], resps[i] = b, resp
	}
	waitFor(t, "the first messages at the server", func() bool { return data.Load() == int64(n*len(first)) })
	waitFor(t, "no goroutine per idle stream", func() bool { return runtime.NumGoroutine()-base < n/10 })
	for _, b := range bodies {
		if r := b.reads.Load(); r > 0 {
			t.Fatalf("a parked body was read %d times with nothing in it", r)
		}
	}
	more := frame([]byte("later"))
	for _, b := range bodies {
		b.push(more, true)
	}
	waitFor(t, "the later messages and the ends at the server", func() bool {
		return data.Load() == int64(n*(len(first)+len(more))) && ends.Load() == n
	})
	for _, r := range resps {
		r.Body.Close()
	}
}

// TestResponseBodyNotify: a response body calls back when its stream
// changes (data, its end, the call's context), and says false when a
// Read would not block.
func TestResponseBodyNotify(t *testing.T) {
	leakcheck.Goroutines(t)
	release := make(chan struct{}, 2)
	addr := startRaw(t, func(rc *rawConn) {
		var wmu sync.Mutex // the server writes from two goroutines
		rc.drain(func(f http2.Frame) {
			if f, ok := f.(*http2.MetaHeadersFrame); ok {
				wmu.Lock()
				rc.writeHeaders(f.StreamID, false, ":status", "200", "content-type", "application/grpc")
				wmu.Unlock()
				go func() {
					<-release
					wmu.Lock()
					defer wmu.Unlock()
					rc.fr.WriteData(f.StreamID, false, frame([]byte("later")))
					rc.writeHeaders(f.StreamID, true, "grpc-status", "0")
				}()
			}
		})
	})
	cc, _ := dial(t, addr, Options{})

	// Data, then the end.
	resp, err := cc.RoundTrip(grpcReq(context.Background(), addr, "/t/Notify", nil))
	if err != nil {
		t.Fatal(err)
	}
	nt := resp.Body.(callpark.Notifier)
	called := make(chan struct{}, 1)
	if !nt.Notify(func() { called <- struct{}{} }) {
		t.Fatal("Notify on a body with nothing yet reported false")
	}
	release <- struct{}{}
	<-called
	if msg, err := readMsg(resp.Body); err != nil || string(msg) != "later" {
		t.Fatalf("read %q, %v", msg, err)
	}
	waitFor(t, "the answer's end", func() bool { _, ended := resp.Body.(Buffered).Buffered(); return ended })
	if nt.Notify(func() { t.Error("called back after the end") }) {
		t.Error("Notify on an ended body reported true")
	}
	resp.Body.Close()

	// The call's context ends while it waits.
	ctx, cancel := context.WithCancel(context.Background())
	resp, err = cc.RoundTrip(grpcReq(ctx, addr, "/t/Notify", nil))
	if err != nil {
		t.Fatal(err)
	}
	if !resp.Body.(callpark.Notifier).Notify(func() { called <- struct{}{} }) {
		t.Fatal("Notify on a body with nothing yet reported false")
	}
	cancel()
	<-called
	if _, err := resp.Body.Read(make([]byte, 8)); err == nil {
		t.Fatal("read after the context ended: no error")
	}
	resp.Body.Close()
	release <- struct{}{} // the server's goroutine for the second call
}
