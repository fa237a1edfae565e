package h2front

import (
	"fmt"
	"net/http"
	"runtime"
	"strings"

	"golang.org/x/net/http2"
)

// responseWriter is the handler's http.ResponseWriter with the semantics
// of net/http's HTTP/2 one: headers are sent lazily (first Write with data,
// Flush, or handler end), Write buffers DATA without flushing, and the
// trailers are the declared ("Trailer") keys plus http.TrailerPrefix keys.
// Its fields belong to the handler goroutine; frames are written under the
// connection's mu.
type responseWriter struct {
	st          *stream
	header      http.Header
	status      int // 0 until WriteHeader (or an implied 200)
	sentHeader  bool
	trailerKeys []string // declared trailer keys, fixed when headers are sent
	declared    bool     // trailerKeys computed
	detached    *detach  // set by Detach
	parked      *parked  // set by Park
}

var (
	_ http.ResponseWriter = (*responseWriter)(nil)
	_ http.Flusher        = (*responseWriter)(nil)
)

// Header returns the header map that WriteHeader, Write or Flush sends.
func (w *responseWriter) Header() http.Header {
	if w.header == nil {
		w.header = make(http.Header)
	}
	return w.header
}

// WriteHeader records the status code once; 1xx codes are skipped and
// later calls ignored.
func (w *responseWriter) WriteHeader(code int) {
	if code < 100 || code > 999 {
		panic(fmt.Sprintf("invalid WriteHeader code %v", code))
	}
	if code < 200 || w.status != 0 {
		return
	}
	w.status = code
}

// Write sends the headers if not yet sent and buffers p as DATA frames
// within the flow-control windows, without flushing.
func (w *responseWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if !bodyAllowed(w.status) {
		return 0, http.ErrBodyNotAllowed
	}
	st := w.st
	c := st.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := st.writeErrLocked(); err != nil {
		return 0, err
	}
	if len(p) == 0 {
		return 0, nil
	}
	if !w.sentHeader {
		if err := w.writeHeadersLocked(false); err != nil {
			return 0, err
		}
	}
	return st.writeDataLocked(p)
}

// WriteString is Write for a string.
func (w *responseWriter) WriteString(s string) (int, error) {
	return w.Write([]byte(s))
}

// Flush sends the headers if not yet sent and everything buffered.
func (w *responseWriter) Flush() { _ = w.FlushError() }

// FlushError is Flush reporting an error (for http.ResponseController).
//
// Flushes of one connection's streams are combined, so that many busy
// streams on one connection (a thousand relayed streams from a few
// clients) share write calls instead of each paying its own: a flush of
// little (under flushBatch) while other streams are open first yields the
// processor once, so that the handlers ready to run add their bytes, and
// whichever flush comes last sends them all (grpc-go's writer yields the
// same way before a small flush); a flush that finds another handler's
// flush waiting for the connection leaves its bytes to that one. The last
// flush of such a chain always writes; a lone stream's writes at once.
func (w *responseWriter) FlushError() error {
	st := w.st
	c := st.c
	c.flushers.Add(1)
	c.mu.Lock()
	c.flushers.Add(-1)
	defer c.mu.Unlock()
	err := st.writeErrLocked()
	if err == nil && !w.sentHeader {
		if w.status == 0 {
			w.status = http.StatusOK
		}
		err = w.writeHeadersLocked(false)
	}
	if n := c.bw.Buffered(); err == nil && n > 0 && n < flushBatch && len(c.streams) > 1 {
		c.flushers.Add(1)
		c.mu.Unlock()
		runtime.Gosched()
		c.mu.Lock()
		c.flushers.Add(-1)
	}
	if c.flushers.Load() > 0 {
		return err // the waiting flush sends these bytes too
	}
	// Flushed even when this stream failed: a flush that left its bytes
	// to this one counted on it.
	if ferr := c.flushLocked(); err == nil {
		err = ferr
	}
	return err
}

// writeHeadersLocked fixes the declared trailers and writes HEADERS.
func (w *responseWriter) writeHeadersLocked(endStream bool) error {
	w.sentHeader = true
	w.declareTrailers()
	c := w.st.c
	block := c.encodeStatusLocked(w.status, w.header, w.trailerKeys)
	return c.writeHeaderBlockLocked(w.st.id, endStream, block)
}

