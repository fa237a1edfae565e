package h2front

import (
	"net/http"
	"strconv"
	"strings"

	"golang.org/x/net/http/httpguts"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/betcode-dev/betcode/shared/h2wire"
)

// writeBufs recycles the connections' write buffers (h2wire.PooledWriter):
// an idle connection holds none.
var writeBufs = h2wire.NewWriterPool(writeBufSize)

// readBufs recycles the connections' read buffers (h2wire.PooledReader):
// an idle connection waits on 512 bytes of its own.
var readBufs = h2wire.NewReaderPool(readBufSize)

// Every write below happens under c.mu into c.bw; nothing reaches the
// connection before flushLocked (or bw filling up).

// writeCtrlLocked writes a control frame from the reader (or a refund) and
// leaves it for the next flush.
func (c *conn) writeCtrlLocked(write func() error) {
	if c.werr != nil || c.closed {
		return
	}
	if err := write(); err != nil {
		c.failWriteLocked(err)
		return
	}
	c.ctrlPending = true
}

// flushLocked sends everything buffered in one write.
func (c *conn) flushLocked() error {
	if c.werr != nil {
		return c.werr
	}
	c.ctrlPending = false
	if c.bw.Buffered() == 0 {
		return nil
	}
	if err := c.bw.Flush(); err != nil {
		c.failWriteLocked(err)
		return err
	}
	return nil
}

// failWriteLocked records a write error (a blocked write past WriteTimeout
// or a dead peer) and closes the transport, which ends the reader.
func (c *conn) failWriteLocked(err error) {
	if c.werr != nil {
		return
	}
	c.werr = err
	c.log.Debug("h2front: write failed; closing", "remote", c.remoteAddr, "err", err)
	rawClose(c.nc)
	c.sendCond.Broadcast()
}

// writeGoAwayLocked writes GOAWAY(code) naming the last stream processed.
func (c *conn) writeGoAwayLocked(code http2.ErrCode) {
	c.writeCtrlLocked(func() error { return c.wfr.WriteGoAway(c.lastID, code, nil) })
}

// writeHeaderBlockLocked writes an encoded header block as HEADERS plus
// CONTINUATION frames no larger than the peer's SETTINGS_MAX_FRAME_SIZE.
func (c *conn) writeHeaderBlockLocked(id uint32, endStream bool, block []byte) error {
	if c.werr != nil {
		return c.werr
	}
	maxFrame := int(c.peerMaxFrame)
	first := block
	if len(first) > maxFrame {
		first = block[:maxFrame]
	}
	rest := block[len(first):]
	err := c.wfr.WriteHeaders(http2.HeadersFrameParam{
		StreamID:      id,
		BlockFragment: first,
		EndStream:     endStream,
		EndHeaders:    len(rest) == 0,
	})
	for err == nil && len(rest) > 0 {
		frag := rest
		if len(frag) > maxFrame {
			frag = rest[:maxFrame]
		}
		rest = rest[len(frag):]
		err = c.wfr.WriteContinuation(id, len(rest) == 0, frag)
	}
	if err != nil {
		c.failWriteLocked(err)
		return err
	}
	c.sentData = true
	return nil
}

// encodeStatusLocked starts a response header block with :status and the
// fields of h that belong in it (see skipResponseHeader); it returns the
// encoded block, valid until the next encode.
func (c *conn) encodeStatusLocked(status int, h http.Header, trailerKeys []string) []byte {
	c.hbuf.Reset()
	var code string
	switch status {
	case 200:
		code = "200"
	case 431:
		code = "431"
	default:
		code = strconv.Itoa(status)
	}
	_ = c.henc.WriteField(hpack.HeaderField{Name: ":status", Value: code})
	for k, vv := range h {
		if skipResponseHeader(k, trailerKeys) {
			continue
		}
		c.encodeFieldsLocked(k, vv)
	}
	return c.hbuf.Bytes()
}

// encodeFieldsLocked encodes key k (canonical or not) with values vv,
// lowercased, skipping invalid names and values.
func (c *conn) encodeFieldsLocked(k string, vv []string) {
	if !httpguts.ValidHeaderFieldName(k) {
		return
	}
	lk := c.lowerLocked(k)
	for _, v := range vv {
		if httpguts.ValidHeaderFieldValue(v) {
			_ = c.henc.WriteField(hpack.HeaderField{Name: lk, Value: v})
		}
	}
}

// skipResponseHeader reports whether Header() key k is left out of the
// response HEADERS: "Trailer" itself, declared trailer keys, keys with
// http.TrailerPrefix and connection-specific fields.
func skipResponseHeader(k string, trailerKeys []string) bool {
	switch k {
	case "Trailer", "Connection", "Keep-Alive", "Proxy-Connection", "Transfer-Encoding", "Upgrade":
		return true
	}
	if strings.HasPrefix(k, http.TrailerPrefix) {
		return true
	}
	for _, t := range trailerKeys {
		if t == k {
			return true
		}
	}
	return false
}

// commonLower maps frequent canonical header names to wire form.
var commonLower = func() map[string]string {
	m := make(map[string]string, len(commonCanon))
	for l, k := range commonCanon {
		m[k] = l
	}
	return m
}()

// lowerLocked returns the lowercase wire form of header name k.
func (c *conn) lowerLocked(k string) string {
	if l, ok := commonLower[k]; ok {
		return l
	}
	if l, ok := c.lowerCache[k]; ok {
		return l
	}
	l := strings.ToLower(k)
	if l == k {
		return l
	}
	if len(c.lowerCache) < canonCacheMax && len(k) < 64 {
		if c.lowerCache == nil {
			c.lowerCache = make(map[string]string)
		}
		c.lowerCache[k] = l
	}
	return l
}
