package h2front

import (
	"net/http"
	"testing"

	"golang.org/x/net/http2"

	"github.com/betcode-dev/betcode/shared/leakcheck"
)

// TestDetachedStream: a handler that detaches returns while its stream
// stays open; the holder writes the answer later and finishes it, once.
// A detached stream whose connection ends has its context done, and the
// connection's end waits for the holder's finish.
func TestDetachedStream(t *testing.T) {
	leakcheck.Goroutines(t)
	type held struct {
		w      http.ResponseWriter
		r      *http.Request
		finish func(bool)
	}
	calls := make(chan held, 2)
	ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		finish := w.(interface{ Detach() func(bool) }).Detach()
		calls <- held{w, r, finish}
	}), nil)
	rc := dialRaw(t, ts.addr)
	rc.handshake()
	rc.writeHeaders(1, true, rc.headerBlock("/late"))
	rc.flush()
	h := <-calls
	h.w.Header().Set("X-Late", "yes")
	if _, err := h.w.Write([]byte("written after the handler returned")); err != nil {
		t.Fatal(err)
	}
	h.finish(false)
	h.finish(true) // a second finish does nothing
	var body []byte
	for ended := false; !ended; {
		switch f := rc.read().(type) {
		case *http2.MetaHeadersFrame:
			if f.StreamID == 1 && f.PseudoValue("status") == "200" {
				found := false
				for _, hf := range f.RegularFields() {
					found = found || hf.Name == "x-late" && hf.Value == "yes"
				}
				if !found {
					t.Errorf("headers %v: no x-late", f.RegularFields())
				}
			}
			ended = f.StreamEnded()
		case *http2.DataFrame:
			body = append(body, f.Data()...)
			ended = f.StreamEnded()
		case *http2.RSTStreamFrame:
			t.Fatalf("stream reset: %v", f.ErrCode)
		}
	}
	if string(body) != "written after the handler returned" {
		t.Errorf("body %q", body)
	}

	// The connection ends while a stream is detached.
	rc.writeHeaders(3, true, rc.headerBlock("/late"))
	rc.flush()
	h = <-calls
	_ = rc.tc.Close()
	<-h.r.Context().Done()
	h.finish(false)
}
