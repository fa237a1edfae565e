package h2client

import (
	"context"
	"errors"
	"io"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/betcode-dev/betcode/shared/leakcheck"
)

// TestCancelMidStream: cancelling the request context while the body is
// being read makes Read return context.Canceled at once, and the server's
// handler sees its context cancelled (our RST_STREAM arrived).
func TestCancelMidStream(t *testing.T) {
	leakcheck.Goroutines(t)
	ts := startServer(t)
	cc, _ := dial(t, ts.addr, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	body := newCloseFlag(pr)
	defer pw.Close()
	go pw.Write(frame(nil))
	resp, err := cc.RoundTrip(grpcReq(ctx, ts.addr, "/t/Stream", body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if m, err := readMsg(resp.Body); err != nil || string(m) != "first" {
		t.Fatalf("%q, %v", m, err)
	}
	readErr := readLater(resp.Body)
	cancel()
	select {
	case err := <-readErr:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Read: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Read did not return")
	}
	if e := waitEvent(t, ts, "stream:"); e != "stream: context canceled" {
		t.Fatalf("server saw %q", e)
	}
	body.waitClosed(t)
	// The connection is still fine.
	if _, err := unary(cc, ts.addr, "/t/Echo", []byte("after")); err != nil {
		t.Fatal(err)
	}
}

// TestServerDeadline: grpc-timeout 50m to a handler blocking on its context.
// grpc-go (v1.85) arms a timer that closes the stream with RST_STREAM CANCEL
// when the deadline passes, racing the handler's own DEADLINE_EXCEEDED
// status: the call ends either with a *StreamError{Remote, CANCEL} or,
// when the status wins, grpc-status 4.
func TestServerDeadline(t *testing.T) {
	leakcheck.Goroutines(t)
	ts := startServer(t)
	cc, _ := dial(t, ts.addr, Options{})
	req := grpcReq(context.Background(), ts.addr, "/t/Block", newBufBody(frame(nil)))
	req.Header.Set("Grpc-Timeout", "50m")
	start := time.Now()
	resp, err := cc.RoundTrip(req)
	outcome := ""
	switch {
	case err != nil:
		var se *StreamError
		if !errors.As(err, &se) || !se.Remote || se.Code != http2.ErrCodeCancel {
			t.Fatalf("RoundTrip: %v", err)
		}
		outcome = "RST_STREAM CANCEL before headers"
	default:
		_, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		switch {
		case err != nil:
			if !isStreamReset(err, "CANCEL") {
				t.Fatalf("Read: %v", err)
			}
			outcome = "RST_STREAM CANCEL after headers"
		case grpcStatus(resp) == "4":
			outcome = "grpc-status 4"
		default:
			t.Fatalf("status %q", grpcStatus(resp))
		}
	}
	if d := time.Since(start); d < 40*time.Millisecond || d > 5*time.Second {
		t.Fatalf("call took %v", d)
	}
	t.Logf("grpc-go ended the call with %s", outcome)
	waitEvent(t, ts, "block:")
	if err := cc.Err(); err != nil {
		t.Fatal(err)
	}
}

// TestServerStop: grpcServer.Stop during an open stream: Read fails, Err
// becomes non-nil, a later RoundTrip fails fast.
func TestServerStop(t *testing.T) {
	leakcheck.Goroutines(t)
	ts := startServer(t)
	cc, _ := dial(t, ts.addr, Options{})
	pr, pw := io.Pipe()
	defer pw.Close()
	go pw.Write(frame(nil))
	resp, err := cc.RoundTrip(grpcReq(context.Background(), ts.addr, "/t/Stream", pr))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if _, err := readMsg(resp.Body); err != nil {
		t.Fatal(err)
	}
	ts.srv.Stop()
	if _, err := resp.Body.Read(make([]byte, 10)); err == nil || err == io.EOF {
		t.Fatalf("Read: %v", err)
	}
	waitFor(t, "Err", func() bool { return cc.Err() != nil })
	start := time.Now()
	if _, err := cc.RoundTrip(grpcReq(context.Background(), ts.addr, "/t/Echo", newBufBody(frame(nil)))); err == nil {
		t.Fatal("RoundTrip after Stop succeeded")
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("RoundTrip took %v", d)
	}
}

// TestGracefulStop: the open call completes; new calls fail.
func TestGracefulStop(t *testing.T) {
	leakcheck.Goroutines(t)
	ts := startServer(t)
	cc, _ := dial(t, ts.addr, Options{})
	pr, pw := io.Pipe()
	defer pw.Close()
	go pw.Write(frame([]byte("one")))
	resp, err := cc.RoundTrip(grpcReq(context.Background(), ts.addr, "/t/Echo", pr))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if m, err := readMsg(resp.Body); err != nil || string(m) != "one" {
		t.Fatalf("%q, %v", m, err)
	}
	stopped := make(chan struct{})
	go func() { ts.srv.GracefulStop(); close(stopped) }()
	waitFor(t, "GOAWAY", func() bool { return cc.Err() != nil })
	if _, err := cc.RoundTrip(grpcReq(context.Background(), ts.addr, "/t/Echo", newBufBody(frame(nil)))); err == nil {
		t.Fatal("new call after GOAWAY succeeded")
	}
	if _, err := pw.Write(frame([]byte("two"))); err != nil {
		t.Fatal(err)
	}
	if m, err := readMsg(resp.Body); err != nil || string(m) != "two" {
		t.Fatalf("%q, %v", m, err)
	}
	pw.Close()
	if _, err := io.ReadAll(resp.Body); err != nil {
		t.Fatal(err)
	}
	if grpcStatus(resp) != "0" {
		t.Fatalf("status %q", grpcStatus(resp))
	}
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		t.Fatal("GracefulStop did not return")
	}
}

// TestCloseUnblocksRead: closing the response body from another goroutine
// while a Read waits for data makes that Read return at once, with the
// context still alive. (Found by the relay's chaos soak: the relay closes a
// relayed call's body when its drain ends the call, racing the context's
// own cancel; when Close came first, the Read slept on and the drain reset
// the client's stream a second later.)
func TestCloseUnblocksRead(t *testing.T) {
	leakcheck.Goroutines(t)
	ts := startServer(t)
	cc, _ := dial(t, ts.addr, Options{})
	// The request is all sent (a server-streaming call's): nothing but
	// Close itself can wake the Read.
	resp, err := cc.RoundTrip(grpcReq(context.Background(), ts.addr, "/t/Stream", newBufBody(frame(nil))))
	if err != nil {
		t.Fatal(err)
	}
	if m, err := readMsg(resp.Body); err != nil || string(m) != "first" {
		t.Fatalf("%q, %v", m, err)
	}
	readErr := readLater(resp.Body)
	waitFor(t, "a Read waiting for data", func() bool {
		buf := make([]byte, 1<<20)
		return strings.Contains(string(buf[:runtime.Stack(buf, true)]), "(*respBody).Read")
	})
	resp.Body.Close()
	select {
	case err := <-readErr:
		if err == nil {
			t.Fatal("Read after Close: no error")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Read did not return after Close")
	}
	if e := waitEvent(t, ts, "stream:"); e != "stream: context canceled" {
		t.Fatalf("server saw %q", e)
	}
}

// readLater reads r once in a new goroutine; the channel has the error.
func readLater(r io.Reader) <-chan error {
	readErr := make(chan error, 1)
	go func() {
		_, err := r.Read(make([]byte, 10))
		readErr <- err
	}()
	return readErr
}
