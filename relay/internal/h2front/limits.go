package h2front

import (
	"time"

	"golang.org/x/net/http2"
)

// Defaults applied when the corresponding Server field is zero.
const (
	defaultMaxConcurrentStreams = 1000
	defaultMaxHeaderListSize    = 1 << 20
	defaultMaxReadFrameSize     = 1 << 20
	defaultStreamWindow         = 1 << 20
	defaultConnWindow           = 1 << 20
	defaultWriteTimeout         = 10 * time.Second
	defaultSettingsTimeout      = 10 * time.Second
	defaultKeepaliveTimeout     = 20 * time.Second
)

const (
	// initialWindow is the RFC 9113 initial flow-control window.
	initialWindow = 65535
	// maxWindow is the largest legal flow-control window.
	maxWindow = 1<<31 - 1
	// handlerFactor bounds the running handler goroutines (including
	// those of reset streams) to handlerFactor×MaxConcurrentStreams.
	handlerFactor = 4
	// idleEvery is the most frames the reader processes between two runs
	// of its idle work (flushing control answers, starting handlers), so
	// that the streams awaiting a handler stay few.
	idleEvery = 32
	// maxControlPerSecond bounds PING and SETTINGS frames per second.
	maxControlPerSecond = 10000
	// goAwayLinger is how long a connection ended by a protocol error
	// keeps reading (and discarding) so that the peer receives the GOAWAY
	// before the socket is closed.
	goAwayLinger = time.Second
	// readBufSize and writeBufSize size the per-connection buffers. A TLS
	// connection's Read returns at most one record (16 KiB), so a larger
	// read buffer would not fill; the write buffer is pooled
	// (h2wire.PooledWriter).
	readBufSize  = 16 << 10
	writeBufSize = 32 << 10
	// flushBatch: a handler's flush of fewer buffered bytes, with other
	// streams open, yields once first (see responseWriter.FlushError).
	flushBatch = 16 << 10
	// canonCacheMax bounds the per-connection header-name caches.
	canonCacheMax = 64
)

// limits is the resolved configuration of one connection.
type limits struct {
	maxStreams      uint32
	maxHeaderList   uint32
	maxReadFrame    uint32
	streamWindow    uint32
	connWindow      uint32
	writeTimeout    time.Duration
	settingsTimeout time.Duration
	// keepaliveTime 0: no keepalive PINGs.
	keepaliveTime, keepaliveTimeout time.Duration
}

func (s *Server) limits() limits {
	l := limits{
		maxStreams:       s.MaxConcurrentStreams,
		maxHeaderList:    s.MaxHeaderListSize,
		maxReadFrame:     s.MaxReadFrameSize,
		streamWindow:     s.StreamWindow,
		connWindow:       s.ConnWindow,
		writeTimeout:     s.WriteTimeout,
		settingsTimeout:  s.SettingsTimeout,
		keepaliveTime:    s.KeepaliveTime,
		keepaliveTimeout: s.KeepaliveTimeout,
	}
	if l.keepaliveTimeout <= 0 {
		l.keepaliveTimeout = defaultKeepaliveTimeout
	}
	if l.maxStreams == 0 {
		l.maxStreams = defaultMaxConcurrentStreams
	}
	if l.maxHeaderList == 0 {
		l.maxHeaderList = defaultMaxHeaderListSize
	}
	if l.maxReadFrame == 0 {
		l.maxReadFrame = defaultMaxReadFrameSize
	}
	l.maxReadFrame = min(max(l.maxReadFrame, 1<<14), 1<<24-1)
	if l.streamWindow == 0 {
		l.streamWindow = defaultStreamWindow
	}
	l.streamWindow = min(l.streamWindow, maxWindow)
	if l.connWindow == 0 {
		l.connWindow = defaultConnWindow
	}
	l.connWindow = min(max(l.connWindow, initialWindow), maxWindow)
	if l.writeTimeout <= 0 {
		l.writeTimeout = defaultWriteTimeout
	}
	if l.settingsTimeout <= 0 {
		l.settingsTimeout = defaultSettingsTimeout
	}
	return l
}

// floodMeter counts PING and SETTINGS frames per one-second window.
type floodMeter struct {
	start time.Time
	n     int
}

// tick records one control frame and reports whether the bound is exceeded.
func (m *floodMeter) tick() bool {
	now := time.Now()
	if now.Sub(m.start) > time.Second {
		m.start, m.n = now, 0
	}
	m.n++
	return m.n > maxControlPerSecond
}

// connErr is a connection error: a GOAWAY with code is sent, then the
// connection is closed.
type connErr struct {
	code   http2.ErrCode
	reason string
}

func (e connErr) Error() string {
	return "h2front: connection error " + e.code.String() + ": " + e.reason
}

// streamErr is a stream error: a RST_STREAM with code is sent.
type streamErr struct {
	id   uint32
	code http2.ErrCode
}

func (e streamErr) Error() string { return "h2front: stream error " + e.code.String() }
