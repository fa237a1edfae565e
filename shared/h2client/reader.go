package h2client

import (
	"errors"
	"fmt"
	"io"
	"time"

	"golang.org/x/net/http2"

	"github.com/betcode-dev/betcode/shared/h2wire"
)

// readLoop is the connection's reader goroutine: it reads frames and hands
// them out until the connection fails. Frames it owes the peer are
// written without flushing and flushed just before a read would block.
func (cc *Conn) readLoop() {
	defer close(cc.readerDone)
	defer cc.br.Release()
	for {
		if cc.rpending && !cc.frameBuffered() {
			cc.rpending = false
			if !cc.flush() {
				return
			}
		}
		cc.rlim.Reset()
		f, err := cc.rfr.ReadFrame()
		if cc.opts.PingEvery > 0 && (err == nil || isStreamError(err)) {
			cc.lastRead.Store(int64(time.Since(cc.start)))
		}
		if err == nil {
			err = cc.handleFrame(f)
		}
		if err != nil && !cc.readFailed(f, err) {
			return
		}
	}
}

// frameBuffered reports whether a whole frame is buffered, so that reading
// it will not block.
func (cc *Conn) frameBuffered() bool {
	n := cc.br.Buffered()
	if n < 9 {
		return false
	}
	h := cc.br.Peek(9)
	return n >= 9+(int(h[0])<<16|int(h[1])<<8|int(h[2]))
}

func isStreamError(err error) bool {
	_, ok := err.(http2.StreamError)
	return ok
}

// readFailed handles an error from reading or handling a frame. It reports
// whether the reader may go on (a stream error).
func (cc *Conn) readFailed(f http2.Frame, err error) bool {
	if se, ok := err.(http2.StreamError); ok {
		cause := error(se)
		if d := cc.rfr.ErrorDetail(); d != nil {
			cause = d
		}
		cc.mu.Lock()
		s := cc.streams[se.StreamID]
		cc.mu.Unlock()
		if s != nil {
			cc.resetStream(s, se.Code, fmt.Errorf("h2client: stream %d: %v: %w", se.StreamID, cause,
				&StreamError{StreamID: se.StreamID, Code: se.Code}))
		}
		return true
	}
	code, goAway := http2.ErrCode(0), false
	var ce http2.ConnectionError
	var hce *connError
	switch {
	case errors.Is(err, h2wire.ErrFrameBytes):
		code, goAway = http2.ErrCodeEnhanceYourCalm, true
	case errors.As(err, &hce):
		code, goAway = hce.code, true
	case errors.As(err, &ce):
		code, goAway = http2.ErrCode(ce), true
		mh, _ := f.(*http2.MetaHeadersFrame)
		switch {
		case mh != nil && mh.Truncated:
			err = cc.headerLimitErr()
		case mh != nil && code == http2.ErrCodeCompression:
			// hpack refuses a string longer than the limit this way.
			err = fmt.Errorf("undecodable response header block (%v): malformed, or a field over the limit of %d bytes (MaxHeaderListSize)",
				code, cc.opts.MaxHeaderListSize)
		case cc.rfr.ErrorDetail() != nil:
			err = fmt.Errorf("%v: %w", cc.rfr.ErrorDetail(), err)
		}
	case errors.Is(err, http2.ErrFrameTooLarge):
		code, goAway = http2.ErrCodeFrameSize, true
	}
	if errors.Is(err, io.EOF) {
		// The peer closed the connection: for a call still open that is
		// a failure, never the end of its answer (a caller that tests
		// errors.Is(err, io.EOF) would take it for one).
		err = fmt.Errorf("closed by the peer: %w", io.ErrUnexpectedEOF)
	}
	cc.fail(fmt.Errorf("h2client: connection failed: %w", err), code, goAway)
	return false
}

func (cc *Conn) headerLimitErr() error {
	return fmt.Errorf("response header list exceeds the limit of %d bytes (MaxHeaderListSize)", cc.opts.MaxHeaderListSize)
}

