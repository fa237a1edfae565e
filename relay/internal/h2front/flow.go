package h2front

import (
	"golang.org/x/net/http2"

	"github.com/betcode-dev/betcode/shared/h2wire"
)

// Receive side: bytes the handler consumes (or that are discarded) are
// refunded to the client with WINDOW_UPDATE once h2wire.RefundDue; where
// now is set (padding, discarded bytes) at once.

// refundConnLocked refunds n bytes of the connection receive window.
func (c *conn) refundConnLocked(n int64, now bool) {
	if n <= 0 {
		return
	}
	c.recvUnsent += n
	if !now && !h2wire.RefundDue(c.recvUnsent, c.recvAvail, 0) {
		return
	}
	inc := c.recvUnsent
	c.recvUnsent = 0
	c.recvAvail += inc
	c.writeCtrlLocked(func() error { return c.wfr.WriteWindowUpdate(0, uint32(inc)) })
}

// refundLocked refunds n bytes of st's receive window; nothing is refunded
// once the request has ended or the stream was reset.
func (st *stream) refundLocked(n int64, now bool) {
	if n <= 0 || st.remoteDone || st.reset {
		return
	}
	c := st.c
	st.recvUnsent += int32(n)
	if !now && !h2wire.RefundDue(int64(st.recvUnsent), int64(st.recvAvail), 0) {
		return
	}
	inc := st.recvUnsent
	st.recvUnsent = 0
	st.recvAvail += inc
	c.writeCtrlLocked(func() error { return c.wfr.WriteWindowUpdate(st.id, uint32(inc)) })
}

// Send side.

// awaitSendLocked waits (releasing mu) until st may send at least one byte
// of DATA and returns how many of want it may send in one frame. Before
// waiting it flushes what is buffered, since the peer cannot grant window
// for bytes it has not received.
func (st *stream) awaitSendLocked(want int) (int, error) {
	c := st.c
	for {
		if err := st.writeErrLocked(); err != nil {
			return 0, err
		}
		n := min(int64(want), int64(c.peerMaxFrame), st.sendWin, c.sendWin)
		if n > 0 {
			return int(n), nil
		}
		if c.bw.Buffered() > 0 {
			if err := c.flushLocked(); err != nil {
				return 0, err
			}
			continue
		}
		c.sendCond.Wait()
	}
}

// writeDataLocked writes p as DATA frames within the flow-control windows,
// without flushing. It returns the bytes written.
func (st *stream) writeDataLocked(p []byte) (int, error) {
	c := st.c
	written := 0
	for len(p) > 0 {
		n, err := st.awaitSendLocked(len(p))
		if err != nil {
			return written, err
		}
		if err := c.writeDataFrameLocked(st.id, p[:n], false); err != nil {
			return written, err
		}
		st.sendWin -= int64(n)
		c.sendWin -= int64(n)
		c.sentData = true
		written += n
		p = p[n:]
	}
	return written, nil
}

// writeDataFrameLocked writes one DATA frame straight into the buffered
// writer (avoiding the framer's intermediate copy).
func (c *conn) writeDataFrameLocked(id uint32, p []byte, endStream bool) error {
	if c.werr != nil {
		return c.werr
	}
	var flags http2.Flags
	if endStream {
		flags = http2.FlagDataEndStream
	}
	n := len(p)
	hdr := [9]byte{byte(n >> 16), byte(n >> 8), byte(n), byte(http2.FrameData), byte(flags),
		byte(id >> 24), byte(id >> 16), byte(id >> 8), byte(id)}
	if _, err := c.bw.Write(hdr[:]); err != nil {
		c.failWriteLocked(err)
		return err
	}
	if _, err := c.bw.Write(p); err != nil {
		c.failWriteLocked(err)
		return err
	}
	return nil
}
