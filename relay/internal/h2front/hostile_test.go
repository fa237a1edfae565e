package h2front

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"

	"github.com/betcode-dev/betcode/shared/leakcheck"
)

// hostileHandler serves the echo service, plus "/block" which waits for
// its request's context to end.
func hostileHandler(gs *grpc.Server) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/block" {
			<-r.Context().Done()
			return
		}
		gs.ServeHTTP(w, r)
	})
}

// background is a well-behaved grpc-go client calling on its own
// connection while a hostile client misbehaves on another.
type background struct {
	t    *testing.T
	n    atomic.Int64
	err  atomic.Pointer[error]
	stop chan struct{}
	done chan struct{}
}

func startBackground(t *testing.T, addr string) *background {
	cc := dialGRPC(t, addr)
	b := &background{t: t, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(b.done)
		for {
			select {
			case <-b.stop:
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			out, err := unaryCall(ctx, cc, []byte("bg"))
			cancel()
			if err == nil && string(out) != "bg" {
				err = context.Canceled
			}
			if err != nil {
				b.err.Store(&err)
				return
			}
			b.n.Add(1)
		}
	}()
	b.waitMore(1)
	t.Cleanup(b.finish)
	return b
}

// waitMore waits until k more calls have succeeded.
func (b *background) waitMore(k int64) {
	b.t.Helper()
	target := b.n.Load() + k
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for b.n.Load() < target {
		if e := b.err.Load(); e != nil {
			b.t.Fatalf("background call failed: %v", *e)
		}
		if time.Now().After(deadline) {
			b.t.Fatal("background calls stalled")
		}
		<-tick.C
	}
}

func (b *background) finish() {
	select {
	case <-b.stop:
		return
	default:
	}
	close(b.stop)
	<-b.done
	if e := b.err.Load(); e != nil {
		b.t.Errorf("background call failed: %v", *e)
	}
}

// startHostile starts a server for a hostile test, with the background
// client running.
func startHostile(t *testing.T, tweak func(*Server)) (*testServer, *background) {
	leakcheck.Goroutines(t)
	ts := startServer(t, hostileHandler(newGRPCServer(t, newEchoService())), tweak)
	bg := startBackground(t, ts.addr)
	return ts, bg
}

func expectGoAwayCode(t *testing.T, rc *rawClient, code http2.ErrCode) {
	t.Helper()
	ga := rc.expectGoAway()
	if ga == nil {
		t.Fatalf("connection closed without GOAWAY, want %v", code)
	}
	if ga.ErrCode != code {
		t.Fatalf("GOAWAY %v, want %v", ga.ErrCode, code)
	}
	// Our close_notify ends the server's linger; then it closes.
	_ = rc.tc.CloseWrite()
	rc.expectClosed()
}

// expectRST reads until RST_STREAM on id and checks its code.
func expectRST(t *testing.T, rc *rawClient, id uint32, code http2.ErrCode) {
	t.Helper()
	for {
		f := rc.read()
		if ga, ok := f.(*http2.GoAwayFrame); ok {
			t.Fatalf("GOAWAY %v, want RST_STREAM %v", ga.ErrCode, code)
		}
		if rst, ok := f.(*http2.RSTStreamFrame); ok && rst.StreamID == id {
			if rst.ErrCode != code {
				t.Fatalf("RST_STREAM %v, want %v", rst.ErrCode, code)
			}
			return
		}
	}
}

func TestHostileContinuationFlood(t *testing.T) {
	for _, tc := range []struct {
		name string
		frag func(enc *hpack.Encoder, buf *bytes.Buffer) []byte
		code http2.ErrCode
	}{
		{"fields", func(enc *hpack.Encoder, buf *bytes.Buffer) []byte {
			buf.Reset()
			_ = enc.WriteField(hpack.HeaderField{Name: "x-pad", Value: strings.Repeat("p", 8000)})
			return buf.Bytes()
		}, http2.ErrCodeProtocol},
		{"empty", func(*hpack.Encoder, *bytes.Buffer) []byte { return nil }, http2.ErrCodeEnhanceYourCalm},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts, bg := startHostile(t, nil)
			rc := dialRaw(t, ts.addr)
			rc.handshake()
			_ = rc.bfr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: rc.headerBlock(unaryPath)})
			rc.flush()
			var ebuf bytes.Buffer
			enc := hpack.NewEncoder(&ebuf)
			writeErr := make(chan error, 1)
			go func() {
				sent := 0
				for sent < 256<<20 {
					for range 64 {
						f := tc.frag(enc, &ebuf)
						_ = rc.bfr.WriteContinuation(1, false, f)
						sent += 9 + len(f)
					}
					_ = rc.tc.SetWriteDeadline(time.Now().Add(10 * time.Second))
					if _, err := rc.tc.Write(rc.buf.Bytes()); err != nil {
						writeErr <- err
						return
					}
					rc.buf.Reset()
				}
				writeErr <- nil
			}()
			expectGoAwayCode(t, rc, tc.code)
			if err := <-writeErr; err == nil {
				t.Fatal("server read 256 MiB of CONTINUATION")
			}
			bg.waitMore(3)
		})
	}
}

