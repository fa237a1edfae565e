package h2front

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/betcode-dev/betcode/shared/leakcheck"
)

// TestNewStreamAfterClientGoAway: a stream opened after the client's own
// GOAWAY is refused, not left unanswered.
func TestNewStreamAfterClientGoAway(t *testing.T) {
	ts, bg := startHostile(t, nil)
	rc := dialRaw(t, ts.addr)
	rc.handshake()
	rc.writeHeaders(1, false, rc.headerBlock("/block")) // keeps the connection open
	_ = rc.bfr.WriteGoAway(0, http2.ErrCodeNo, nil)
	rc.writeHeaders(3, true, rc.headerBlock(unaryPath))
	rc.flush()
	expectRST(t, rc, 3, http2.ErrCodeRefusedStream)
	bg.waitMore(3)
}

// TestShutdownFinalAnswerDelivered: after Shutdown's GOAWAY, the last
// stream's handler writes its answer and returns while the client is
// still sending; the client must receive the trailers, and the server
// must keep reading until the client ends the connection (closing with
// the client's bytes unread makes the kernel send a reset, which discards
// whatever of the answer is not yet delivered).
func TestShutdownFinalAnswerDelivered(t *testing.T) {
	leakcheck.Goroutines(t)
	const size = 4 << 20
	started, release := make(chan struct{}), make(chan struct{})
	goaway := make(chan struct{}, 1)
	ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Trailer", "X-Final")
		buf := make([]byte, 64<<10)
		for range size / len(buf) {
			if _, err := w.Write(buf); err != nil {
				return
			}
		}
		w.Header().Set("X-Final", "yes")
	}), func(s *Server) { s.onGoAway = func() { goaway <- struct{}{} } })
	rc := dialRaw(t, ts.addr)
	sc := ts.nextConn(t)
	rc.handshake()
	_ = rc.bfr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 30})
	_ = rc.bfr.WriteWindowUpdate(0, 1<<30)
	rc.writeHeaders(1, false, rc.headerBlock("/final"))
	rc.flush()
	<-started

	shutdown := make(chan error, 1)
	go func() { shutdown <- ts.srv.Shutdown(withTimeout(t, 20*time.Second)) }()
	<-goaway
	if ga := rc.expectGoAway(); ga == nil || ga.ErrCode != http2.ErrCodeNo {
		t.Fatalf("GOAWAY %v", ga)
	}
	// The client keeps sending while the answer is written: harmless
	// WINDOW_UPDATEs (neither counted as a flood nor answered).
	for range 4000 {
		_ = rc.bfr.WriteWindowUpdate(0, 1)
	}
	burst := bytes.Clone(rc.buf.Bytes())
	rc.buf.Reset()
	close(release)
	wrote := make(chan error, 1)
	go func() {
		_ = rc.tc.SetWriteDeadline(time.Now().Add(10 * time.Second))
		_, err := rc.tc.Write(burst)
		wrote <- err
	}()
	got := 0
	for {
		f, err := rc.readErr()
		if err != nil {
			t.Fatalf("final answer lost after %d of %d bytes: %v", got, size, err)
		}
		if df, ok := f.(*http2.DataFrame); ok && df.StreamID == 1 {
			got += len(df.Data())
		}
		if mh, ok := f.(*http2.MetaHeadersFrame); ok && mh.StreamID == 1 && mh.StreamEnded() {
			if v := mh.RegularFields(); got != size || len(v) != 1 || v[0].Value != "yes" {
				t.Fatalf("trailers %v after %d bytes", v, got)
			}
			break
		}
	}
	// The handler returned long before the client read the end of its
	// answer (the socket buffers held it): the server must still be
	// reading, not have closed with the client's bytes unread, which on
	// a slower link resets the connection before the answer arrives.
	select {
	case <-sc.closed:
		t.Fatal("the server closed the connection before the client ended it")
	default:
	}
	if err := <-wrote; err != nil {
		t.Fatalf("client write: %v", err)
	}
	_ = rc.tc.CloseWrite()
	rc.expectClosed()
	if err := <-shutdown; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
}

// TestShutdownBlockedWrite: a client that never reads blocks the server's
// write (and so the connection's write lock) for up to WriteTimeout.
// Shutdown must still return when its context ends, and Close must then
// end the connection at once.
func TestShutdownBlockedWrite(t *testing.T) {
	leakcheck.Goroutines(t)
	ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		buf := make([]byte, 16<<10)
		for {
			if _, err := w.Write(buf); err != nil {
				return
			}
		}
	}), nil) // WriteTimeout 10s
	rc := dialRaw(t, ts.addr)
	sc := ts.nextConn(t)
	rc.handshake()
	_ = rc.bfr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1<<31 - 1})
	_ = rc.bfr.WriteWindowUpdate(0, 1<<31-1-65535)
	rc.writeHeaders(1, true, rc.headerBlock("/download"))
	rc.flush() // and never read again
	sc.waitWriteBlocked(t, 100*time.Millisecond)

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := ts.srv.Shutdown(ctx)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown: %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("Shutdown took %v with a 200ms context", d)
	}
	start = time.Now()
	if err := ts.srv.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-sc.closed:
	case <-time.After(2 * time.Second):
		t.Fatal("Close did not end the connection")
	}
	t.Logf("Shutdown returned after the context; Close ended the connection in %v", time.Since(start))
}
