package h2client

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"golang.org/x/net/http/httpguts"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// RoundTrip sends req as one HTTP/2 stream and returns the response once its
// HEADERS arrive. Semantics follow net/http's HTTP/2 ClientConn: the
// response's Trailer is filled before Body.Read returns io.EOF; a reset
// stream fails with *StreamError; the end of req's context resets the
// stream and fails the call with the context's error. req.Body is closed
// once the call is done with it. As in x/net, content-length is sent only
// from req.ContentLength (when positive; a Content-Length in req.Header is
// dropped), and a body longer or shorter than that fails the call.
//
// If req.Body implements Buffered, what it says is readable is read at once
// and sent with the HEADERS in one write; the rest (if any) is sent by a
// goroutine of the stream.
func (cc *Conn) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := checkRequest(req); err != nil {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, err
	}
	ctx := req.Context()
	s := &stream{cc: cc, req: req, ctx: ctx, wake: make(chan struct{}, 1), reqLen: declaredLength(req)}
	s.body.s = s

	// Take what the body has ready, without blocking.
	var (
		first  []byte
		fbuf   *[]byte
		bb     Buffered
		ended  = req.Body == nil || req.Body == http.NoBody
		hasOut = !ended
	)
	if hasOut {
		bb, _ = req.Body.(Buffered)
		if bb != nil {
			n, end := bb.Buffered()
			if n > 0 {
				fbuf = getBuf(n)
				first = (*fbuf)[:n]
				m, err := io.ReadFull(req.Body, first)
				switch err {
				case nil:
				case io.EOF, io.ErrUnexpectedEOF:
					end = true
				default:
					putBuf(fbuf)
					s.closeReqBody()
					return nil, fmt.Errorf("h2client: reading request body: %w", err)
				}
				first = first[:m]
			}
			ended = end
			// Checked before the stream opens: nothing need be reset.
			if err := s.countReqBody(len(first), ended); err != nil {
				if fbuf != nil {
					putBuf(fbuf)
				}
				s.closeReqBody()
				return nil, err
			}
		}
	}
	fail := func(err error) (*http.Response, error) {
		if fbuf != nil {
			putBuf(fbuf)
		}
		s.endCall()
		return nil, err
	}
	if ctx.Done() != nil {
		if err := ctx.Err(); err != nil {
			return fail(err)
		}
		s.stopCtx = context.AfterFunc(ctx, s.onCtxDone)
	}

	// Reserve a stream slot.
	cc.mu.Lock()
	for {
		if err := cc.newStreamErrLocked(s); err != nil {
			cc.mu.Unlock()
			return fail(err)
		}
		if cc.active < cc.maxConcurrent() {
			break
		}
		cc.cond.Wait()
	}
	cc.active++
	cc.mu.Unlock()

	// Open the stream and write what we have, in one flush.
	cc.wmu.Lock()
	cc.mu.Lock()
	if err := cc.newStreamErrLocked(s); err != nil {
		cc.releaseSlotLocked()
		cc.unlock()
		cc.wmu.Unlock()
		return fail(err)
	}
	if cc.nextID > maxStreamID {
		cc.goAwayErr = errIDsSpent
		cc.releaseSlotLocked()
		cc.unlock()
		cc.wmu.Unlock()
		return fail(errIDsSpent)
	}
	s.id = cc.nextID
	cc.nextID += 2
	cc.streams[s.id] = s
	s.inMap = true
	s.sendWindow = cc.peerInitWindow
	s.recvWindow = int64(cc.opts.StreamWindow)
	n := 0
	if len(first) > 0 && s.sendWindow > 0 && cc.sendWindow > 0 {
		n = int(min(int64(len(first)), s.sendWindow, cc.sendWindow))
		s.sendWindow -= int64(n)
		cc.sendWindow -= int64(n)
	}
	endNow := ended && n == len(first)
	s.sentEnd = endNow
	cc.mu.Unlock()

	cc.writeHeadersLocked(s.id, req, endNow && len(first) == 0)
	if n > 0 {
		cc.writeDataLocked(s.id, first[:n], endNow)
	}
	s.wEnd = endNow
	err := cc.bw.Flush()
	cc.wmu.Unlock()
	if err != nil {
		cc.failWrite(err) // fails s too
	}

	if endNow {
		if fbuf != nil {
			putBuf(fbuf)
			fbuf = nil
		}
		if hasOut {
			s.closeReqBody()
		}
	} else {
		go s.writeBody(first[n:], fbuf, bb)
		fbuf = nil
	}

	// Wait for the response HEADERS.
	cc.mu.Lock()
	for !s.gotHeaders && s.err == nil {
		cc.mu.Unlock()
		<-s.wake
		cc.mu.Lock()
	}
	if !s.gotHeaders {
		err := s.err
		cc.mu.Unlock()
		return fail(err)
	}
	cc.mu.Unlock()
	return &s.resp, nil
}