func TestHostileHPACKBomb(t *testing.T) {
	ts, bg := startHostile(t, func(s *Server) { s.MaxHeaderListSize = 64 << 10 })
	rc := dialRaw(t, ts.addr)
	rc.handshake()
	big := strings.Repeat("b", 4000)
	extra := []string{}
	for range 300 { // ~1.2 MB decoded from ~4.3 KB: one literal, then indexed references
		extra = append(extra, "x-bomb", big)
	}
	block := rc.headerBlock(unaryPath, extra...)
	if len(block) > 8<<10 {
		t.Fatalf("bomb block is %d bytes", len(block))
	}
	rc.writeHeaders(1, true, block)
	rc.flush()
	for {
		f := rc.read()
		if mh, ok := f.(*http2.MetaHeadersFrame); ok && mh.StreamID == 1 {
			if mh.PseudoValue("status") != "431" || !mh.StreamEnded() {
				t.Fatalf("got %v status %q", mh, mh.PseudoValue("status"))
			}
			break
		}
		if ga, ok := f.(*http2.GoAwayFrame); ok {
			t.Fatalf("GOAWAY %v", ga.ErrCode)
		}
	}
	// The connection (and its HPACK state) still works.
	rc.writeHeaders(3, false, rc.headerBlock(unaryPath))
	_ = rc.bfr.WriteData(3, true, grpcFrame([]byte("ok")))
	rc.flush()
	for {
		if df, ok := rc.read().(*http2.DataFrame); ok && df.StreamID == 3 && bytes.Contains(df.Data(), []byte("ok")) {
			break
		}
	}
	bg.waitMore(3)
}

func TestHostileHugeFrame(t *testing.T) {
	ts, bg := startHostile(t, nil)
	rc := dialRaw(t, ts.addr)
	rc.handshake()
	rc.writeHeaders(1, false, rc.headerBlock("/block"))
	rc.flush()
	go func() {
		_ = rc.bfr.WriteData(1, false, make([]byte, 4<<20))
		_ = rc.tc.SetWriteDeadline(time.Now().Add(10 * time.Second))
		_, _ = rc.tc.Write(rc.buf.Bytes())
	}()
	expectGoAwayCode(t, rc, http2.ErrCodeFrameSize)
	bg.waitMore(3)
}

