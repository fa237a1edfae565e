package h2front

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// fuzzSeeds returns valid and invalid frame sequences.
func fuzzSeeds() [][]byte {
	var seeds [][]byte
	build := func(fn func(fr *http2.Framer, block func(path string) []byte)) {
		var buf, hbuf bytes.Buffer
		fr := http2.NewFramer(&buf, nil)
		fr.AllowIllegalWrites = true
		enc := hpack.NewEncoder(&hbuf)
		fn(fr, func(path string) []byte {
			hbuf.Reset()
			for _, kv := range [][2]string{{":method", "POST"}, {":scheme", "https"}, {":path", path}, {":authority", "x"}, {"content-type", "application/grpc"}} {
				_ = enc.WriteField(hpack.HeaderField{Name: kv[0], Value: kv[1]})
			}
			return append([]byte(nil), hbuf.Bytes()...)
		})
		seeds = append(seeds, buf.Bytes())
	}
	build(func(fr *http2.Framer, block func(string) []byte) {
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block("/a"), EndStream: true, EndHeaders: true})
	})
	build(func(fr *http2.Framer, block func(string) []byte) {
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block("/a"), EndHeaders: true})
		_ = fr.WriteData(1, false, []byte("hello"))
		_ = fr.WriteDataPadded(1, true, []byte("x"), make([]byte, 10))
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: block("/b"), EndHeaders: true})
		_ = fr.WriteRSTStream(3, http2.ErrCodeCancel)
		_ = fr.WriteWindowUpdate(0, 1000)
		_ = fr.WritePing(false, [8]byte{1})
		_ = fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 100})
		_ = fr.WriteGoAway(0, http2.ErrCodeNo, nil)
	})
	build(func(fr *http2.Framer, block func(string) []byte) {
		b := block("/c")
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: b[:3]})
		_ = fr.WriteContinuation(1, true, b[3:])
		_ = fr.WriteContinuation(1, true, b[3:]) // out of place
	})
	build(func(fr *http2.Framer, block func(string) []byte) {
		_ = fr.WriteData(0, false, []byte("x"))
		_ = fr.WriteWindowUpdate(1, 0)
		_ = fr.WritePushPromise(http2.PushPromiseParam{StreamID: 1, PromiseID: 2, EndHeaders: true})
	})
	build(func(fr *http2.Framer, block func(string) []byte) {
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 5, BlockFragment: block("/d"), EndHeaders: true})
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 5, BlockFragment: block("/d"), EndHeaders: true, EndStream: true})
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: block("/d"), EndHeaders: true})
		_ = fr.WriteRawFrame(0x42, 0, 0, []byte("unknown"))
		_ = fr.WritePriority(7, http2.PriorityParam{StreamDep: 7})
	})
	seeds = append(seeds, []byte("\x00\x00\x00\x04\x00\x00\x00\x00\x00garbage"))
	return seeds
}

func FuzzFrames(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add(s)
	}
	var start bytes.Buffer
	start.WriteString(http2.ClientPreface)
	_ = http2.NewFramer(&start, nil).WriteSettings()
	_ = http2.NewFramer(&start, nil).WriteSettingsAck()
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", "X-T")
		_, _ = io.WriteString(w, "ok")
		w.Header().Set("X-T", "v")
	})
	f.Fuzz(func(t *testing.T, data []byte) {
		cli, sc := net.Pipe()
		s := &Server{Handler: handler, SettingsTimeout: 2 * time.Second, WriteTimeout: time.Second}
		done := make(chan struct{})
		go func() {
			defer close(done)
			s.ServeConn(sc)
		}()
		drained := make(chan struct{})
		go func() {
			defer close(drained)
			_, _ = io.Copy(io.Discard, cli)
		}()
		_ = cli.SetWriteDeadline(time.Now().Add(2 * time.Second))
		if _, err := cli.Write(start.Bytes()); err == nil {
			_, _ = cli.Write(data)
		}
		_ = cli.Close()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("ServeConn did not return")
		}
		<-drained
	})
}
