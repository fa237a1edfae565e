package h2client

import (
	"io"
	"sync"

	"github.com/betcode-dev/betcode/shared/callpark"
)

// Buffered is what request and response bodies can say without blocking.
type Buffered interface {
	// Buffered returns n, the number of bytes readable now, and ended:
	// nothing will follow them (END_STREAM received / body at EOF).
	Buffered() (n int, ended bool)
}

// respBody is a response body: the DATA the reader goroutine buffered for
// one stream. Reading it refunds flow-control window to the peer.
type respBody struct {
	s *stream
}

var (
	_ io.ReadCloser     = (*respBody)(nil)
	_ Buffered          = (*respBody)(nil)
	_ callpark.Notifier = (*respBody)(nil)
)

// Read reads response DATA. It blocks until data, END_STREAM (io.EOF), a
// reset (*StreamError), the end of the request's context (its error) or the
// failure of the connection.
func (b *respBody) Read(p []byte) (int, error) {
	s := b.s
	cc := s.cc
	cc.mu.Lock()
	for {
		switch {
		case s.eof:
			cc.mu.Unlock()
			return 0, io.EOF
		case s.callDone:
			cc.mu.Unlock()
			return 0, errBodyClosed
		case s.err != nil:
			err := s.err
			cc.mu.Unlock()
			return 0, err
		case s.unreadLocked() > 0:
			buf := *s.bufp
			n := copy(p, buf[s.off:])
			s.off += n
			if s.off == len(buf) {
				// Drained: the buffer goes back to the pool rather than
				// wait with the stream (an idle stream held 16 KiB).
				s.dropBufferLocked(true)
			}
			cc.refund += int64(n)
			if s.inMap && !s.recvEnd {
				s.refund += int64(n)
			}
			u := cc.takeUpdatesLocked(s)
			cc.mu.Unlock()
			if u.any() {
				cc.writeControl(nil, 0, u, true)
			}
			return n, nil
		case s.recvEnd:
			s.eof = true
			cc.mu.Unlock()
			s.endCall()
			return 0, io.EOF
		case len(p) == 0:
			cc.mu.Unlock()
			return 0, nil
		}
		cc.mu.Unlock()
		<-s.wake
		cc.mu.Lock()
	}
}

// Notify arranges for f to run, on a goroutine of its own, at the
// stream's next change (data, trailers, a reset, the call's end, the
// connection's failure), unless a Read would not block now: then it
// reports false (callpark.Notifier).
func (b *respBody) Notify(f func()) bool {
	s := b.s
	s.cc.mu.Lock()
	defer s.cc.mu.Unlock()
	if s.eof || s.callDone || s.err != nil || s.unreadLocked() > 0 || s.recvEnd {
		return false
	}
	s.notify = f
	return true
}

// Close ends the call. Before EOF it resets the stream (RST_STREAM CANCEL).
func (b *respBody) Close() error {
	b.s.endCall()
	return nil
}

// Buffered returns the number of bytes Read can return without blocking and
// whether END_STREAM was received after them.
func (b *respBody) Buffered() (n int, ended bool) {
	s := b.s
	s.cc.mu.Lock()
	defer s.cc.mu.Unlock()
	if s.callDone || s.err != nil {
		return 0, s.eof
	}
	return s.unreadLocked(), s.recvEnd
}

// bufPool recycles byte buffers for request reads and response data.
var bufPool sync.Pool // of *[]byte

const (
	minPoolBuf = 16 << 10
	maxPoolBuf = 256 << 10
)

// getBuf returns an empty buffer with capacity at least n.
func getBuf(n int) *[]byte {
	if p, _ := bufPool.Get().(*[]byte); p != nil {
		if cap(*p) >= n {
			*p = (*p)[:0]
			return p
		}
		bufPool.Put(p)
	}
	b := make([]byte, 0, max(n, minPoolBuf))
	return &b
}

// putBuf recycles a buffer from getBuf; nil is no buffer.
func putBuf(p *[]byte) {
	if p == nil || cap(*p) > maxPoolBuf {
		return
	}
	*p = (*p)[:0]
	bufPool.Put(p)
}
