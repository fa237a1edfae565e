package h2client

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// rawConn is the server side of one connection of a hand-written HTTP/2
// server, driven frame by frame with a raw http2.Framer.
type rawConn struct {
	t    testing.TB
	c    net.Conn
	fr   *http2.Framer
	enc  *hpack.Encoder
	hbuf bytes.Buffer
}

// startRaw listens on 127.0.0.1 and hands each accepted connection, its
// client preface read and the given SETTINGS sent, to serve (in its own
// goroutine). The listener and connections close at cleanup.
func startRaw(t testing.TB, serve func(rc *rawConn), settings ...http2.Setting) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	conns := make(chan net.Conn, 10)
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns <- c
			rc := &rawConn{t: t, c: c, fr: http2.NewFramer(c, c)}
			rc.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
			rc.enc = hpack.NewEncoder(&rc.hbuf)
			pre := make([]byte, len(http2.ClientPreface))
			if _, err := io.ReadFull(c, pre); err != nil || string(pre) != http2.ClientPreface {
				c.Close()
				continue
			}
			if err := rc.fr.WriteSettings(settings...); err != nil {
				c.Close()
				continue
			}
			go serve(rc)
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		close(conns)
		for c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String()
}

// nextHeaders reads frames until a request HEADERS; nil on error.
func (rc *rawConn) nextHeaders() *http2.MetaHeadersFrame {
	for {
		f, err := rc.fr.ReadFrame()
		if err != nil {
			return nil
		}
		if h, ok := f.(*http2.MetaHeadersFrame); ok {
			return h
		}
	}
}

// drain reads frames until the connection ends, passing each to fn (if
// non-nil).
func (rc *rawConn) drain(fn func(http2.Frame)) {
	for {
		f, err := rc.fr.ReadFrame()
		if err != nil {
			return
		}
		if fn != nil {
			fn(f)
		}
	}
}

// encode hpack-encodes fields given as name, value pairs.
func (rc *rawConn) encode(kv ...string) []byte {
	rc.hbuf.Reset()
	for i := 0; i < len(kv); i += 2 {
		rc.enc.WriteField(hpack.HeaderField{Name: kv[i], Value: kv[i+1]})
	}
	return bytes.Clone(rc.hbuf.Bytes())
}

// writeHeaders writes a header block, split into 16 KiB frames.
func (rc *rawConn) writeHeaders(id uint32, end bool, kv ...string) error {
	block := rc.encode(kv...)
	frag := block[:min(len(block), 16384)]
	block = block[len(frag):]
	err := rc.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: frag, EndStream: end, EndHeaders: len(block) == 0})
	for err == nil && len(block) > 0 {
		frag = block[:min(len(block), 16384)]
		block = block[len(frag):]
		err = rc.fr.WriteContinuation(id, len(block) == 0, frag)
	}
	return err
}

// simpleReq is a GET with no body.
func simpleReq(ctx context.Context, addr string) *http.Request {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/x", nil)
	if err != nil {
		panic(err)
	}
	return req
}
