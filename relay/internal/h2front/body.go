package h2front

import (
	"io"
	"math/bits"
	"net/http"
	"sync"
)

// body is a request body: DATA the reader buffered for the handler.
// All fields are guarded by the connection's mu.
type body struct {
	st       *stream
	pb       *[]byte // pooled buffer; nil when none
	buf      []byte  // buffered bytes are buf[off:]
	off      int
	ended    bool // END_STREAM received: nothing follows buf
	refunded bool // unread bytes were already refunded to the connection
}

var _ io.ReadCloser = (*body)(nil)

// Read reads buffered request bytes, blocking until some arrive, the
// request ends (io.EOF) or the stream is reset or the connection ends (an
// error). Buffered bytes are returned first.
func (b *body) Read(p []byte) (int, error) {
	st := b.st
	c := st.c
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		if st.bodyClosed {
			return 0, http.ErrBodyReadAfterClose
		}
		if n := len(b.buf) - b.off; n > 0 {
			k := copy(p, b.buf[b.off:])
			b.off += k
			if b.off == len(b.buf) {
				// Drained: the buffer goes back to its pool rather than
				// wait with an idle stream.
				b.release()
			}
			if !b.refunded {
				c.refundConnLocked(int64(k), false)
			}
			st.refundLocked(int64(k), false)
			if c.ctrlPending {
				_ = c.flushLocked()
			}
			return k, nil
		}
		if b.ended {
			return 0, io.EOF
		}
		if st.reset {
			return 0, st.resetErr
		}
		if len(p) == 0 {
			return 0, nil
		}
		st.bodyCond.Wait()
	}
}

// Buffered reports the n bytes readable now without blocking, and whether
// the request has ended (no byte follows them). A closed body says
// neither: its reads fail, and a sender that took "nothing here, ended"
// would send the request on without its message.
func (b *body) Buffered() (n int, ended bool) {
	c := b.st.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if b.st.bodyClosed {
		return 0, false
	}
	return len(b.buf) - b.off, b.ended
}

// Notify arranges for f to run, on a goroutine of its own, at the body's
// next change (data, its end, its close, the stream's reset), unless a
// Read would not block now: then it reports false (callpark.Notifier). A
// later Notify replaces an earlier one not yet run.
func (b *body) Notify(f func()) bool {
	st := b.st
	c := st.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if st.bodyClosed || len(b.buf) > b.off || b.ended || st.reset {
		return false
	}
	st.bodyNotify = f
	return true
}

// Close discards the rest of the body, refunding the connection window
// for it; later DATA for the stream is discarded as it arrives.
func (b *body) Close() error {
	c := b.st.c
	c.mu.Lock()
	defer c.mu.Unlock()
	b.st.closeBodyLocked()
	if c.ctrlPending {
		_ = c.flushLocked()
	}
	return nil
}

// closeBodyLocked marks the body closed and discards unread bytes.
func (st *stream) closeBodyLocked() {
	if st.bodyClosed {
		return
	}
	st.bodyClosed = true
	st.discardBodyLocked()
	st.body.release()
	st.wakeBodyLocked()
}

// discardBodyLocked refunds the connection window for the unread bytes at
// once; the bytes stay readable until the body is closed.
func (st *stream) discardBodyLocked() {
	b := &st.body
	if !b.refunded {
		b.refunded = true
		st.c.refundConnLocked(int64(len(b.buf)-b.off), true)
	}
}

// appendLocked buffers p (bounded by the stream's receive window).
func (b *body) appendLocked(p []byte) {
	if len(b.buf)+len(p) > cap(b.buf) {
		if b.off > 0 {
			n := copy(b.buf, b.buf[b.off:])
			b.buf, b.off = b.buf[:n], 0
		}
		if len(b.buf)+len(p) > cap(b.buf) {
			npb := getBuf(len(b.buf) + len(p))
			nb := append((*npb)[:0], b.buf...)
			b.release()
			b.pb, b.buf = npb, nb
		}
	}
	b.buf = append(b.buf, p...)
	if b.refunded {
		// Bytes arriving after a reset are not readable; refund them.
		b.st.c.refundConnLocked(int64(len(p)), true)
	}
}

// release returns the buffer to its pool.
func (b *body) release() {
	if b.pb != nil {
		*b.pb = b.buf[:0]
		putBuf(b.pb)
	}
	b.pb, b.buf, b.off = nil, nil, 0
}

// Body buffers come from power-of-two size classes.
const minBufShift = 10 // 1 KiB

var bufPools [32]sync.Pool

func bufClass(n int) int {
	if n <= 1<<minBufShift {
		return minBufShift
	}
	return bits.Len(uint(n - 1))
}

func getBuf(n int) *[]byte {
	cl := bufClass(n)
	if cl >= len(bufPools) {
		b := make([]byte, 0, n)
		return &b
	}
	if v, ok := bufPools[cl].Get().(*[]byte); ok {
		return v
	}
	b := make([]byte, 0, 1<<cl)
	return &b
}

func putBuf(pb *[]byte) {
	c := cap(*pb)
	if c == 0 || c&(c-1) != 0 {
		return
	}
	cl := bits.Len(uint(c)) - 1
	if cl >= minBufShift && cl < len(bufPools) {
		bufPools[cl].Put(pb)
	}
}