// TestHostileConnectionErrors: frames that break the protocol for the
// whole connection are answered GOAWAY with the right code, and the other
// client goes on being served.
func TestHostileConnectionErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		opt  func(*Server)
		send func(rc *rawClient)
		code http2.ErrCode
	}{
		{"stream ids going backwards", nil, func(rc *rawClient) {
			rc.writeHeaders(5, true, rc.headerBlock(unaryPath))
			rc.writeHeaders(3, true, rc.headerBlock(unaryPath))
		}, http2.ErrCodeProtocol},
		{"an even stream id", nil, func(rc *rawClient) {
			rc.writeHeaders(2, true, rc.headerBlock(unaryPath))
		}, http2.ErrCodeProtocol},
		{"DATA over the connection window", func(s *Server) { s.ConnWindow = 65535; s.StreamWindow = 1 << 20 }, func(rc *rawClient) {
			rc.writeHeaders(1, false, rc.headerBlock("/block"))
			_ = rc.bfr.WriteData(1, false, make([]byte, 65535))
			_ = rc.bfr.WriteData(1, false, []byte{1})
		}, http2.ErrCodeFlowControl},
		{"a connection WINDOW_UPDATE overflowing the window", nil, func(rc *rawClient) {
			_ = rc.bfr.WriteWindowUpdate(0, 1<<31-1)
		}, http2.ErrCodeFlowControl},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts, bg := startHostile(t, tc.opt)
			rc := dialRaw(t, ts.addr)
			rc.handshake()
			tc.send(rc)
			rc.flush()
			expectGoAwayCode(t, rc, tc.code)
			bg.waitMore(3)
		})
	}
}

func TestHostileRapidReset(t *testing.T) {
	ts, bg := startHostile(t, nil)
	rc := dialRaw(t, ts.addr)
	rc.handshake()
	var calm atomic.Bool
	acked := make(chan struct{}, 1)
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		for {
			f, err := rc.readErr()
			if err != nil {
				return
			}
			switch f := f.(type) {
			case *http2.GoAwayFrame:
				if f.ErrCode != http2.ErrCodeEnhanceYourCalm {
					t.Errorf("GOAWAY %v", f.ErrCode)
				}
				calm.Store(true)
			case *http2.PingFrame:
				if f.IsAck() {
					acked <- struct{}{}
				}
			}
		}
	}()
	block := rc.headerBlock("/block")
	id := uint32(1)
	var werr error
	for batch := 0; batch < 200 && werr == nil; batch++ {
		for range 100 {
			rc.writeHeaders(id, false, block)
			_ = rc.bfr.WriteRSTStream(id, http2.ErrCodeCancel)
			id += 2
		}
		_ = rc.tc.SetWriteDeadline(time.Now().Add(10 * time.Second))
		_, werr = rc.tc.Write(rc.buf.Bytes())
		rc.buf.Reset()
	}
	if werr == nil {
		_ = rc.bfr.WritePing(false, [8]byte{7})
		rc.flush()
		select {
		case <-acked:
		case <-readDone:
			if !calm.Load() {
				t.Fatal("connection ended without ENHANCE_YOUR_CALM")
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no PING ack after the resets")
		}
	} else if !calm.Load() {
		<-readDone
		if !calm.Load() {
			t.Fatalf("write failed without ENHANCE_YOUR_CALM: %v", werr)
		}
	}
	t.Logf("20000 rapid resets: connection cut with ENHANCE_YOUR_CALM: %v", calm.Load())
	bg.waitMore(3)
	// The goroutine check registered by startHostile verifies that the
	// server's goroutines come back down.
}

func TestHostileDataOverStreamWindow(t *testing.T) {
	ts, bg := startHostile(t, func(s *Server) { s.StreamWindow = 16 << 10 })
	rc := dialRaw(t, ts.addr)
	rc.handshake()
	rc.writeHeaders(1, false, rc.headerBlock("/block"))
	_ = rc.bfr.WriteData(1, false, make([]byte, 16<<10))
	_ = rc.bfr.WriteData(1, false, []byte{1})
	rc.flush()
	expectRST(t, rc, 1, http2.ErrCodeFlowControl)
	bg.waitMore(3)
}

func TestHostileStreamWindowUpdateOverflow(t *testing.T) {
	ts, bg := startHostile(t, nil)
	rc := dialRaw(t, ts.addr)
	rc.handshake()
	rc.writeHeaders(1, false, rc.headerBlock("/block"))
	_ = rc.bfr.WriteWindowUpdate(1, 1<<31-1)
	rc.flush()
	expectRST(t, rc, 1, http2.ErrCodeFlowControl)
	bg.waitMore(3)
}

