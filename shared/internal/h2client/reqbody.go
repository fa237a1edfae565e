package h2client

import (
	"fmt"
	"io"

	"golang.org/x/net/http2"
)

const reqReadSize = 32 << 10

// writeBody is the stream's body writer goroutine: it sends pending (bytes
// RoundTrip already read but had no window for), then reads the request
// body and sends it, until EOF or until the call ends. pbuf, if non-nil,
// holds pending and is recycled at the end.
func (s *stream) writeBody(pending []byte, pbuf *[]byte, bb Buffered) {
	defer s.closeReqBody()
	if pbuf != nil {
		defer putBuf(pbuf)
	}
	body := s.req.Body
	var rbuf *[]byte
	defer func() {
		if rbuf != nil {
			putBuf(rbuf)
		}
	}()
	for {
		var data []byte
		eof := false
		if len(pending) > 0 {
			data, pending = pending, nil
		} else {
			if rbuf == nil {
				rbuf = getBuf(reqReadSize)
			}
			n, err := body.Read((*rbuf)[:cap(*rbuf)])
			data = (*rbuf)[:n]
			if err == io.EOF {
				eof = true
			} else if err != nil {
				s.bodyFailed(err)
				return
			}
		}
		if !eof && bb != nil {
			if n, ended := bb.Buffered(); n == 0 && ended {
				eof = true
			}
		}
		if len(data) == 0 && !eof {
			continue
		}
		if !s.send(data, eof, bb) || eof {
			return
		}
	}
}

// bodyFailed fails the call after a request body read error and resets the
// stream with CANCEL.
func (s *stream) bodyFailed(err error) {
	cc := s.cc
	cc.mu.Lock()
	rst := s.resetLocked()
	if !s.recvEnd {
		s.abortLocked(fmt.Errorf("h2client: reading request body: %w", err))
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
			cc.mu.Lock()
			s.sentEnd = true
			s.maybeCloseLocked()
			cc.unlock()
			return true
		}
		if len(data) == 0 {
			return true
		}
	}
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
