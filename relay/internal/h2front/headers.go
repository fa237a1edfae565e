package h2front

import (
	"golang.org/x/net/http2"
)

// processHeaders handles a decoded HEADERS (+CONTINUATION) block: a new
// stream, or trailers ending an open stream's request body.
func (c *conn) processHeaders(f *http2.MetaHeadersFrame) error {
	id := f.StreamID
	if id%2 != 1 {
		return connErr{http2.ErrCodeProtocol, "even stream id"}
	}
	c.mu.Lock()
	if st := c.streams[id]; st != nil {
		defer c.mu.Unlock()
		if st.remoteDone {
			return streamErr{id, http2.ErrCodeStreamClosed}
		}
		if !f.StreamEnded() {
			return streamErr{id, http2.ErrCodeProtocol}
		}
		if st.badLengthLocked(0, true) {
			return streamErr{id, http2.ErrCodeProtocol}
		}
		// Trailers: they end the request body; the fields are ignored.
		st.endRemoteLocked()
		st.wakeBodyLocked()
		return nil
	}
	if id <= c.maxID {
		c.mu.Unlock()
		return connErr{http2.ErrCodeProtocol, "stream id not increasing"}
	}
	c.maxID = id
	if c.goingAway {
		// Past our GOAWAY's last stream id, or after the client's GOAWAY:
		// refused (the lastID stays put), so that the call fails at once
		// and may be retried rather than hang; a client that has seen our
		// GOAWAY does not wait for these anyway.
		c.mu.Unlock()
		return streamErr{id, http2.ErrCodeRefusedStream}
	}
	c.lastID = id
	if f.Truncated {
		c.writeTooLargeLocked(id, f.StreamEnded())
		c.mu.Unlock()
		return nil
	}
	if uint32(len(c.streams)) >= c.lim.maxStreams {
		c.mu.Unlock()
		return streamErr{id, http2.ErrCodeRefusedStream}
	}
	c.mu.Unlock()

	st := newStream(c, id)
	req, ok := c.newRequest(st, f)
	if !ok {
		st.cancel()
		return streamErr{id, http2.ErrCodeProtocol}
	}
	st.req = req
	c.mu.Lock()
	c.streams[id] = st
	st.declLen = req.ContentLength
	if f.StreamEnded() {
		st.remoteDone = true
		st.body.ended = true
	}
	c.mu.Unlock()
	c.pending = append(c.pending, st)
	if c.srv.onPending != nil {
		c.srv.onPending(len(c.pending))
	}
	return nil
}

// dropPending takes st out of the streams awaiting their handler, if it
// is there, so that a stream reset before its handler started holds no
// memory until the next idle run (a client resetting every stream it
// opens would otherwise grow the list). Reader goroutine only; the list
// holds at most idleEvery streams, so the scan is short.
func (c *conn) dropPending(st *stream) {
	for i := len(c.pending) - 1; i >= 0; i-- {
		if c.pending[i] == st {
			n := copy(c.pending[i:], c.pending[i+1:])
			c.pending[i+n] = nil
			c.pending = c.pending[:i+n]
			st.cancel()
			return
		}
	}
}

// writeTooLargeLocked answers a request whose header block exceeded
// MaxHeaderListSize with 431, as net/http does, without running a handler.
func (c *conn) writeTooLargeLocked(id uint32, ended bool) {
	c.writeCtrlLocked(func() error {
		if err := c.writeHeaderBlockLocked(id, true, c.encodeStatusLocked(431, nil, nil)); err != nil {
			return err
		}
		if !ended {
			return c.wfr.WriteRSTStream(id, http2.ErrCodeNo)
		}
		return nil
	})
}

// startPending starts the handlers of the streams collected since the
// reader last blocked; streams reset meanwhile are dropped.
func (c *conn) startPending() error {
	pending := c.pending
	c.pending = c.pending[:0]
	c.mu.Lock()
	defer c.mu.Unlock()
	limit := int(handlerFactor * c.lim.maxStreams)
	for i, st := range pending {
		pending[i] = nil
		if st.reset || c.closed {
			st.cancel()
			continue
		}
		if c.running >= limit {
			return connErr{http2.ErrCodeEnhanceYourCalm, "too many running handlers"}
		}
		c.running++
		c.wg.Add(1)
		go st.run()
	}
	return nil
}