func TestHostilePingFloodNoRead(t *testing.T) {
	ts, bg := startHostile(t, func(s *Server) { s.WriteTimeout = 500 * time.Millisecond })
	rc := dialRaw(t, ts.addr)
	sc := ts.nextConn(t)
	sc = skipConn(t, ts, sc, rc)
	rc.buf.WriteString(http2.ClientPreface)
	_ = rc.bfr.WriteSettings()
	rc.flush()
	start := time.Now()
	go func() {
		for i := 0; i < 100; i++ {
			for range 1000 {
				_ = rc.bfr.WritePing(false, [8]byte{byte(i)})
			}
			_ = rc.tc.SetWriteDeadline(time.Now().Add(10 * time.Second))
			if _, err := rc.tc.Write(rc.buf.Bytes()); err != nil {
				return
			}
			rc.buf.Reset()
		}
	}()
	select {
	case <-sc.closed:
		t.Logf("closed after %v", time.Since(start))
	case <-time.After(10 * time.Second):
		t.Fatal("server did not close a flooding, non-reading client")
	}
	bg.waitMore(3)
}

// TestHostileNonReadingDownload: a client that grants windows but never
// reads blocks the server's write; WriteTimeout closes the connection.
func TestHostileNonReadingDownload(t *testing.T) {
	ts, bg := startHostile(t, func(s *Server) { s.WriteTimeout = 500 * time.Millisecond })
	rc := dialRaw(t, ts.addr)
	sc := skipConn(t, ts, ts.nextConn(t), rc)
	rc.buf.WriteString(http2.ClientPreface)
	_ = rc.bfr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1<<31 - 1})
	_ = rc.bfr.WriteWindowUpdate(0, 1<<31-1-65535)
	rc.writeHeaders(1, false, rc.headerBlock("/"+svcName+"/Download"))
	_ = rc.bfr.WriteData(1, true, grpcFrame([]byte("104857600")))
	rc.flush()
	select {
	case <-sc.closed:
	case <-time.After(10 * time.Second):
		t.Fatal("server did not close a non-reading client")
	}
	bg.waitMore(3)
}

// skipConn returns the server-side transport of rc (the background
// client's may have been accepted in between).
func skipConn(t *testing.T, ts *testServer, sc *countConn, rc *rawClient) *countConn {
	t.Helper()
	for sc.RemoteAddr().String() != rc.tc.LocalAddr().String() {
		sc = ts.nextConn(t)
	}
	return sc
}

func TestHostileRefusedStream(t *testing.T) {
	ts, bg := startHostile(t, func(s *Server) { s.MaxConcurrentStreams = 2 })
	rc := dialRaw(t, ts.addr)
	rc.handshake()
	block := rc.headerBlock("/block")
	rc.writeHeaders(1, false, block)
	rc.writeHeaders(3, false, block)
	rc.writeHeaders(5, false, block)
	rc.flush()
	expectRST(t, rc, 5, http2.ErrCodeRefusedStream)
	// Once a stream ends, a new one is accepted.
	_ = rc.bfr.WriteRSTStream(1, http2.ErrCodeCancel)
	rc.writeHeaders(7, false, block)
	_ = rc.bfr.WritePing(false, [8]byte{9})
	rc.flush()
	for {
		f := rc.read()
		if rst, ok := f.(*http2.RSTStreamFrame); ok {
			t.Fatalf("RST_STREAM %v on %d", rst.ErrCode, rst.StreamID)
		}
		if pf, ok := f.(*http2.PingFrame); ok && pf.IsAck() {
			break
		}
	}
	bg.waitMore(3)
}

func TestHostileFirstFrameNotSettings(t *testing.T) {
	ts, bg := startHostile(t, nil)
	rc := dialRaw(t, ts.addr)
	rc.buf.WriteString(http2.ClientPreface)
	_ = rc.bfr.WritePing(false, [8]byte{})
	rc.flush()
	expectGoAwayCode(t, rc, http2.ErrCodeProtocol)
	bg.waitMore(3)
}

