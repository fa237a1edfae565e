package h2client

import (
	"context"
	"net/http"
	"sync/atomic"

	"golang.org/x/net/http2"
)

// stream is one call: an HTTP/2 stream, its response and its body.
type stream struct {
	cc      *Conn
	req     *http.Request
	ctx     context.Context
	stopCtx func() bool   // unregisters the context.AfterFunc; nil if none
	wake    chan struct{} // capacity 1: something changed for RoundTrip / Read

	// Guarded by cc.mu.
	notify     func() // respBody.Notify's callback, run at the next signal
	id         uint32
	inMap      bool  // open in HTTP/2 terms: in cc.streams, holds a slot
	sendWindow int64 // what we may still send
	recvWindow int64 // what the peer may still send
	refund     int64 // bytes read by the caller, not yet refunded
	bufp       *[]byte
	off        int // read offset in *bufp
	gotHeaders bool
	recvEnd    bool  // END_STREAM received
	sentEnd    bool  // END_STREAM written
	rst        bool  // RST_STREAM sent or received
	err        error // the call failed; Read returns it
	eof        bool  // Read returned io.EOF
	callDone   bool  // body closed or EOF read or RoundTrip failed

	// Guarded by cc.wmu.
	wEnd bool // END_STREAM written
	wRST bool // RST_STREAM written

	// Owned by RoundTrip, then by the body writer.
	wDirty  bool  // it wrote without flushing
	reqLen  int64 // the body's declared length; -1 unknown
	reqRead int64 // bytes read from the body so far (if reqLen >= 0)

	reqClosed atomic.Bool
	resp      http.Response
	body      respBody
}

// signal wakes the goroutine waiting in RoundTrip or Read, if any, and
// runs the body's Notify callback; cc.mu held.
func (s *stream) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
	if f := s.notify; f != nil {
		s.notify = nil
		go f()
	}
}

// unreadLocked is the number of received bytes not read yet.
func (s *stream) unreadLocked() int {
	if s.bufp == nil {
		return 0
	}
	return len(*s.bufp) - s.off
}

// appendLocked buffers received DATA.
func (s *stream) appendLocked(d []byte) {
	if s.bufp == nil {
		s.bufp = getBuf(len(d))
	}
	b := *s.bufp
	if s.off > 0 && len(b)+len(d) > cap(b) {
		n := copy(b, b[s.off:])
		b = b[:n]
		s.off = 0
	}
	*s.bufp = append(b, d...)
}

// dropBufferLocked discards unread data, handing its bytes back to the
// connection window, and recycles the buffer if release.
func (s *stream) dropBufferLocked(release bool) {
	if s.bufp == nil {
		return
	}
	s.cc.refund += int64(len(*s.bufp) - s.off)
	*s.bufp = (*s.bufp)[:0]
	s.off = 0
	if release {
		putBuf(s.bufp)
		s.bufp = nil
	}
}

// abortLocked fails the call with err (unless it already failed) and drops
// what it buffered. Waiters are woken. The caller closes the request body
// once mu is released (to stop the body writer).
func (s *stream) abortLocked(err error) {
	if s.err == nil {
		s.err = err
	}
	s.dropBufferLocked(false)
	s.signal()
	s.cc.cond.Broadcast()
}

// resetLocked marks s reset by us and takes it out of the open streams. It
// reports whether a RST_STREAM must be written (s was open); if so, the
// stream's slot stays taken until writeControl wrote the RST_STREAM.
func (s *stream) resetLocked() bool {
	if !s.inMap {
		return false
	}
	s.rst = true
	delete(s.cc.streams, s.id)
	s.inMap = false
	return true
}

// maybeCloseLocked closes s in HTTP/2 terms once both sides ended it.
func (s *stream) maybeCloseLocked() {
	if s.recvEnd && s.sentEnd {
		s.cc.removeLocked(s)
	}
}

// stoppedLocked reports whether nothing more may be sent on s.
func (s *stream) stoppedLocked() bool {
	return s.callDone || s.rst || s.err != nil || s.cc.err != nil
}

// writeRSTLocked writes RST_STREAM once; wmu held.
func (s *stream) writeRSTLocked(code http2.ErrCode) {
	if s.wRST || s.id == 0 {
		return
	}
	s.wRST = true
	s.cc.wfr.WriteRSTStream(s.id, code)
}

// closeReqBody closes the request body, once, on the calling goroutine. Only
// goroutines that may block on the body call it: the caller's (RoundTrip,
// endCall), the body writer, the context's AfterFunc. The reader goroutine
// uses stopReqBody.
func (s *stream) closeReqBody() {
	if s.req.Body != nil && s.reqClosed.CompareAndSwap(false, true) {
		s.req.Body.Close()
	}
}

// stopReqBody closes the request body, once, from a new goroutine, as x/net's
// transport does (closeReqBodyLocked). The body's Close may block for long:
// in the relay it is the request body of the relay's own HTTP/2 server,
// whose Close takes that client connection's lock, which a handler holds
// while its write to a client that does not read is blocked. The reader
// goroutine, the connection's failure and anything else that must not stall
// on one call use this. A body already closed (a unary request's, closed by
// RoundTrip once it was sent) costs nothing.
func (s *stream) stopReqBody() {
	body := s.req.Body
	if body != nil && body != http.NoBody && s.reqClosed.CompareAndSwap(false, true) {
		go body.Close()
	}
}

// onCtxDone runs when the request context ends: the call fails with the
// context's error, and an open stream is reset with CANCEL.
func (s *stream) onCtxDone() {
	cc := s.cc
	cc.mu.Lock()
	if s.callDone || s.eof {
		cc.mu.Unlock()
		return
	}
	rst := s.resetLocked()
	s.abortLocked(s.ctx.Err())
	u := cc.takeUpdatesLocked(nil)
	cc.unlock()
	s.cancelAndClose(rst, u)
}

// cancelAndClose writes RST_STREAM CANCEL (if rst) and the window updates
// u, then closes the request body: after the RST_STREAM, as its Close may
// block for long.
func (s *stream) cancelAndClose(rst bool, u windowUpdates) {
	if rst || u.any() {
		var r *stream
		if rst {
			r = s
		}
		s.cc.writeControl(r, http2.ErrCodeCancel, u, true)
	}
	s.closeReqBody()
}

// endCall ends the call: the caller is done with the response (EOF read,
// body closed, or RoundTrip failed). An open stream is reset with CANCEL,
// buffered bytes are refunded to the connection, the request body closed.
func (s *stream) endCall() {
	cc := s.cc
	cc.mu.Lock()
	if s.callDone {
		cc.mu.Unlock()
		return
	}
	s.callDone = true
	rst := s.resetLocked()
	s.dropBufferLocked(true)
	u := cc.takeUpdatesLocked(nil)
	// A Read blocked in another goroutine waits on s.wake: without this it
	// would sleep on until the connection failed (a body closed because
	// the call's context ended, racing onCtxDone, which then finds the
	// call done and signals nothing).
	s.signal()
	cc.cond.Broadcast()
	cc.unlock()
	if s.stopCtx != nil {
		s.stopCtx()
	}
	s.cancelAndClose(rst, u)
}