// resetStream resets s from the reader: the call fails with err and a
// RST_STREAM with code is written (flushed at the reader's next flush point).
func (cc *Conn) resetStream(s *stream, code http2.ErrCode, err error) {
	cc.mu.Lock()
	rst := s.resetLocked()
	s.abortLocked(err)
	u := cc.takeUpdatesLocked(nil)
	cc.unlock()
	s.stopReqBody()
	if rst || u.any() {
		var r *stream
		if rst {
			r = s
		}
		cc.writeControl(r, code, u, false)
		cc.rpending = true
	}
}

// handleFrame acts on one frame read from the peer.
func (cc *Conn) handleFrame(f http2.Frame) error {
	switch f := f.(type) {
	case *http2.MetaHeadersFrame:
		return cc.onHeaders(f)
	case *http2.DataFrame:
		return cc.onData(f)
	case *http2.SettingsFrame:
		return cc.onSettings(f)
	case *http2.WindowUpdateFrame:
		return cc.onWindowUpdate(f)
	case *http2.RSTStreamFrame:
		cc.onRSTStream(f)
	case *http2.PingFrame:
		if !f.IsAck() {
			cc.wmu.Lock()
			cc.wfr.WritePing(true, f.Data)
			cc.wmu.Unlock()
			cc.rpending = true
		}
	case *http2.GoAwayFrame:
		cc.onGoAway(f)
	case *http2.PushPromiseFrame:
		return &connError{http2.ErrCodeProtocol, errors.New("PUSH_PROMISE received with push disabled")}
	}
	return nil
}

// onData buffers DATA for its stream, enforcing our receive windows.
func (cc *Conn) onData(f *http2.DataFrame) error {
	n := int64(f.Length)
	data := f.Data()
	cc.mu.Lock()
	if n > cc.recvWindow {
		cc.mu.Unlock()
		return &connError{http2.ErrCodeFlowControl, errors.New("peer exceeded the connection receive window")}
	}
	cc.recvWindow -= n
	s := cc.streams[f.StreamID]
	var resetCode http2.ErrCode
	var resetErr error
	switch {
	case s == nil || s.recvEnd:
		// Unknown, closed or half-closed stream: only refund the connection.
		cc.refund += n
	case !s.gotHeaders:
		cc.refund += n
		resetCode = http2.ErrCodeProtocol
		resetErr = fmt.Errorf("h2client: stream %d: DATA before response HEADERS: %w", s.id,
			&StreamError{StreamID: s.id, Code: resetCode})
	case n > s.recvWindow:
		cc.refund += n
		resetCode = http2.ErrCodeFlowControl
		resetErr = &StreamError{StreamID: s.id, Code: resetCode}
	default:
		s.recvWindow -= n
		if len(data) > 0 {
			s.appendLocked(data)
		}
		if pad := n - int64(len(data)); pad > 0 {
			cc.refund += pad
			s.refund += pad
		}
		if f.StreamEnded() {
			s.recvEnd = true
			s.maybeCloseLocked()
		}
		s.signal()
	}
	u := cc.takeUpdatesLocked(s)
	cc.unlock()
	if resetErr != nil {
		cc.resetStream(s, resetCode, resetErr)
	}
	if u.any() {
		cc.wmu.Lock()
		cc.writeUpdatesLocked(u)
		cc.wmu.Unlock()
		cc.rpending = true
	}
	return nil
}

