package h2front

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/betcode-dev/betcode/shared/h2wire"
)

var (
	errConnClosed   = errors.New("h2front: connection closed")
	errStreamReset  = errors.New("h2front: stream reset")
	errBadPreface   = errors.New("h2front: bad client preface")
	errGracefulDone = errors.New("h2front: connection drained")
)

// conn is one HTTP/2 connection. The reader goroutine (serve) owns the
// read side; mu guards the stream table, flow-control state and every write
// into bw.
type conn struct {
	srv        *Server
	nc         net.Conn
	lim        limits
	log        *slog.Logger
	remoteAddr string
	tlsState   *tls.ConnectionState
	ctx        context.Context
	cancel     context.CancelFunc

	// flushers counts handlers' flushes waiting for mu (see FlushError).
	flushers atomic.Int32

	// Reader-goroutine state.
	br          *h2wire.PooledReader
	fread       h2wire.FrameReader
	rfr         *http2.Framer
	pending     []*stream // streams whose handlers start when the reader blocks
	canonCache  map[string]string
	settingsGot bool // first client SETTINGS seen

	// framesRead counts the frames read, for the keepalive timer.
	framesRead atomic.Uint64

	wg       sync.WaitGroup // handler goroutines
	goAwayWG sync.WaitGroup // startGoAway goroutines

	mu          sync.Mutex
	sendCond    sync.Cond // signalled when send window grows or streams end
	bw          *h2wire.PooledWriter
	wfr         *http2.Framer
	henc        *hpack.Encoder
	hbuf        bytes.Buffer
	lowerCache  map[string]string
	werr        error // sticky write error
	closed      bool  // connection ended: no more writes
	ctrlPending bool  // reader wrote control frames not yet flushed
	streams     map[uint32]*stream
	lastID      uint32 // highest client stream id processed (named in GOAWAY)
	maxID       uint32 // highest client stream id seen
	running     int    // handler goroutines running
	goingAway   bool   // we sent GOAWAY(NO_ERROR) or received GOAWAY
	prefaceDone bool   // our SETTINGS were written
	settingsAck bool
	wakeReader  bool // graceful end requested: reader should stop
	flood       floodMeter
	sentData    bool // response HEADERS/DATA written since the last PING/SETTINGS

	// Keepalive (keepalive.go; under mu).
	kaTimer  *time.Timer
	kaSeen   uint64 // framesRead at the last tick
	kaPinged bool   // a keepalive PING is out, unanswered

	// Flow control (under mu).
	peerMaxFrame  uint32
	peerInitWin   int32
	sendWin       int64 // connection send window
	recvAvail     int64 // connection receive window left for the peer
	recvUnsent    int64 // consumed bytes not yet refunded to the peer
	streamRecvWin int32 // initial receive window of new streams
}

func newConn(s *Server, nc net.Conn, lim limits) *conn {
	c := &conn{
		srv:          s,
		nc:           nc,
		lim:          lim,
		log:          s.logger(),
		remoteAddr:   nc.RemoteAddr().String(),
		streams:      make(map[uint32]*stream),
		peerMaxFrame: 16384,
		peerInitWin:  initialWindow,
		sendWin:      initialWindow,
		recvAvail:    initialWindow,
	}
	c.sendCond.L = &c.mu
	if cs, ok := nc.(interface{ ConnectionState() tls.ConnectionState }); ok {
		st := cs.ConnectionState()
		c.tlsState = &st
	}
	ctx := context.WithValue(context.Background(), http.LocalAddrContextKey, nc.LocalAddr())
	if s.ConnContext != nil {
		ctx = s.ConnContext(ctx, nc)
	}
	c.ctx, c.cancel = context.WithCancel(ctx)

	c.br = &h2wire.PooledReader{R: nc, Pool: readBufs}
	c.fread = h2wire.FrameReader{R: c.br, Limit: h2wire.FrameLimit(lim.maxReadFrame, lim.maxHeaderList)}
	c.rfr = http2.NewFramer(nil, &c.fread)
	c.rfr.SetReuseFrames()
	c.rfr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	c.rfr.MaxHeaderListSize = lim.maxHeaderList
	c.rfr.SetMaxReadFrameSize(lim.maxReadFrame)

	c.bw = &h2wire.PooledWriter{W: deadlineWriter{c}, Pool: writeBufs}
	c.wfr = http2.NewFramer(c.bw, nil)
	c.henc = hpack.NewEncoder(&c.hbuf)
	if s.NoDynamicTables {
		c.henc.SetMaxDynamicTableSize(0)
	}
	c.streamRecvWin = int32(lim.streamWindow)
	if c.streamRecvWin < initialWindow {
		// Until the client acknowledges our SETTINGS it may assume the
		// default window.
		c.streamRecvWin = initialWindow
	}
	return c
}

// deadlineWriter writes to the connection with a write deadline of
// WriteTimeout for each write.
type deadlineWriter struct{ c *conn }

func (w deadlineWriter) Write(p []byte) (int, error) {
	_ = w.c.nc.SetWriteDeadline(time.Now().Add(w.c.lim.writeTimeout))
	return w.c.nc.Write(p)
}

