package h2client

import (
	"errors"
	"fmt"
	"net/http"
	"net/textproto"
	"strconv"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// onHeaders handles a response header block: the response HEADERS (1xx
// skipped), or trailers.
func (cc *Conn) onHeaders(f *http2.MetaHeadersFrame) error {
	if f.Truncated {
		return &connError{http2.ErrCodeProtocol, cc.headerLimitErr()}
	}
	cc.mu.Lock()
	s := cc.streams[f.StreamID]
	if s == nil || s.recvEnd {
		cc.mu.Unlock()
		return nil
	}
	var bad error
	if !s.gotHeaders {
		status := f.PseudoValue("status")
		code, err := strconv.Atoi(status)
		switch {
		case len(status) != 3 || err != nil || code < 100:
			bad = fmt.Errorf("missing or malformed :status %q", status)
		case code < 200:
			if f.StreamEnded() {
				bad = errors.New("informational response with END_STREAM")
			}
		default:
			s.gotHeaders = true
			r := &s.resp
			if code == http.StatusOK {
				r.Status = "200 OK"
			} else {
				r.Status = status + " " + http.StatusText(code)
			}
			r.StatusCode = code
			r.Proto, r.ProtoMajor, r.ProtoMinor = "HTTP/2.0", 2, 0
			r.Header = cc.makeHeader(nil, f.RegularFields())
			r.Trailer = make(http.Header)
			r.ContentLength = -1
			r.Body = &s.body
			r.Request = s.req
			if f.StreamEnded() { // trailers-only response
				s.recvEnd = true
				s.maybeCloseLocked()
			}
			s.signal()
		}
	} else {
		if !f.StreamEnded() {
			bad = errors.New("trailers without END_STREAM")
		} else {
			cc.makeHeader(s.resp.Trailer, f.RegularFields())
			s.recvEnd = true
			s.maybeCloseLocked()
			s.signal()
		}
	}
	cc.unlock()
	if bad != nil {
		cc.resetStream(s, http2.ErrCodeProtocol, fmt.Errorf("h2client: stream %d: malformed response: %v: %w",
			s.id, bad, &StreamError{StreamID: s.id, Code: http2.ErrCodeProtocol}))
	}
	return nil
}

// makeHeader adds fields to h (made if nil) under canonical keys; reader
// goroutine only.
func (cc *Conn) makeHeader(h http.Header, fields []hpack.HeaderField) http.Header {
	if h == nil {
		h = make(http.Header, len(fields))
	}
	vals := make([]string, len(fields)) // one backing array for single values
	for i, f := range fields {
		k, ok := cc.canon[f.Name]
		if !ok {
			k = textproto.CanonicalMIMEHeaderKey(f.Name)
			if len(cc.canon) < 512 {
				cc.canon[f.Name] = k
			}
		}
		if vv, ok := h[k]; ok {
			h[k] = append(vv, f.Value)
		} else {
			vals[i] = f.Value
			h[k] = vals[i : i+1 : i+1]
		}
	}
	return h
}
