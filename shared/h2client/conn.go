package h2client

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/betcode-dev/betcode/shared/h2wire"
)

var _ http.RoundTripper = (*Conn)(nil)

// Conn is an HTTP/2 client connection. It is safe for concurrent use.
//
// Lock order: wmu before mu. Nothing that holds mu takes wmu.
type Conn struct {
	c     net.Conn
	opts  Options
	start time.Time

	// Read side, owned by the reader goroutine.
	br         *h2wire.PooledReader
	rlim       h2wire.FrameReader // between br and rfr
	rfr        *http2.Framer
	rpending   bool              // reader wrote frames it has not flushed
	canon      map[string]string // header name → canonical key cache
	readerDone chan struct{}
	lastRead   atomic.Int64 // time since start of the last frame read (with PingEvery)

	// Write side, guarded by wmu.
	wmu          sync.Mutex
	dw           *deadlineWriter
	bw           *h2wire.PooledWriter
	wfr          *http2.Framer
	henc         *hpack.Encoder
	hbuf         bytes.Buffer
	peerMaxFrame int
	lower        map[string]string // header name → lower case cache

	// State, guarded by mu.
	mu             sync.Mutex
	cond           sync.Cond // on mu: send window, stream slots, failures
	streams        map[uint32]*stream
	nextID         uint32
	active         int    // streams in map plus reserved slots
	peerMaxStreams uint32 // SETTINGS_MAX_CONCURRENT_STREAMS
	gotSettings    bool
	peerInitWindow int64 // peer's SETTINGS_INITIAL_WINDOW_SIZE
	sendWindow     int64 // connection send window
	recvWindow     int64 // what the peer may still send on the connection
	refund         int64 // consumed connection bytes not yet refunded
	err            error // set once the connection failed or was closed
	goAwayErr      error // set once no new streams may start
	goAwayLast     uint32
	idleClose      bool // close once mu is released (GOAWAY, no streams)
	pingTimer      *time.Timer
	pingOut        bool
	pingSent       time.Duration
}

// New starts an HTTP/2 client connection on c (already connected and, for
// TLS, handshaken; the peer speaks HTTP/2 with prior knowledge): it writes the
// client preface, SETTINGS (ENABLE_PUSH 0, INITIAL_WINDOW_SIZE,
// MAX_HEADER_LIST_SIZE) and the connection WINDOW_UPDATE in one flush, and
// starts the reader goroutine. It does not wait for the server's SETTINGS.
// ctx bounds only that first write. If New fails, it closes c.
func New(ctx context.Context, c net.Conn, o Options) (*Conn, error) {
	o = o.withDefaults()
	if err := ctx.Err(); err != nil {
		c.Close()
		return nil, err
	}
	var pre bytes.Buffer
	pre.WriteString(http2.ClientPreface)
	pf := http2.NewFramer(&pre, nil)
	pf.WriteSettings(
		http2.Setting{ID: http2.SettingEnablePush, Val: 0},
		http2.Setting{ID: http2.SettingInitialWindowSize, Val: o.StreamWindow},
		http2.Setting{ID: http2.SettingMaxHeaderListSize, Val: o.MaxHeaderListSize},
	)
	if o.ConnWindow > initialWindow {
		pf.WriteWindowUpdate(0, o.ConnWindow-initialWindow)
	}
	if err := writeFirst(ctx, c, pre.Bytes(), o.WriteTimeout); err != nil {
		c.Close()
		return nil, fmt.Errorf("h2client: writing preface: %w", err)
	}

	cc := &Conn{
		c:              c,
		opts:           o,
		start:          time.Now(),
		br:             &h2wire.PooledReader{R: c, Pool: readBufs},
		canon:          make(map[string]string),
		readerDone:     make(chan struct{}),
		dw:             &deadlineWriter{c: c, timeout: o.WriteTimeout},
		peerMaxFrame:   16384,
		lower:          make(map[string]string),
		streams:        make(map[uint32]*stream),
		nextID:         1,
		peerMaxStreams: 100, // until the peer's SETTINGS say otherwise
		peerInitWindow: initialWindow,
		sendWindow:     initialWindow,
		recvWindow:     int64(o.ConnWindow),
	}
	cc.cond.L = &cc.mu
	cc.bw = &h2wire.PooledWriter{W: cc.dw, Pool: writeBufs}
	cc.wfr = http2.NewFramer(cc.bw, nil)
	cc.henc = hpack.NewEncoder(&cc.hbuf)
	cc.rlim = h2wire.FrameReader{R: cc.br, Limit: h2wire.FrameLimit(maxReadFrameSize, o.MaxHeaderListSize)}
	cc.rfr = http2.NewFramer(nil, &cc.rlim)
	cc.rfr.SetMaxReadFrameSize(maxReadFrameSize)
	cc.rfr.MaxHeaderListSize = o.MaxHeaderListSize
	cc.rfr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	cc.rfr.SetReuseFrames()

	go cc.readLoop()
	if o.PingEvery > 0 {
		cc.mu.Lock()
		cc.pingTimer = time.AfterFunc(o.PingEvery, cc.onPingTimer)
		cc.mu.Unlock()
	}
	return cc, nil
}