// declaredLength is the request body's length as sent in content-length
// and enforced on the body, or -1 if unknown (not sent). As net/http's
// client, a ContentLength of 0 with a body means unknown.
func declaredLength(req *http.Request) int64 {
	if req.ContentLength > 0 && req.Body != nil && req.Body != http.NoBody {
		return req.ContentLength
	}
	return -1
}

// newStreamErrLocked reports why s cannot open a stream now, if it cannot.
func (cc *Conn) newStreamErrLocked(s *stream) error {
	switch {
	case cc.err != nil:
		return cc.err
	case cc.goAwayErr != nil:
		return cc.goAwayErr
	case s.err != nil:
		return s.err
	}
	return nil
}

// checkRequest rejects requests RoundTrip cannot encode.
func checkRequest(req *http.Request) error {
	if req.URL == nil {
		return errNoURL
	}
	for k, vv := range req.Header {
		if !httpguts.ValidHeaderFieldName(k) {
			return fmt.Errorf("h2client: invalid header field name %q", k)
		}
		for _, v := range vv {
			if strings.ContainsAny(v, "\r\n\x00") {
				return fmt.Errorf("h2client: invalid value for header field %q", k)
			}
		}
	}
	return nil
}

// writeHeadersLocked encodes req's header block and writes it as HEADERS
// and, if larger than the peer's SETTINGS_MAX_FRAME_SIZE, CONTINUATION
// frames; wmu held.
func (cc *Conn) writeHeadersLocked(id uint32, req *http.Request, endStream bool) {
	cc.hbuf.Reset()
	enc := cc.henc
	method := req.Method
	if method == "" {
		method = http.MethodGet
	}
	scheme := req.URL.Scheme
	if scheme == "" {
		scheme = "http"
	}
	host := req.Host
	if host == "" {
		host = req.URL.Host
	}
	path := req.URL.EscapedPath()
	if path == "" {
		path = "/"
	}
	if req.URL.RawQuery != "" || req.URL.ForceQuery {
		path += "?" + req.URL.RawQuery
	}
	enc.WriteField(hpack.HeaderField{Name: ":method", Value: method})
	enc.WriteField(hpack.HeaderField{Name: ":scheme", Value: scheme})
	enc.WriteField(hpack.HeaderField{Name: ":authority", Value: host})
	enc.WriteField(hpack.HeaderField{Name: ":path", Value: path})
	for k, vv := range req.Header {
		name := cc.lowerLocked(k)
		switch name {
		case "connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade", "host",
			"content-length": // only req.ContentLength, which the body is held to, says it (as x/net)
			continue
		}
		for _, v := range vv {
			if name == "te" && v != "trailers" {
				continue
			}
			enc.WriteField(hpack.HeaderField{Name: name, Value: v})
		}
	}
	if declaredLength(req) > 0 {
		enc.WriteField(hpack.HeaderField{Name: "content-length", Value: strconv.FormatInt(req.ContentLength, 10)})
	}

	block := cc.hbuf.Bytes()
	frag := block[:min(len(block), cc.peerMaxFrame)]
	block = block[len(frag):]
	cc.wfr.WriteHeaders(http2.HeadersFrameParam{
		StreamID:      id,
		BlockFragment: frag,
		EndStream:     endStream,
		EndHeaders:    len(block) == 0,
	})
	for len(block) > 0 {
		frag = block[:min(len(block), cc.peerMaxFrame)]
		block = block[len(frag):]
		cc.wfr.WriteContinuation(id, len(block) == 0, frag)
	}
}

// lowerLocked returns name in lower case, cached for names seen before;
// wmu held.
func (cc *Conn) lowerLocked(name string) string {
	if l, ok := cc.lower[name]; ok {
		return l
	}
	l := strings.ToLower(name)
	if len(cc.lower) < 512 {
		cc.lower[name] = l
	}
	return l
}
