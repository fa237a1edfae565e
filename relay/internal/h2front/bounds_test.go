package h2front

import (
	"bytes"
	"encoding/binary"
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/betcode-dev/betcode/shared/leakcheck"
)

// TestHostilePendingNeverIdle: a client whose every TLS record ends one
// byte into a frame keeps the server's read buffer from ever emptying at a
// frame boundary. The streams it opens and resets at once must not pile
// up awaiting a handler, and its PINGs must still be answered.
func TestHostilePendingNeverIdle(t *testing.T) {
	var maxPending atomic.Int64
	ts, bg := startHostile(t, func(s *Server) {
		s.onPending = func(n int) {
			for m := maxPending.Load(); int64(n) > m && !maxPending.CompareAndSwap(m, int64(n)); m = maxPending.Load() {
			}
		}
	})
	rc := dialRaw(t, ts.addr)
	rc.handshake()
	acks := make(chan uint64, 16)
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		for {
			f, err := rc.readErr()
			if err != nil {
				return
			}
			if p, ok := f.(*http2.PingFrame); ok && p.IsAck() {
				acks <- binary.BigEndian.Uint64(p.Data[:])
			}
		}
	}()

	full := rc.headerBlock("/block")
	small := rc.headerBlock("/block") // indexed fields only: a few bytes
	id := uint32(1)
	// chunk returns a PING carrying i followed by pairs HEADERS+RST_STREAM
	// pairs: more than idleEvery frames after the PING. Each write stays
	// well under one TLS record (~1.2 KB while the connection is young).
	chunk := func(i uint64, pairs int) []byte {
		var d [8]byte
		binary.BigEndian.PutUint64(d[:], i)
		_ = rc.bfr.WritePing(false, d)
		for range pairs {
			block := small
			if id == 1 {
				block = full
			}
			rc.writeHeaders(id, false, block)
			_ = rc.bfr.WriteRSTStream(id, http2.ErrCodeCancel)
			id += 2
		}
		b := bytes.Clone(rc.buf.Bytes())
		rc.buf.Reset()
		return b
	}
	const chunks = 300
	cur := chunk(0, 20)
	for i := uint64(0); i < chunks; i++ {
		pairs := 20
		if i == chunks-1 {
			pairs = 0
		}
		next := chunk(i+1, pairs)
		// This write ends one byte into the next chunk's PING.
		rc.buf.Write(cur)
		rc.buf.Write(next[:1])
		rc.flush()
		cur = next[1:]
		select {
		case got := <-acks:
			if got != i {
				t.Fatalf("PING ack %d, want %d", got, i)
			}
		case <-readDone:
			t.Fatalf("connection ended after %d chunks", i)
		case <-time.After(10 * time.Second):
			t.Fatalf("PING %d not answered while the read buffer never empties", i)
		}
	}
	rc.buf.Write(cur)
	rc.flush()
	if got := <-acks; got != chunks {
		t.Fatalf("last PING ack %d", got)
	}
	if m := maxPending.Load(); m > 1 {
		t.Fatalf("%d streams awaited a handler at once; reset streams must leave the list", m)
	}
	bg.waitMore(3)
}

func TestHostileSettingsTooManyOrDuplicate(t *testing.T) {
	many := make([]http2.Setting, 200)
	for i := range many {
		many[i] = http2.Setting{ID: http2.SettingID(0x100 + i), Val: 1} // unknown ids, all distinct
	}
	dup := []http2.Setting{
		{ID: http2.SettingInitialWindowSize, Val: 1000},
		{ID: http2.SettingMaxFrameSize, Val: 1 << 14},
		{ID: http2.SettingInitialWindowSize, Val: 2000},
	}
	for name, settings := range map[string][]http2.Setting{"many": many, "duplicate": dup} {
		t.Run(name, func(t *testing.T) {
			ts, bg := startHostile(t, nil)
			rc := dialRaw(t, ts.addr)
			rc.handshake()
			_ = rc.bfr.WriteSettings(settings...)
			rc.flush()
			expectGoAwayCode(t, rc, http2.ErrCodeProtocol)
			bg.waitMore(3)
		})
	}
}