// writeFirst writes b to c, bounded by ctx and by timeout.
func writeFirst(ctx context.Context, c net.Conn, b []byte, timeout time.Duration) error {
	dl := time.Now().Add(timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(dl) {
		dl = d
	}
	c.SetWriteDeadline(dl)
	stop := context.AfterFunc(ctx, func() { c.SetWriteDeadline(time.Unix(1, 0)) })
	_, err := c.Write(b)
	stop()
	if err != nil && ctx.Err() != nil {
		err = ctx.Err()
	}
	return err
}

// Err is nil while the connection can take new calls; afterwards, why not
// (closed, GOAWAY received, read error, ping timeout, ...).
func (cc *Conn) Err() error {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if cc.err != nil {
		return cc.err
	}
	return cc.goAwayErr
}

// Close ends the connection and every call on it (their bodies' reads return
// an error); it closes c and waits for the reader goroutine to exit.
// Idempotent.
func (cc *Conn) Close() error {
	cc.fail(errClosed, 0, false)
	<-cc.readerDone
	return nil
}

// fail ends the connection with err: every open call fails with it, the
// net.Conn is closed. If goAway, a GOAWAY with code is written first, best
// effort, waiting at most about goAwayTimeout; then wmu must not be held.
// Only the first call has an effect.
func (cc *Conn) fail(err error, code http2.ErrCode, goAway bool) {
	cc.mu.Lock()
	if cc.err != nil {
		cc.mu.Unlock()
		return
	}
	cc.err = err
	open := make([]*stream, 0, len(cc.streams))
	for id, s := range cc.streams {
		delete(cc.streams, id)
		s.inMap = false
		cc.active--
		if !s.recvEnd {
			s.abortLocked(err)
		}
		open = append(open, s)
	}
	cc.cond.Broadcast()
	t := cc.pingTimer
	cc.mu.Unlock()
	for _, s := range open {
		s.stopReqBody() // stops its body writer; may run on the reader
	}
	if t != nil {
		t.Stop()
	}
	if goAway {
		// Bound the wait for a writer stuck holding wmu, and our own write.
		cc.dw.failing.Store(true)
		cc.c.SetWriteDeadline(time.Now().Add(goAwayTimeout))
		cc.wmu.Lock()
		cc.wfr.WriteGoAway(0, code, nil)
		cc.bw.Flush()
		cc.wmu.Unlock()
	}
	cc.c.Close()
}

// failWrite fails the connection after a write error.
func (cc *Conn) failWrite(err error) {
	cc.fail(fmt.Errorf("h2client: connection failed: write: %w", err), 0, false)
}

// unlock releases mu and then closes the connection if GOAWAY left it idle.
func (cc *Conn) unlock() {
	closeNow := cc.idleClose && cc.err == nil
	cc.idleClose = false
	err := cc.goAwayErr
	cc.mu.Unlock()
	if closeNow {
		cc.fail(err, 0, false)
	}
}

// removeLocked takes s out of the open streams and frees its slot.
func (cc *Conn) removeLocked(s *stream) {
	if !s.inMap {
		return
	}
	delete(cc.streams, s.id)
	s.inMap = false
	cc.releaseSlotLocked()
}

// releaseSlotLocked frees one stream slot.
func (cc *Conn) releaseSlotLocked() {
	cc.active--
	cc.cond.Broadcast()
	if cc.goAwayErr != nil && cc.active == 0 {
		cc.idleClose = true
	}
}

// windowUpdates are the WINDOW_UPDATE frames a refund made due.
type windowUpdates struct {
	streamID  uint32
	streamInc uint32
	connInc   uint32
}

func (u windowUpdates) any() bool { return u.streamInc > 0 || u.connInc > 0 }

// takeUpdatesLocked returns the refunds that are due (h2wire.RefundDue: a
// stream's in quarters of its window, the connection's in 1/1024 of its,
// 64 KiB of the default 64 MiB), and counts them as given back. s may be nil.
func (cc *Conn) takeUpdatesLocked(s *stream) windowUpdates {
	var u windowUpdates
	if s != nil && s.inMap && !s.recvEnd && h2wire.RefundDue(s.refund, s.recvWindow, int64(cc.opts.StreamWindow)/4) {
		u.streamID, u.streamInc = s.id, uint32(s.refund)
		s.recvWindow += s.refund
		s.refund = 0
	}
	if h2wire.RefundDue(cc.refund, cc.recvWindow, int64(cc.opts.ConnWindow)/1024) && cc.err == nil {
		u.connInc = uint32(cc.refund)
		cc.recvWindow += cc.refund
		cc.refund = 0
	}
	return u
}

// writeUpdatesLocked writes u; wmu held.
func (cc *Conn) writeUpdatesLocked(u windowUpdates) {
	if u.streamInc > 0 {
		cc.wfr.WriteWindowUpdate(u.streamID, u.streamInc)
	}
	if u.connInc > 0 {
		cc.wfr.WriteWindowUpdate(0, u.connInc)
	}
}

// writeControl writes a RST_STREAM for rst (if non-nil; reset by
// resetLocked) and window updates, and flushes if flush (the reader instead
// flushes at its flush point). rst's stream slot is freed once its
// RST_STREAM is buffered, so that the peer sees the reset before the HEADERS
// of a stream that takes the slot.
func (cc *Conn) writeControl(rst *stream, code http2.ErrCode, u windowUpdates, flush bool) {
	cc.wmu.Lock()
	if rst != nil {
		rst.writeRSTLocked(code)
	}
	cc.writeUpdatesLocked(u)
	var err error
	if flush {
		err = cc.bw.Flush()
	}
	if rst != nil {
		cc.mu.Lock()
		cc.releaseSlotLocked()
		cc.unlock()
	}
	cc.wmu.Unlock()
	if err != nil {
		cc.failWrite(err)
	}
}

// maxConcurrent converts the peer's stream limit for comparison with active.
func (cc *Conn) maxConcurrent() int {
	if cc.peerMaxStreams > math.MaxInt32 {
		return math.MaxInt32
	}
	return int(cc.peerMaxStreams)
}

// deadlineWriter arms the write deadline before each write to the conn, so
// a write blocked for longer than timeout fails.
type deadlineWriter struct {
	c       net.Conn
	timeout time.Duration
	failing atomic.Bool // the connection is failing: only a short wait
}

// goAwayTimeout bounds writing the GOAWAY of a failing connection.
const goAwayTimeout = time.Second

func (w *deadlineWriter) Write(p []byte) (int, error) {
	t := w.timeout
	if w.failing.Load() {
		t = goAwayTimeout
	}
	w.c.SetWriteDeadline(time.Now().Add(t))
	return w.c.Write(p)
}
