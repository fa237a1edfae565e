package h2client

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"

	"golang.org/x/net/http2"

	"github.com/betcode-dev/betcode/shared/leakcheck"
)

// TestUnaryEcho: one call, then 1,000 sequential calls, then 50 goroutines
// × 100 calls, all against grpc-go's echo.
func TestUnaryEcho(t *testing.T) {
	leakcheck.Goroutines(t)
	ts := startServer(t)
	cc, _ := dial(t, ts.addr, Options{})

	t.Run("one", func(t *testing.T) {
		req := grpcReq(context.Background(), ts.addr, "/t/Echo", newBufBody(frame([]byte("hello"))))
		resp, err := cc.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if !bytes.Equal(body, frame([]byte("hello"))) {
			t.Fatalf("body %q", body)
		}
		if got := resp.Trailer.Get("Grpc-Status"); got != "0" {
			t.Fatalf("grpc-status %q, trailer %v, header %v", got, resp.Trailer, resp.Header)
		}
		if resp.StatusCode != 200 || resp.Proto != "HTTP/2.0" || resp.Request != req || resp.ContentLength != -1 {
			t.Fatalf("resp %+v", resp)
		}
		if ct := resp.Header.Get("Content-Type"); ct != "application/grpc" {
			t.Fatalf("content-type %q", ct)
		}
	})
	t.Run("sequential", func(t *testing.T) {
		for i := range 1000 {
			msg := fmt.Appendf(nil, "msg %d", i)
			got, err := unary(cc, ts.addr, "/t/Echo", msg)
			if err != nil || !bytes.Equal(got, msg) {
				t.Fatalf("call %d: %q, %v", i, got, err)
			}
		}
	})
	t.Run("concurrent", func(t *testing.T) {
		var wg sync.WaitGroup
		errs := make(chan error, 50)
		for g := range 50 {
			wg.Go(func() {
				for i := range 100 {
					msg := fmt.Appendf(nil, "g%d msg %d %s", g, i, strings.Repeat("x", i*10))
					got, err := unary(cc, ts.addr, "/t/Echo", msg)
					if err == nil && !bytes.Equal(got, msg) {
						err = fmt.Errorf("got %q", got)
					}
					if err != nil {
						errs <- fmt.Errorf("g%d call %d: %w", g, i, err)
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	})
	if err := cc.Err(); err != nil {
		t.Fatal(err)
	}
}

// TestSingleWrite: a Buffered request body that is complete leaves as one
// write(2): HEADERS, DATA and END_STREAM of the stream in one Write.
func TestSingleWrite(t *testing.T) {
	leakcheck.Goroutines(t)
	ts := startServer(t)
	cc, conn := dial(t, ts.addr, Options{})
	// Warm up: SETTINGS acks and the like are exchanged.
	if _, err := unary(cc, ts.addr, "/t/Echo", []byte("warm")); err != nil {
		t.Fatal(err)
	}
	for _, size := range []int{0, 10, 1000, 15000} {
		conn.takeWrites()
		msg := bytes.Repeat([]byte{'a'}, size)
		req := grpcReq(context.Background(), ts.addr, "/t/Echo", newBufBody(frame(msg)))
		resp, err := cc.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		writes := conn.takeWrites()

		var id uint32
		var withStream int
		for i, w := range writes {
			fr := http2.NewFramer(nil, bytes.NewReader(w))
			var mine, headers, end bool
			for {
				f, err := fr.ReadFrame()
				if err != nil {
					break
				}
				h := f.Header()
				switch f := f.(type) {
				case *http2.HeadersFrame:
					id, headers, mine = h.StreamID, true, true
					end = end || f.StreamEnded()
				case *http2.DataFrame:
					if h.StreamID == id || id == 0 {
						mine = true
						end = end || f.StreamEnded()
					}
				}
			}
			if mine {
				withStream++
				if !headers || !end {
					t.Errorf("size %d: write %d has frames of the stream but headers=%v end=%v", size, i, headers, end)
				}
			}
		}
		t.Logf("size %d: %d writes, stream %d in %d", size, len(writes), id, withStream)
		if withStream != 1 {
			t.Errorf("size %d: stream %d spread over %d writes (of %d)", size, id, withStream, len(writes))
		}
	}
}

// TestLargeTransfers: 20 MiB server streaming in 16 KiB messages (window
// refunds), and a 20 MiB client-streaming upload through an io.Pipe (send
// flow control against grpc-go's windows).
func TestLargeTransfers(t *testing.T) {
	leakcheck.Goroutines(t)
	ts := startServer(t)
	cc, _ := dial(t, ts.addr, Options{})
	const total = 20 << 20

	t.Run("download", func(t *testing.T) {
		req := grpcReq(context.Background(), ts.addr, "/t/Download",
			newBufBody(frame(binary.BigEndian.AppendUint64(nil, total))))
		resp, err := cc.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		off := 0
		for {
			m, err := readMsg(resp.Body)
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(m, pattern(off, len(m))) {
				t.Fatalf("bad bytes at %d", off)
			}
			off += len(m)
		}
		if off != total || grpcStatus(resp) != "0" {
			t.Fatalf("got %d bytes, status %q", off, grpcStatus(resp))
		}
	})
	t.Run("upload", func(t *testing.T) {
		pr, pw := io.Pipe()
		want := sha256.New()
		go func() {
			for off := 0; off < total; off += 16 << 10 {
				m := pattern(off, 16<<10)
				want.Write(m)
				if _, err := pw.Write(frame(m)); err != nil {
					pw.CloseWithError(err)
					return
				}
			}
			pw.Close()
		}()
		resp, err := cc.RoundTrip(grpcReq(context.Background(), ts.addr, "/t/Upload", pr))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		m, err := readMsg(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadAll(resp.Body); err != nil {
			t.Fatal(err)
		}
		if n := binary.BigEndian.Uint64(m); n != total || !bytes.Equal(m[8:], want.Sum(nil)) {
			t.Fatalf("server got %d bytes, hash match %v", n, bytes.Equal(m[8:], want.Sum(nil)))
		}
		if grpcStatus(resp) != "0" {
			t.Fatalf("status %q", grpcStatus(resp))
		}
	})
}

// TestBidi: the body sends a message, waits for its echo, sends the next;
// 100 round trips on one stream.
func TestBidi(t *testing.T) {
	leakcheck.Goroutines(t)
	ts := startServer(t)
	cc, _ := dial(t, ts.addr, Options{})
	pr, pw := io.Pipe()
	first := make(chan error, 1)
	go func() { _, err := pw.Write(frame([]byte("msg 0"))); first <- err }()
	resp, err := cc.RoundTrip(grpcReq(context.Background(), ts.addr, "/t/Echo", pr))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		m, err := readMsg(resp.Body)
		if err != nil {
			t.Fatalf("echo %d: %v", i, err)
		}
		if want := fmt.Sprintf("msg %d", i); string(m) != want {
			t.Fatalf("echo %d: %q", i, m)
		}
		if i < 99 {
			if _, err := pw.Write(frame(fmt.Appendf(nil, "msg %d", i+1))); err != nil {
				t.Fatal(err)
			}
		}
	}
	pw.Close()
	if rest, err := io.ReadAll(resp.Body); err != nil || len(rest) != 0 {
		t.Fatalf("rest %q, %v", rest, err)
	}
	if grpcStatus(resp) != "0" {
		t.Fatalf("status %q", grpcStatus(resp))
	}
}

// TestTrailersOnly: an error answer before any message is a single HEADERS
// with END_STREAM; its fields land in resp.Header and the body is empty.
func TestTrailersOnly(t *testing.T) {
	leakcheck.Goroutines(t)
	ts := startServer(t)
	cc, _ := dial(t, ts.addr, Options{})
	resp, err := cc.RoundTrip(grpcReq(context.Background(), ts.addr, "/t/NotFound", newBufBody(frame(nil))))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if n, ended := resp.Body.(Buffered).Buffered(); n != 0 || !ended {
		t.Fatalf("Buffered() = %d, %v", n, ended)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil || len(b) != 0 {
		t.Fatalf("body %q, %v", b, err)
	}
	if got := resp.Header.Get("Grpc-Status"); got != "5" {
		t.Fatalf("grpc-status %q (header %v)", got, resp.Header)
	}
	if got := resp.Header.Get("Grpc-Message"); got != "x" {
		t.Fatalf("grpc-message %q", got)
	}
	if resp.Trailer == nil || len(resp.Trailer) != 0 {
		t.Fatalf("trailer %v", resp.Trailer)
	}
}
