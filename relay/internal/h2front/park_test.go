package h2front

import (
	"io"
	"net/http"
	"slices"
	"sync"
	"testing"

	"golang.org/x/net/http2"

	"github.com/betcode-dev/betcode/shared/callpark"
	"github.com/betcode-dev/betcode/shared/leakcheck"
)

// parkingEcho is a handler chain of two layers around a call that parks
// until its request body has something, as the relay's forwarding does:
// the outer layer's end-of-call work goes through callpark.Then, the inner
// parks, and the body's callback echoes what came and ends the call.
type parkingEcho struct {
	mu     sync.Mutex
	order  []string
	parked chan struct{} // a handler returned with its call parked
	endNow bool          // end the call before the handler returns
}

func (p *parkingEcho) note(s string) {
	p.mu.Lock()
	p.order = append(p.order, s)
	p.mu.Unlock()
}

func (p *parkingEcho) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.inner(w, r)
	callpark.Then(w, func() { p.note("outer's end") })
	p.note("handler returned")
	p.parked <- struct{}{}
}

func (p *parkingEcho) inner(w http.ResponseWriter, r *http.Request) {
	park := callpark.Find(w)
	if park == nil {
		panic("h2front's ResponseWriter offers no Parker")
	}
	end := park.Park()
	if park.Park() != nil {
		panic("a second Park did not return nil")
	}
	callpark.Then(w, func() { p.note("inner's end") })
	w.WriteHeader(http.StatusOK)
	w.(http.Flusher).Flush()
	if p.endNow {
		p.note("ended")
		end(false)
		return
	}
	var echo func()
	echo = func() {
		buf := make([]byte, 64)
		n, err := r.Body.Read(buf)
		if n > 0 {
			w.Write(buf[:n])
			w.(http.Flusher).Flush()
		}
		if err != nil {
			p.note("ended")
			end(err != io.EOF)
			return
		}
		if !r.Body.(callpark.Notifier).Notify(echo) {
			echo() // readable already
		}
	}
	if !r.Body.(callpark.Notifier).Notify(echo) {
		panic("the body is readable before the client sent anything")
	}
}

// startParked serves parkingEcho and opens its first call (stream 1),
// returning once the handler returned.
func startParked(t *testing.T, endNow bool) (*parkingEcho, *rawClient) {
	h := &parkingEcho{parked: make(chan struct{}, 1), endNow: endNow}
	ts := startServer(t, h, nil)
	rc := dialRaw(t, ts.addr)
	rc.handshake()
	rc.writeHeaders(1, false, rc.headerBlock("/park"))
	rc.flush()
	<-h.parked
	return h, rc
}

// TestParkedCall: a parked call's handler returns with no goroutine left
// waiting for the call; the body's callback moves its bytes; at its end
// the layers' end-of-call work runs, innermost first and only after the
// handler returned, and then the stream is finished.
func TestParkedCall(t *testing.T) {
	leakcheck.Goroutines(t)
	for _, endNow := range []bool{false, true} {
		h, rc := startParked(t, endNow)
		if !endNow {
			_ = rc.bfr.WriteData(1, false, []byte("first "))
			rc.flush()
			_ = rc.bfr.WriteData(1, true, []byte("second"))
			rc.flush()
		}
		var body []byte
		for ended := false; !ended; {
			switch f := rc.read().(type) {
			case *http2.MetaHeadersFrame:
				ended = f.StreamID == 1 && f.StreamEnded()
			case *http2.DataFrame:
				body = append(body, f.Data()...)
				ended = f.StreamEnded()
			case *http2.RSTStreamFrame:
				t.Fatalf("stream reset: %v", f.ErrCode)
			}
		}
		want := []string{"handler returned", "ended", "inner's end", "outer's end"}
		if endNow {
			want = []string{"ended", "handler returned", "inner's end", "outer's end"}
		} else if string(body) != "first second" {
			t.Errorf("echoed %q, want %q", body, "first second")
		}
		h.mu.Lock()
		if !slices.Equal(h.order, want) {
			t.Errorf("endNow=%v: order %q, want %q", endNow, h.order, want)
		}
		h.mu.Unlock()
	}
}

// TestParkedCallReset: a parked call whose client resets the stream has
// its body's callback run (the read fails), and ends.
func TestParkedCallReset(t *testing.T) {
	leakcheck.Goroutines(t)
	h, rc := startParked(t, false)
	_ = rc.bfr.WriteRSTStream(1, http2.ErrCodeCancel)
	rc.flush()
	// The connection goes on: a second call is served.
	rc.writeHeaders(3, false, rc.headerBlock("/park"))
	rc.flush()
	<-h.parked
	_ = rc.bfr.WriteData(3, true, []byte("again"))
	rc.flush()
	for {
		if f, ok := rc.read().(*http2.DataFrame); ok && f.StreamID == 3 && f.StreamEnded() {
			break
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if n := len(h.order); n != 8 || h.order[n-1] != "outer's end" {
		t.Errorf("order %q: want both calls ended", h.order)
	}
}
