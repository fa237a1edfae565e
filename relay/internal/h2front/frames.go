package h2front

import (
	"golang.org/x/net/http2"

	"github.com/betcode-dev/betcode/shared/h2wire"
)

// processFrame handles one frame read by the reader goroutine. It returns
// a streamErr (RST_STREAM and go on), a connErr (GOAWAY and close) or nil.
func (c *conn) processFrame(f http2.Frame) error {
	if !c.settingsGot {
		sf, ok := f.(*http2.SettingsFrame)
		if !ok || sf.IsAck() {
			return connErr{http2.ErrCodeProtocol, "first frame is not SETTINGS"}
		}
		c.settingsGot = true
	}
	switch f := f.(type) {
	case *http2.MetaHeadersFrame:
		return c.processHeaders(f)
	case *http2.DataFrame:
		return c.processData(f)
	case *http2.SettingsFrame:
		return c.processSettings(f)
	case *http2.PingFrame:
		return c.processPing(f)
	case *http2.WindowUpdateFrame:
		return c.processWindowUpdate(f)
	case *http2.RSTStreamFrame:
		return c.processRSTStream(f)
	case *http2.GoAwayFrame:
		c.mu.Lock()
		c.goingAway = true
		c.mu.Unlock()
		return nil
	case *http2.PushPromiseFrame:
		return connErr{http2.ErrCodeProtocol, "PUSH_PROMISE from client"}
	case *http2.ContinuationFrame:
		// The framer merges CONTINUATION into MetaHeadersFrame and rejects
		// those out of place; one reaching here is out of place.
		return connErr{http2.ErrCodeProtocol, "unexpected CONTINUATION"}
	default:
		// PRIORITY, PRIORITY_UPDATE and unknown types are ignored.
		return nil
	}
}

func (c *conn) processSettings(f *http2.SettingsFrame) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.floodLocked() {
		return connErr{http2.ErrCodeEnhanceYourCalm, "too many SETTINGS/PING frames"}
	}
	if f.IsAck() {
		c.settingsAck = true
		c.streamRecvWin = int32(c.lim.streamWindow)
		if c.srv.NoDynamicTables {
			// The peer has our HEADER_TABLE_SIZE 0: its next header
			// block must shrink the table to 0, emptying it.
			c.rfr.ReadMetaHeaders.SetAllowedMaxDynamicTableSize(0)
		}
		return nil
	}
	if err := h2wire.CheckSettings(f); err != nil {
		return connErr{http2.ErrCodeProtocol, err.Error()}
	}
	var initWin uint32
	haveInitWin := false
	err := f.ForeachSetting(func(s http2.Setting) error {
		if err := s.Valid(); err != nil {
			return connErr{http2.ErrCode(err.(http2.ConnectionError)), "invalid setting " + s.ID.String()}
		}
		switch s.ID {
		case http2.SettingHeaderTableSize:
			c.henc.SetMaxDynamicTableSizeLimit(s.Val)
			if c.srv.NoDynamicTables {
				c.henc.SetMaxDynamicTableSize(0)
			}
		case http2.SettingInitialWindowSize:
			initWin, haveInitWin = s.Val, true
		case http2.SettingMaxFrameSize:
			c.peerMaxFrame = s.Val
		}
		return nil
	})
	if err != nil {
		return err
	}
	if haveInitWin {
		// Once per frame, not per entry: it is a pass over every stream.
		if err := c.setPeerInitWinLocked(initWin); err != nil {
			return err
		}
	}
	c.writeCtrlLocked(func() error { return c.wfr.WriteSettingsAck() })
	return nil
}

// setPeerInitWinLocked applies a new SETTINGS_INITIAL_WINDOW_SIZE to the
// send window of every open stream.
func (c *conn) setPeerInitWinLocked(v uint32) error {
	delta := int64(v) - int64(c.peerInitWin)
	c.peerInitWin = int32(v)
	for _, st := range c.streams {
		st.sendWin += delta
		if st.sendWin > maxWindow {
			return connErr{http2.ErrCodeFlowControl, "stream window overflow"}
		}
	}
	c.sendCond.Broadcast()
	return nil
}

