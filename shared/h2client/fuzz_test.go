package h2client

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// fuzzSeed builds server bytes with a raw Framer: fn writes frames.
func fuzzSeed(fn func(fr *http2.Framer, enc func(kv ...string) []byte)) []byte {
	var buf, hbuf bytes.Buffer
	fr := http2.NewFramer(&buf, nil)
	henc := hpack.NewEncoder(&hbuf)
	enc := func(kv ...string) []byte {
		hbuf.Reset()
		for i := 0; i < len(kv); i += 2 {
			henc.WriteField(hpack.HeaderField{Name: kv[i], Value: kv[i+1]})
		}
		return bytes.Clone(hbuf.Bytes())
	}
	fn(fr, enc)
	return buf.Bytes()
}

// FuzzServerFrames feeds arbitrary bytes, after a valid server SETTINGS, to
// a Conn over net.Pipe while one RoundTrip is in flight. It must neither
// panic nor hang.
func FuzzServerFrames(f *testing.F) {
	hdr := func(id uint32, end bool, kv ...string) func(*http2.Framer, func(...string) []byte) {
		return func(fr *http2.Framer, enc func(...string) []byte) {
			fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, EndStream: end, EndHeaders: true, BlockFragment: enc(kv...)})
		}
	}
	f.Add(fuzzSeed(func(fr *http2.Framer, enc func(...string) []byte) { // a full gRPC answer
		hdr(1, false, ":status", "200", "content-type", "application/grpc")(fr, enc)
		fr.WriteData(1, false, []byte{0, 0, 0, 0, 2, 'h', 'i'})
		hdr(1, true, "grpc-status", "0")(fr, enc)
	}))
	f.Add(fuzzSeed(func(fr *http2.Framer, enc func(...string) []byte) { // trailers-only, then RST
		hdr(1, true, ":status", "200", "grpc-status", "5")(fr, enc)
		fr.WriteRSTStream(1, http2.ErrCodeNo)
	}))
	f.Add(fuzzSeed(func(fr *http2.Framer, enc func(...string) []byte) { // control frames
		fr.WritePing(false, [8]byte{1})
		fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0})
		fr.WriteWindowUpdate(0, 100)
		fr.WriteWindowUpdate(1, 1<<31-1)
		fr.WriteGoAway(0, http2.ErrCodeNo, []byte("bye"))
	}))
	f.Add(fuzzSeed(func(fr *http2.Framer, enc func(...string) []byte) { // padded DATA, CONTINUATION
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: enc(":status", "200")[:1]})
		fr.WriteContinuation(1, true, enc(":status", "200")[1:])
		fr.WriteDataPadded(1, false, []byte("abc"), make([]byte, 20))
		fr.WriteRSTStream(1, http2.ErrCodeCancel)
	}))
	f.Add(fuzzSeed(func(fr *http2.Framer, enc func(...string) []byte) { // push, unknown, priority
		fr.WriteRawFrame(0xfa, 0, 0, []byte("unknown"))
		fr.WritePriority(1, http2.PriorityParam{Weight: 3})
		fr.WritePushPromise(http2.PushPromiseParam{StreamID: 1, PromiseID: 2, EndHeaders: true, BlockFragment: enc(":path", "/")})
	}))
	f.Add([]byte("HTTP/1.1 200 OK\r\n\r\n"))
	f.Add([]byte{0xff, 0xff, 0xff, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01})

	settings := fuzzSeed(func(fr *http2.Framer, _ func(...string) []byte) { fr.WriteSettings() })
	f.Fuzz(func(t *testing.T, data []byte) {
		c1, c2 := net.Pipe()
		drained := make(chan struct{})
		go func() { io.Copy(io.Discard, c2); close(drained) }()
		cc, err := New(context.Background(), c1, Options{WriteTimeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		done := make(chan struct{})
		go func() {
			defer close(done)
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://x/y", newBufBody([]byte("req")))
			resp, err := cc.RoundTrip(req)
			if err != nil {
				return
			}
			resp.Body.(Buffered).Buffered()
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}()
		c2.SetWriteDeadline(time.Now().Add(2 * time.Second))
		c2.Write(settings)
		c2.Write(data)
		c2.Close() // the end of the input: the connection fails
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("RoundTrip hung")
		}
		cc.Close()
		<-drained
		if cc.Err() == nil {
			t.Fatal("Err nil after Close")
		}
	})
}
