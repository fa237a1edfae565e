package h2client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/betcode-dev/betcode/shared/leakcheck"
)

// TestHostileServers: servers written with a raw Framer that break the
// rules. Each case says what the call and the connection must see.
func TestHostileServers(t *testing.T) {
	bigFields := []string{":status", "200"}
	for i := range 100 {
		bigFields = append(bigFields, fmt.Sprintf("x-big-%d", i), strings.Repeat("a", 10<<10))
	}
	tests := []struct {
		name     string
		opts     Options
		serve    func(rc *rawConn, got chan<- string)
		callErr  string // RoundTrip or body read error contains this
		connDies bool   // Err() becomes non-nil
		srvSees  string // the server reports this (if set)
	}{
		{
			name: "1 MiB header block in many fields",
			serve: func(rc *rawConn, got chan<- string) {
				h := rc.nextHeaders()
				rc.writeHeaders(h.StreamID, false, bigFields...)
				rc.drain(nil)
			},
			callErr:  "MaxHeaderListSize",
			connDies: true,
		},
		{
			name: "1 MiB header field",
			serve: func(rc *rawConn, got chan<- string) {
				h := rc.nextHeaders()
				rc.writeHeaders(h.StreamID, false, ":status", "200", "x-big", strings.Repeat("a", 1<<20))
				rc.drain(nil)
			},
			callErr:  "MaxHeaderListSize",
			connDies: true,
		},
		{
			name: "DATA beyond the stream window",
			opts: Options{StreamWindow: 16384},
			serve: func(rc *rawConn, got chan<- string) {
				h := rc.nextHeaders()
				rc.writeHeaders(h.StreamID, false, ":status", "200")
				// One frame, so that no refund can come in between (we read
				// frames up to 1 MiB, over the advertised 16 KiB).
				rc.fr.WriteData(h.StreamID, false, make([]byte, 20000))
				rc.drain(func(f http2.Frame) {
					if r, ok := f.(*http2.RSTStreamFrame); ok {
						got <- "rst " + r.ErrCode.String()
					}
				})
			},
			callErr: "FLOW_CONTROL_ERROR",
			srvSees: "rst FLOW_CONTROL_ERROR",
		},
		{
			name: "PING never answered",
			opts: Options{PingEvery: 50 * time.Millisecond, PingTimeout: 100 * time.Millisecond},
			serve: func(rc *rawConn, got chan<- string) {
				rc.nextHeaders()
				rc.drain(nil) // read everything, answer nothing
			},
			callErr:  "ping timeout",
			connDies: true,
		},
		{
			name: "garbage instead of frames",
			serve: func(rc *rawConn, got chan<- string) {
				rc.nextHeaders()
				rc.c.Write([]byte("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n\x00\xff\x03garbage"))
				rc.drain(nil)
			},
			callErr:  "connection failed",
			connDies: true,
		},
		{
			name: "PUSH_PROMISE",
			serve: func(rc *rawConn, got chan<- string) {
				h := rc.nextHeaders()
				rc.fr.WritePushPromise(http2.PushPromiseParam{
					StreamID: h.StreamID, PromiseID: 2, EndHeaders: true,
					BlockFragment: rc.encode(":method", "GET", ":scheme", "http", ":authority", "x", ":path", "/p"),
				})
				rc.drain(func(f http2.Frame) {
					if g, ok := f.(*http2.GoAwayFrame); ok {
						got <- "goaway " + g.ErrCode.String()
					}
				})
			},
			callErr:  "PUSH_PROMISE",
			connDies: true,
			srvSees:  "goaway PROTOCOL_ERROR",
		},
		{
			name: "frame over 1 MiB",
			serve: func(rc *rawConn, got chan<- string) {
				h := rc.nextHeaders()
				rc.writeHeaders(h.StreamID, false, ":status", "200")
				rc.c.Write([]byte{0x20, 0, 0, byte(http2.FrameData), 0, 0, 0, 0, byte(h.StreamID)})
				rc.drain(func(f http2.Frame) {
					if g, ok := f.(*http2.GoAwayFrame); ok {
						got <- "goaway " + g.ErrCode.String()
					}
				})
			},
			callErr:  "frame too large",
			connDies: true,
			srvSees:  "goaway FRAME_SIZE_ERROR",
		},
		{
			name: "DATA before HEADERS",
			serve: func(rc *rawConn, got chan<- string) {
				h := rc.nextHeaders()
				rc.fr.WriteData(h.StreamID, true, []byte("x"))
				rc.drain(nil)
			},
			callErr: "PROTOCOL_ERROR",
		},
		{
			name: "missing :status",
			serve: func(rc *rawConn, got chan<- string) {
				h := rc.nextHeaders()
				rc.writeHeaders(h.StreamID, true, "content-type", "text/plain")
				rc.drain(nil)
			},
			callErr: "PROTOCOL_ERROR",
		},
		{
			name: "connection window exceeded",
			opts: Options{StreamWindow: 1 << 20, ConnWindow: 65535},
			serve: func(rc *rawConn, got chan<- string) {
				h := rc.nextHeaders()
				rc.writeHeaders(h.StreamID, false, ":status", "200")
				rc.fr.WriteData(h.StreamID, false, make([]byte, 70000)) // one frame: no refund in between
				rc.drain(nil)
			},
			callErr:  "FLOW_CONTROL_ERROR",
			connDies: true,
		},
		{
			name: "SETTINGS with 101 entries",
			serve: func(rc *rawConn, got chan<- string) {
				rc.nextHeaders()
				var st []http2.Setting
				for i := range 101 {
					st = append(st, http2.Setting{ID: http2.SettingID(0x100 + i), Val: 1})
				}
				rc.fr.WriteSettings(st...)
				rc.drain(goAwaySeen(got))
			},
			callErr:  "SETTINGS with 101 entries",
			connDies: true,
			srvSees:  "goaway PROTOCOL_ERROR",
		},
		{
			name: "SETTINGS with a duplicate",
			serve: func(rc *rawConn, got chan<- string) {
				rc.nextHeaders()
				rc.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1000},
					http2.Setting{ID: http2.SettingInitialWindowSize, Val: 2000})
				rc.drain(goAwaySeen(got))
			},
			callErr:  "duplicates",
			connDies: true,
			srvSees:  "goaway PROTOCOL_ERROR",
		},
		{
			name: "endless empty CONTINUATION",
			serve: func(rc *rawConn, got chan<- string) {
				h := rc.nextHeaders()
				rc.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: h.StreamID, BlockFragment: rc.encode(":status", "200")})
				go rc.drain(goAwaySeen(got))
				var buf bytes.Buffer
				fr := http2.NewFramer(&buf, nil)
				for range 4096 {
					fr.WriteContinuation(h.StreamID, false, nil)
				}
				for {
					if _, err := rc.c.Write(buf.Bytes()); err != nil {
						return // the client closed the connection
					}
				}
			},
			callErr:  "CONTINUATION",
			connDies: true,
			srvSees:  "goaway ENHANCE_YOUR_CALM",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			leakcheck.Goroutines(t)
			got := make(chan string, 10)
			addr := startRaw(t, func(rc *rawConn) { tc.serve(rc, got) })
			cc, _ := dial(t, addr, tc.opts)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			resp, err := cc.RoundTrip(simpleReq(ctx, addr))
			if err == nil {
				_, err = io.ReadAll(resp.Body)
				resp.Body.Close()
			}
			if err == nil || !strings.Contains(err.Error(), tc.callErr) {
				t.Fatalf("call error %v, want one containing %q", err, tc.callErr)
			}
			if errors.Is(err, context.DeadlineExceeded) {
				t.Fatal("call hung until its deadline")
			}
			if tc.connDies {
				waitFor(t, "Err", func() bool { return cc.Err() != nil })
				if _, err := cc.RoundTrip(simpleReq(ctx, addr)); err == nil {
					t.Fatal("RoundTrip on a failed connection succeeded")
				}
			} else if err := cc.Err(); err != nil {
				t.Fatalf("connection failed: %v", err)
			}
			if tc.srvSees != "" {
				select {
				case s := <-got:
					if s != tc.srvSees {
						t.Fatalf("server saw %q, want %q", s, tc.srvSees)
					}
				case <-time.After(5 * time.Second):
					t.Fatalf("server did not see %q", tc.srvSees)
				}
			}
		})
	}
}

// goAwaySeen reports the code of a GOAWAY the server reads on got.
func goAwaySeen(got chan<- string) func(http2.Frame) {
	return func(f http2.Frame) {
		if g, ok := f.(*http2.GoAwayFrame); ok {
			got <- "goaway " + g.ErrCode.String()
		}
	}
}