// onSettings applies the peer's SETTINGS and acknowledges them. A frame
// refused by h2wire.CheckSettings is a connection error.
func (cc *Conn) onSettings(f *http2.SettingsFrame) error {
	if f.IsAck() {
		return nil
	}
	if err := h2wire.CheckSettings(f); err != nil {
		return &connError{http2.ErrCodeProtocol, err}
	}
	cc.wmu.Lock()
	defer cc.wmu.Unlock()
	cc.mu.Lock()
	sawMax := false
	initWindow := int64(-1) // SETTINGS_INITIAL_WINDOW_SIZE, if present
	err := f.ForeachSetting(func(st http2.Setting) error {
		if err := st.Valid(); err != nil {
			return err
		}
		switch st.ID {
		case http2.SettingMaxFrameSize:
			cc.peerMaxFrame = int(st.Val)
		case http2.SettingHeaderTableSize:
			cc.henc.SetMaxDynamicTableSize(st.Val)
		case http2.SettingMaxConcurrentStreams:
			cc.peerMaxStreams = st.Val
			sawMax = true
		case http2.SettingInitialWindowSize:
			initWindow = int64(st.Val)
		}
		return nil
	})
	if err == nil && initWindow >= 0 {
		// Once per frame: each stream's window moves by the difference.
		delta := initWindow - cc.peerInitWindow
		cc.peerInitWindow = initWindow
		for _, s := range cc.streams {
			s.sendWindow += delta
			if s.sendWindow > maxWindow {
				err = http2.ConnectionError(http2.ErrCodeFlowControl)
				break
			}
		}
	}
	if !cc.gotSettings {
		cc.gotSettings = true
		if !sawMax {
			cc.peerMaxStreams = ^uint32(0)
		}
	}
	cc.cond.Broadcast()
	cc.mu.Unlock()
	if err != nil {
		return err
	}
	cc.wfr.WriteSettingsAck()
	cc.rpending = true
	return nil
}

// onWindowUpdate grows a send window.
func (cc *Conn) onWindowUpdate(f *http2.WindowUpdateFrame) error {
	inc := int64(f.Increment)
	cc.mu.Lock()
	if f.StreamID == 0 {
		cc.sendWindow += inc
		over := cc.sendWindow > maxWindow
		cc.cond.Broadcast()
		cc.mu.Unlock()
		if over {
			return &connError{http2.ErrCodeFlowControl, errors.New("connection send window overflow")}
		}
		return nil
	}
	s := cc.streams[f.StreamID]
	over := false
	if s != nil {
		s.sendWindow += inc
		over = s.sendWindow > maxWindow
		cc.cond.Broadcast()
	}
	cc.mu.Unlock()
	if over {
		cc.resetStream(s, http2.ErrCodeFlowControl, &StreamError{StreamID: s.id, Code: http2.ErrCodeFlowControl})
	}
	return nil
}

// onRSTStream ends a stream the peer reset. After END_STREAM was received
// the response is complete and the call does not fail.
func (cc *Conn) onRSTStream(f *http2.RSTStreamFrame) {
	cc.mu.Lock()
	s := cc.streams[f.StreamID]
	if s == nil {
		cc.mu.Unlock()
		return
	}
	s.rst = true
	cc.removeLocked(s)
	if !s.recvEnd {
		s.abortLocked(&StreamError{StreamID: s.id, Code: f.ErrCode, Remote: true})
	}
	cc.cond.Broadcast()
	cc.unlock()
	s.stopReqBody() // stops its body writer
}

// onGoAway stops new streams and fails those the server did not process.
func (cc *Conn) onGoAway(f *http2.GoAwayFrame) {
	cc.mu.Lock()
	last := f.LastStreamID
	if cc.goAwayErr == nil || last < cc.goAwayLast {
		debug := ""
		if d := f.DebugData(); len(d) > 0 {
			debug = fmt.Sprintf(", debug %q", d)
		}
		cc.goAwayErr = fmt.Errorf("h2client: server sent GOAWAY (%v, last stream %d%s)", f.ErrCode, last, debug)
		cc.goAwayLast = last
	}
	var refused []*stream
	for id, s := range cc.streams {
		if id > last {
			s.rst = true
			cc.removeLocked(s)
			s.abortLocked(&goAwayRefusedError{id: id, last: last})
			refused = append(refused, s)
		}
	}
	if cc.active == 0 {
		cc.idleClose = true
	}
	cc.cond.Broadcast()
	cc.unlock()
	for _, s := range refused {
		s.stopReqBody()
	}
}
