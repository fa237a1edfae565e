package h2client

import (
	"fmt"
	"io"

	"github.com/betcode-dev/betcode/shared/callpark"

	"golang.org/x/net/http2"
)

const (
	// reqReadSize is the read size while request bytes are arriving.
	reqReadSize = 32 << 10
	// idleReadSize is the read size of a body that says nothing is here:
	// the read may wait for hours (an idle bidi stream, an end-to-end
	// channel), and what it waits in is held all that time.
	idleReadSize = 512
)

// writeBody is the stream's body writer goroutine: it sends pending (bytes
// RoundTrip already read but had no window for), then reads the request
// body and sends it, until EOF or until the call ends. pbuf, if non-nil,
// holds pending and is recycled once pending is sent.
//
// A read that would wait holds no large buffer: when the body says nothing
// is readable now (Buffered), it reads into a small one, and takes a
// pooled 32 KiB buffer only while bytes are there, giving it back after
// each send. A body that can call back (callpark.Notifier: the relay's
// front, through its wrappers) is not waited on at all: the writer asks it
// to call back and ends, and its callback starts the writer again, so an
// idle stream costs no goroutine (BenchmarkIdleChannels).
func (s *stream) writeBody(pending []byte, pbuf *[]byte, bb Buffered) {
	ok := len(pending) == 0 || s.send(pending, false, bb)
	putBuf(pbuf)
	if !ok {
		s.closeReqBody()
		return
	}
	s.copyBody(bb)
}

// copyBody is writeBody's loop, also run by the body's callback after it
// parked.
func (s *stream) copyBody(bb Buffered) {
	parked := false
	defer func() {
		if !parked {
			s.closeReqBody()
		}
	}()
	body := s.req.Body
	var small []byte
	for {
		var rbuf *[]byte
		var buf []byte
		if n, ended := bufferedOrMore(bb); n == 0 {
			if !ended && !s.reqClosed.Load() && callpark.NotifyVia(body, func() { s.copyBody(bb) }) {
				parked = true
				return
			}
			if small == nil {
				small = make([]byte, idleReadSize)
			}
			buf = small
		} else {
			rbuf = getBuf(reqReadSize)
			buf = (*rbuf)[:cap(*rbuf)]
		}
		n, err := body.Read(buf)
		data := buf[:n]
		eof := false
		if err == io.EOF {
			eof = true
		} else if err != nil {
			putBuf(rbuf)
			s.bodyFailed(fmt.Errorf("h2client: reading request body: %w", err))
			return
		}
		if !eof && bb != nil {
			if k, ended := bb.Buffered(); k == 0 && ended {
				eof = true
			}
		}
		if err := s.countReqBody(n, eof); err != nil {
			putBuf(rbuf)
			s.bodyFailed(err) // before sending bytes beyond the length
			return
		}
		if len(data) == 0 && !eof {
			putBuf(rbuf)
			continue
		}
		ok := s.send(data, eof, bb) // copies data out: buf is free again
		putBuf(rbuf)
		if !ok || eof {
			return
		}
	}
}

// bufferedOrMore is what bb holds now; a body that cannot say (nil bb)
// counts as holding more, so it is read with the large buffer.
func bufferedOrMore(bb Buffered) (int, bool) {
	if bb == nil {
		return reqReadSize, false
	}
	return bb.Buffered()
}

// countReqBody holds the request body to its declared length (see
// declaredLength), as x/net does: n more bytes were read from it, and eof
// says it ended after them. The error says how the body broke the length;
// the call must then fail rather than send a body the server would take
// for a different one.
func (s *stream) countReqBody(n int, eof bool) error {
	if s.reqLen < 0 {
		return nil
	}
	s.reqRead += int64(n)
	switch {
	case s.reqRead > s.reqLen:
		return fmt.Errorf("h2client: request body larger than its ContentLength of %d", s.reqLen)
	case eof && s.reqRead < s.reqLen:
		return fmt.Errorf("h2client: request body ended after %d bytes, before its ContentLength of %d",
			s.reqRead, s.reqLen)
	}
	return nil
}