func (c *conn) processPing(f *http2.PingFrame) error {
	if f.IsAck() {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.floodLocked() {
		return connErr{http2.ErrCodeEnhanceYourCalm, "too many SETTINGS/PING frames"}
	}
	c.writeCtrlLocked(func() error { return c.wfr.WritePing(true, f.Data) })
	return nil
}

// floodLocked counts a PING or SETTINGS frame and reports a flood: more
// than maxControlPerSecond in one second without response HEADERS or DATA
// written in between. (A grpc-go client's BDP estimator legitimately sends
// a PING per round trip that carried data, far above the bound on a fast
// link, so control frames answered by traffic are not counted.)
func (c *conn) floodLocked() bool {
	if c.sentData {
		c.sentData = false
		c.flood.n = 0
	}
	return c.flood.tick()
}

func (c *conn) processWindowUpdate(f *http2.WindowUpdateFrame) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	inc := int64(f.Increment)
	if f.StreamID == 0 {
		c.sendWin += inc
		if c.sendWin > maxWindow {
			return connErr{http2.ErrCodeFlowControl, "connection window overflow"}
		}
		c.sendCond.Broadcast()
		return nil
	}
	st := c.streams[f.StreamID]
	if st == nil {
		if f.StreamID > c.maxID {
			return connErr{http2.ErrCodeProtocol, "WINDOW_UPDATE on idle stream"}
		}
		return nil
	}
	st.sendWin += inc
	if st.sendWin > maxWindow {
		return streamErr{f.StreamID, http2.ErrCodeFlowControl}
	}
	c.sendCond.Broadcast()
	return nil
}

func (c *conn) processRSTStream(f *http2.RSTStreamFrame) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.streams[f.StreamID]
	if st == nil {
		if f.StreamID > c.maxID {
			return connErr{http2.ErrCodeProtocol, "RST_STREAM on idle stream"}
		}
		return nil
	}
	c.removeStreamLocked(st, errStreamReset)
	c.dropPending(st)
	return nil
}

// resetStream sends RST_STREAM(code) for id and closes the stream.
// Reader goroutine only.
func (c *conn) resetStream(id uint32, code http2.ErrCode) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.resetStreamLocked(id, code)
}

// resetStreamLocked closes stream id, if open, and buffers RST_STREAM(code)
// for it. c.mu is held.
func (c *conn) resetStreamLocked(id uint32, code http2.ErrCode) {
	if st := c.streams[id]; st != nil {
		c.removeStreamLocked(st, errStreamReset)
		c.dropPending(st)
	}
	c.writeCtrlLocked(func() error { return c.wfr.WriteRSTStream(id, code) })
}

// processData buffers a DATA frame into its stream's request body,
// enforcing the receive windows.
func (c *conn) processData(f *http2.DataFrame) error {
	data := f.Data()
	size := int64(f.Length)
	id := f.StreamID
	c.mu.Lock()
	defer c.mu.Unlock()
	if size > c.recvAvail {
		return connErr{http2.ErrCodeFlowControl, "connection receive window exceeded"}
	}
	c.recvAvail -= size
	st := c.streams[id]
	if st == nil || st.remoteDone || st.bodyClosed {
		// Closed, half-closed(remote) or a body the handler closed: the
		// bytes are discarded and refunded to the connection at once.
		c.refundConnLocked(size, true)
		if st == nil {
			if id > c.maxID {
				return connErr{http2.ErrCodeProtocol, "DATA on idle stream"}
			}
			return nil
		}
		if st.remoteDone {
			return streamErr{id, http2.ErrCodeStreamClosed}
		}
		if st.badLengthLocked(len(data), f.StreamEnded()) {
			return streamErr{id, http2.ErrCodeProtocol}
		}
		if f.StreamEnded() {
			st.endRemoteLocked()
		}
		return nil
	}
	if size > int64(st.recvAvail) {
		c.refundConnLocked(size, true)
		return streamErr{id, http2.ErrCodeFlowControl}
	}
	st.recvAvail -= int32(size)
	if st.badLengthLocked(len(data), f.StreamEnded()) {
		// The frame is refunded to the connection here; the reset
		// refunds what is buffered.
		c.refundConnLocked(size, true)
		return streamErr{id, http2.ErrCodeProtocol}
	}
	if len(data) > 0 {
		st.body.appendLocked(data)
	}
	if f.StreamEnded() {
		st.endRemoteLocked()
	}
	if pad := size - int64(len(data)); pad > 0 {
		c.refundConnLocked(pad, true)
		st.refundLocked(pad, true)
	}
	st.wakeBodyLocked()
	return nil
}

// badLengthLocked counts n more request body bytes and reports whether the
// body no longer matches its declared content-length: more bytes than
// declared, or fewer when ended. Such a request is malformed (RFC 9113
// §8.1.1) and, as in x/net's server, its stream is reset PROTOCOL_ERROR.
func (st *stream) badLengthLocked(n int, ended bool) bool {
	st.recvLen += int64(n)
	if st.declLen < 0 {
		return false
	}
	return st.recvLen > st.declLen || (ended && st.recvLen != st.declLen)
}