func TestHostileBadPreface(t *testing.T) {
	ts, bg := startHostile(t, nil)
	rc := dialRaw(t, ts.addr)
	rc.buf.WriteString("GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
	rc.flush()
	rc.expectClosed()
	bg.waitMore(3)
}

func TestHostileMalformedHeaders(t *testing.T) {
	ts, bg := startHostile(t, nil)
	rc := dialRaw(t, ts.addr)
	rc.handshake()
	id := uint32(1)
	for _, fields := range [][]string{
		{":method", "GET", ":path", "/x"},           // no :scheme
		{":method", "CONNECT", ":authority", "a:1"}, // CONNECT
		{":method", "GET", ":scheme", "https", ":path", "/", "connection", "close"},
		{":method", "GET", ":scheme", "https", ":path", "/", "te", "gzip"},
		{":method", "GET", ":scheme", "https", ":path", "/", ":foo", "x"},  // unknown pseudo
		{":method", "GET", ":scheme", "https", "a", "b", ":path", "/"},     // pseudo after regular
		{":method", "GET", ":scheme", "https", ":path", "/", ":path", "/"}, // duplicate
	} {
		rc.hbuf.Reset()
		for i := 0; i < len(fields); i += 2 {
			_ = rc.henc.WriteField(hpack.HeaderField{Name: fields[i], Value: fields[i+1]})
		}
		rc.writeHeaders(id, true, append([]byte(nil), rc.hbuf.Bytes()...))
		rc.flush()
		expectRST(t, rc, id, http2.ErrCodeProtocol)
		id += 2
	}
	bg.waitMore(3)
}

// TestHandlerPanic: a panicking handler resets its stream; the connection
// and process go on.
func TestHandlerPanic(t *testing.T) {
	leakcheck.Goroutines(t)
	ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/abort" {
			panic(http.ErrAbortHandler)
		}
		panic("boom")
	}), nil)
	rc := dialRaw(t, ts.addr)
	rc.handshake()
	rc.writeHeaders(1, true, rc.headerBlock("/panic"))
	rc.flush()
	expectRST(t, rc, 1, http2.ErrCodeInternal)
	rc.writeHeaders(3, true, rc.headerBlock("/abort"))
	rc.flush()
	expectRST(t, rc, 3, http2.ErrCodeInternal)
}

// TestHostileResetHandlersBound: handlers that ignore their cancelled
// context pile up; above 4×MaxConcurrentStreams the connection is cut.
func TestHostileResetHandlersBound(t *testing.T) {
	leakcheck.Goroutines(t)
	started := make(chan struct{}, 16)
	release := make(chan struct{})
	ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		started <- struct{}{}
		<-release // ignores r.Context()
	}), func(s *Server) { s.MaxConcurrentStreams = 1 })
	defer close(release)
	rc := dialRaw(t, ts.addr)
	rc.handshake()
	block := rc.headerBlock("/stuck")
	for id := uint32(1); id <= 7; id += 2 {
		rc.writeHeaders(id, false, block)
		rc.flush()
		<-started
		_ = rc.bfr.WriteRSTStream(id, http2.ErrCodeCancel)
		rc.flush()
	}
	rc.writeHeaders(9, false, block)
	rc.flush()
	expectGoAwayCode(t, rc, http2.ErrCodeEnhanceYourCalm)
}

func TestSettingsAckTimeout(t *testing.T) {
	leakcheck.Goroutines(t)
	ts := startServer(t, http.NotFoundHandler(), func(s *Server) { s.SettingsTimeout = 200 * time.Millisecond })
	rc := dialRaw(t, ts.addr)
	rc.buf.WriteString(http2.ClientPreface)
	_ = rc.bfr.WriteSettings()
	rc.flush() // and never acknowledge the server's SETTINGS
	rc.expectClosed()
}