// serve runs the connection until it ends; see teardown.
func (c *conn) serve() {
	timer := time.AfterFunc(c.lim.settingsTimeout, c.settingsTimedOut)
	defer timer.Stop()
	err := c.handshake()
	if err == nil {
		c.startKeepalive()
		err = c.readLoop()
	}
	c.teardown(err)
}

// handshake reads the client preface and writes our SETTINGS.
func (c *conn) handshake() error {
	_ = c.nc.SetReadDeadline(time.Now().Add(c.lim.settingsTimeout))
	var buf [len(http2.ClientPreface)]byte
	if _, err := io.ReadFull(c.br, buf[:]); err != nil {
		return err
	}
	if string(buf[:]) != http2.ClientPreface {
		return errBadPreface
	}
	_ = c.nc.SetReadDeadline(time.Time{})

	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return errConnClosed
	}
	settings := []http2.Setting{
		{ID: http2.SettingMaxConcurrentStreams, Val: c.lim.maxStreams},
		{ID: http2.SettingInitialWindowSize, Val: c.lim.streamWindow},
		{ID: http2.SettingMaxFrameSize, Val: c.lim.maxReadFrame},
		{ID: http2.SettingMaxHeaderListSize, Val: c.lim.maxHeaderList},
	}
	if c.srv.NoDynamicTables {
		// The decoder stops allowing a table once the peer has
		// acknowledged this (processSettings).
		settings = append(settings, http2.Setting{ID: http2.SettingHeaderTableSize, Val: 0})
	}
	_ = c.wfr.WriteSettings(settings...)
	if c.lim.connWindow > initialWindow {
		_ = c.wfr.WriteWindowUpdate(0, c.lim.connWindow-initialWindow)
		c.recvAvail = int64(c.lim.connWindow)
	}
	c.prefaceDone = true
	if c.goingAway {
		c.writeGoAwayLocked(http2.ErrCodeNo)
	}
	return c.flushLocked()
}

func (c *conn) settingsTimedOut() {
	c.mu.Lock()
	acked := c.settingsAck
	c.mu.Unlock()
	if !acked {
		c.log.Debug("h2front: SETTINGS not acknowledged in time", "remote", c.remoteAddr)
		c.closeNow()
	}
}

// readLoop reads and processes frames until the connection ends.
func (c *conn) readLoop() error {
	sinceIdle := 0
	for {
		// The idle work also runs every idleEvery frames: a client whose
		// TLS records each end inside a frame keeps the read buffer from
		// ever emptying at a frame boundary, and without this its control
		// answers would never be flushed nor its new streams started.
		if c.br.Buffered() == 0 || sinceIdle >= idleEvery {
			sinceIdle = 0
			if err := c.idle(); err != nil {
				return err
			}
		}
		sinceIdle++
		c.fread.Reset()
		f, err := c.rfr.ReadFrame()
		if err != nil {
			if err := c.readError(err); err != nil {
				return err
			}
			continue
		}
		c.framesRead.Add(1)
		if err := c.processFrame(f); err != nil {
			var se streamErr
			if errors.As(err, &se) {
				c.resetStream(se.id, se.code)
				continue
			}
			return err
		}
	}
}

// idle runs when the reader is about to block (and every idleEvery
// frames): flush control answers, then start the handlers of new streams,
// and end a drained connection.
func (c *conn) idle() error {
	c.mu.Lock()
	if c.ctrlPending {
		_ = c.flushLocked()
	}
	err := c.werr
	c.mu.Unlock()
	if err != nil {
		return err
	}
	if len(c.pending) > 0 {
		if err := c.startPending(); err != nil {
			return err
		}
	}
	c.mu.Lock()
	wake := c.wakeReader || (c.goingAway && len(c.streams) == 0)
	c.mu.Unlock()
	if wake {
		return errGracefulDone
	}
	return nil
}

// readError classifies an error from ReadFrame; nil means keep reading.
func (c *conn) readError(err error) error {
	var se http2.StreamError
	if errors.As(err, &se) {
		c.noteStreamID(se.StreamID)
		c.resetStream(se.StreamID, se.Code)
		return nil
	}
	var ce http2.ConnectionError
	if errors.As(err, &ce) {
		return connErr{http2.ErrCode(ce), "frame: " + errDetail(c.rfr.ErrorDetail())}
	}
	if errors.Is(err, h2wire.ErrFrameBytes) {
		return connErr{http2.ErrCodeEnhanceYourCalm, "header block too long"}
	}
	if errors.Is(err, http2.ErrFrameTooLarge) {
		return connErr{http2.ErrCodeFrameSize, "frame too large"}
	}
	c.mu.Lock()
	wake := c.wakeReader
	c.mu.Unlock()
	if wake && errors.Is(err, os.ErrDeadlineExceeded) {
		return errGracefulDone
	}
	return err
}

func errDetail(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// noteStreamID advances the last stream id for a new odd id whose HEADERS
// failed to decode, so the id cannot be reused.
func (c *conn) noteStreamID(id uint32) {
	c.mu.Lock()
	if id%2 == 1 && id > c.maxID {
		c.maxID, c.lastID = id, id
	}
	c.mu.Unlock()
}