// declareTrailers collects the keys named by the "Trailer" header.
func (w *responseWriter) declareTrailers() {
	if w.declared {
		return
	}
	w.declared = true
	for _, v := range w.header["Trailer"] {
		for v != "" {
			var k string
			k, v, _ = strings.Cut(v, ",")
			k = http.CanonicalHeaderKey(strings.TrimSpace(k))
			switch k {
			case "", "Transfer-Encoding", "Trailer", "Content-Length":
				continue
			}
			w.trailerKeys = append(w.trailerKeys, k)
		}
	}
}

// hasTrailers reports whether any trailer field has a value.
func (w *responseWriter) hasTrailers() bool {
	for _, k := range w.trailerKeys {
		if len(w.header[k]) > 0 {
			return true
		}
	}
	for k, vv := range w.header {
		if len(vv) > 0 && strings.HasPrefix(k, http.TrailerPrefix) && len(k) > len(http.TrailerPrefix) {
			return true
		}
	}
	return false
}

// encodeTrailersLocked encodes the trailer block.
func (w *responseWriter) encodeTrailersLocked() []byte {
	c := w.st.c
	c.hbuf.Reset()
	for _, k := range w.trailerKeys {
		c.encodeFieldsLocked(k, w.header[k])
	}
	for k, vv := range w.header {
		if strings.HasPrefix(k, http.TrailerPrefix) {
			c.encodeFieldsLocked(k[len(http.TrailerPrefix):], vv)
		}
	}
	return c.hbuf.Bytes()
}

// finish ends the response when the handler returns: the headers if not
// sent, then trailers or an empty END_STREAM DATA (or a single HEADERS
// with END_STREAM when nothing else is to be sent), RST_STREAM(NO_ERROR)
// if the request is still open, all in one flush.
func (w *responseWriter) finish() {
	st := w.st
	c := st.c
	c.mu.Lock()
	defer c.mu.Unlock()
	st.closeBodyLocked()
	if err := st.writeErrLocked(); err != nil {
		st.done = true
		c.removeStreamLocked(st, err)
		return
	}
	if w.status == 0 {
		w.status = http.StatusOK
	}
	w.declareTrailers()
	trailers := w.hasTrailers()
	var err error
	switch {
	case !w.sentHeader && !trailers:
		w.sentHeader = true
		err = c.writeHeaderBlockLocked(st.id, true, c.encodeStatusLocked(w.status, w.header, w.trailerKeys))
	default:
		if !w.sentHeader {
			err = w.writeHeadersLocked(false)
		}
		if err == nil && trailers {
			err = c.writeHeaderBlockLocked(st.id, true, w.encodeTrailersLocked())
		} else if err == nil {
			err = c.writeDataFrameLocked(st.id, nil, true)
		}
	}
	if err == nil && !st.remoteDone {
		_ = c.wfr.WriteRSTStream(st.id, http2.ErrCodeNo)
	}
	st.done = true
	c.removeStreamLocked(st, nil)
	_ = c.flushLocked()
}

// bodyAllowed reports whether a response with status may have a body.
func bodyAllowed(status int) bool {
	return status >= 200 && status != http.StatusNoContent && status != http.StatusNotModified
}

// Reset ends the stream now, from any goroutine, with RST_STREAM
// (REFUSED_STREAM, which gRPC clients report as UNAVAILABLE and retry): a
// write blocked on the client's flow-control window returns an error, and
// so does every later one. The relay's drain uses it for a stream it ended
// whose end the client does not take (it is not reading), so that the
// client, told at once, resumes elsewhere instead of waiting for the grace.
// Reset does nothing once the stream is over.
func (w *responseWriter) Reset() {
	st := w.st
	c := st.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if st.done || st.reset || c.closed || c.werr != nil {
		return
	}
	c.resetStreamLocked(st.id, http2.ErrCodeRefusedStream)
	_ = c.flushLocked()
}

// Resetter is implemented by the front's ResponseWriter (see Reset).
type Resetter interface{ Reset() }