// TestConnWindowNotHeldByUnreadStream: stream 1 holds 600 KiB unread and
// stream 3's handler has read its 424 KiB; together they used the whole
// 1 MiB connection window. What stream 3's handler read must be refunded
// now, or stream 3 stalls until stream 1 drains.
func TestConnWindowNotHeldByUnreadStream(t *testing.T) {
	leakcheck.Goroutines(t)
	const held, read = 600 << 10, 424 << 10
	ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hold" {
			<-r.Context().Done()
			return
		}
		if _, err := io.ReadFull(r.Body, make([]byte, read)); err != nil {
			return
		}
		if _, err := io.Copy(io.Discard, r.Body); err == nil {
			_, _ = io.WriteString(w, "done")
		}
	}), nil)
	rc := dialRaw(t, ts.addr)
	rc.handshake()
	if wu, ok := rc.read().(*http2.WindowUpdateFrame); !ok || wu.StreamID != 0 || 65535+int(wu.Increment) != held+read {
		t.Fatalf("want the server's connection window of 1 MiB, got %v", wu)
	}
	send := func(id uint32, n int, end bool) {
		for n > 0 {
			k := min(n, 16<<10)
			n -= k
			_ = rc.bfr.WriteData(id, end && n == 0, make([]byte, k))
		}
	}
	rc.writeHeaders(1, false, rc.headerBlock("/hold"))
	send(1, held, false)
	rc.writeHeaders(3, false, rc.headerBlock("/read"))
	send(3, read, false)
	rc.flush() // the connection window is now 0
	for {
		if wu, ok := rc.read().(*http2.WindowUpdateFrame); ok && wu.StreamID == 0 {
			if wu.Increment < 8<<10 {
				t.Fatalf("connection refund of %d bytes", wu.Increment)
			}
			break
		}
	}
	send(3, 8<<10, true)
	rc.flush()
	for {
		if df, ok := rc.read().(*http2.DataFrame); ok && df.StreamID == 3 && string(df.Data()) == "done" {
			break
		}
	}
}

// TestContentLengthMismatch: a request body that does not match its
// content-length is malformed: RST_STREAM(PROTOCOL_ERROR).
func TestContentLengthMismatch(t *testing.T) {
	ts, bg := startHostile(t, nil)
	rc := dialRaw(t, ts.addr)
	rc.handshake()
	// Encoded anew each time: a block with literals is not to be resent.
	cl5 := func() []byte { return rc.headerBlock("/block", "content-length", "5") }
	rc.writeHeaders(1, false, cl5())
	_ = rc.bfr.WriteData(1, false, []byte("123456")) // more than declared
	rc.flush()
	expectRST(t, rc, 1, http2.ErrCodeProtocol)

	rc.writeHeaders(3, false, cl5())
	_ = rc.bfr.WriteData(3, false, []byte("12"))
	_ = rc.bfr.WriteData(3, true, []byte("3")) // ends short
	rc.flush()
	expectRST(t, rc, 3, http2.ErrCodeProtocol)

	rc.writeHeaders(5, false, cl5())
	_ = rc.bfr.WriteData(5, false, []byte("12"))
	rc.hbuf.Reset()
	_ = rc.henc.WriteField(hpack.HeaderField{Name: "x-t", Value: "v"})
	rc.writeHeaders(5, true, bytes.Clone(rc.hbuf.Bytes())) // trailers end it short
	rc.flush()
	expectRST(t, rc, 5, http2.ErrCodeProtocol)

	rc.writeHeaders(7, true, cl5()) // END_STREAM with content-length 5
	rc.flush()
	expectRST(t, rc, 7, http2.ErrCodeProtocol)

	// A matching content-length is served.
	msg := grpcFrame([]byte("ok"))
	rc.writeHeaders(9, false, rc.headerBlock(unaryPath, "content-length", "7"))
	_ = rc.bfr.WriteData(9, false, msg[:3])
	_ = rc.bfr.WriteData(9, true, msg[3:])
	rc.flush()
	for {
		f := rc.read()
		if rst, ok := f.(*http2.RSTStreamFrame); ok && rst.StreamID == 9 {
			t.Fatalf("RST_STREAM %v on a matching content-length", rst.ErrCode)
		}
		if df, ok := f.(*http2.DataFrame); ok && df.StreamID == 9 && bytes.Contains(df.Data(), []byte("ok")) {
			break
		}
	}
	bg.waitMore(3)
}
