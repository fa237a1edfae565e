package webapi

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestSmallBuffers hijacks connections through smallBuffers with bytes the
// client sent right after its request (before any answer), and reads them
// back the way coder/websocket does (it moves what the reader holds in
// front of the connection): nothing read ahead is lost, and the buffers
// are the small ones unless the bytes read ahead do not fit.
func TestSmallBuffers(t *testing.T) {
	tests := []struct {
		name      string
		ahead     string
		wantRead  int // the reader's size
		wantWrite int
	}{
		{"nothing read ahead", "", wsReadBuffer, wsWriteBuffer},
		{"a frame read ahead", "\x81\x05hello", wsReadBuffer, wsWriteBuffer},
		{"more than the small reader holds", strings.Repeat("x", 2*wsReadBuffer), 4096, 4096},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			type result struct {
				read, write int
				got         string
				err         error
			}
			done := make(chan result, 1)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(http.StatusSwitchingProtocols)
				conn, brw, err := smallBuffers{w}.Hijack()
				if err != nil {
					done <- result{err: err}
					return
				}
				defer conn.Close()
				res := result{read: brw.Reader.Size(), write: brw.Writer.Size()}
				b, _ := brw.Reader.Peek(brw.Reader.Buffered())
				brw.Reader.Reset(io.MultiReader(bytes.NewReader(b), conn))
				conn.SetReadDeadline(time.Now().Add(10 * time.Second))
				got := make([]byte, len(tt.ahead))
				_, res.err = io.ReadFull(brw.Reader, got)
				res.got = string(got)
				done <- res
			}))
			defer srv.Close()
			c, err := net.Dial("tcp", srv.Listener.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			// One write: the request and what follows it arrive together.
			if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"+tt.ahead); err != nil {
				t.Fatal(err)
			}
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			res := <-done
			if res.err != nil {
				t.Fatal(res.err)
			}
			if res.got != tt.ahead {
				t.Errorf("read %q after the hijack; want %q", res.got, tt.ahead)
			}
			if res.read != tt.wantRead || res.write != tt.wantWrite {
				t.Errorf("buffers %d/%d; want %d/%d", res.read, res.write, tt.wantRead, tt.wantWrite)
			}
		})
	}
}