// bodyFailed fails the call with err after a request body read error or a
// body that broke its length, and resets the stream with CANCEL.
func (s *stream) bodyFailed(err error) {
	cc := s.cc
	cc.mu.Lock()
	rst := s.resetLocked()
	if !s.recvEnd {
		s.abortLocked(err)
	}
	cc.unlock()
	if rst {
		cc.writeControl(s, http2.ErrCodeCancel, windowUpdates{}, true)
	}
}

// send writes data as DATA frames as flow control allows, waiting for window
// outside the write lock; end sets END_STREAM on the last frame. It flushes
// unless bb says more body is readable right now. It reports false if the
// call ended or the connection failed.
func (s *stream) send(data []byte, end bool, bb Buffered) bool {
	cc := s.cc
	for {
		cc.mu.Lock()
		n := 0
		for {
			if s.stoppedLocked() {
				cc.mu.Unlock()
				return false
			}
			if len(data) == 0 {
				break
			}
			if s.sendWindow > 0 && cc.sendWindow > 0 {
				n = int(min(int64(len(data)), s.sendWindow, cc.sendWindow))
				s.sendWindow -= int64(n)
				cc.sendWindow -= int64(n)
				break
			}
			if s.wDirty {
				// Our earlier frames must reach the peer before it can
				// grant more window.
				cc.mu.Unlock()
				if !cc.flush() {
					return false
				}
				s.wDirty = false
				cc.mu.Lock()
				continue
			}
			cc.cond.Wait()
		}
		cc.mu.Unlock()

		last := end && n == len(data)
		flush := true
		if !last && n == len(data) && bb != nil {
			if more, _ := bb.Buffered(); more > 0 {
				flush = false
			}
		}
		cc.wmu.Lock()
		if s.wRST {
			cc.wmu.Unlock()
			return false
		}
		if last && !s.markEndLocked() {
			cc.wmu.Unlock()
			return false
		}
		cc.writeDataLocked(s.id, data[:n], last)
		if last {
			s.wEnd = true
		}
		var err error
		if flush {
			err = cc.bw.Flush()
		}
		cc.wmu.Unlock()
		if err != nil {
			cc.failWrite(err)
			return false
		}
		s.wDirty = !flush
		data = data[n:]
		if last {
			// Closing s may have left the connection idle after a GOAWAY:
			// close it now that END_STREAM is out.
			cc.mu.Lock()
			cc.unlock()
			return true
		}
		if len(data) == 0 {
			return true
		}
	}
}

// markEndLocked records, with wmu held and before END_STREAM is buffered,
// that s sent END_STREAM, and closes s if the response has ended too. It
// reports false if s was reset meanwhile (nothing more may be sent).
//
// Doing this only after the write, with wmu released, left a window in
// which the response's END_STREAM could arrive and its reader reach EOF:
// endCall then found s open and sent a spurious RST_STREAM(CANCEL) on a
// stream that both sides had ended. Under wmu, nothing can be written
// between here and our END_STREAM: a stream that takes the slot freed here
// has its HEADERS buffered after it, as writeControl does for RST_STREAM.
func (s *stream) markEndLocked() bool {
	cc := s.cc
	cc.mu.Lock()
	defer cc.mu.Unlock() // not unlock: the idle close waits for the write
	if s.rst {
		return false
	}
	s.sentEnd = true
	s.maybeCloseLocked()
	return true
}

// flush flushes the write buffer; false if that failed the connection.
func (cc *Conn) flush() bool {
	cc.wmu.Lock()
	err := cc.bw.Flush()
	cc.wmu.Unlock()
	if err != nil {
		cc.failWrite(err)
		return false
	}
	return true
}

// writeDataLocked writes data as DATA frames no larger than the peer's
// SETTINGS_MAX_FRAME_SIZE, END_STREAM on the last if end; wmu held.
func (cc *Conn) writeDataLocked(id uint32, data []byte, end bool) {
	for len(data) > cc.peerMaxFrame {
		cc.wfr.WriteData(id, false, data[:cc.peerMaxFrame])
		data = data[cc.peerMaxFrame:]
	}
	cc.wfr.WriteData(id, end, data)
}
