package h2front

import (
	"errors"
	"io"
	"net"
	"time"

	"golang.org/x/net/http2"
)

// Ending a connection: gracefully (GOAWAY(NO_ERROR), then linger and close
// once no stream is open), on a protocol error (GOAWAY(code), linger,
// close) or at once (Close, SettingsTimeout, a failed write).

// startGoAway runs goAway on its own goroutine, owned by the connection
// (ServeConn waits for it), so that Shutdown does not wait for c.mu while
// a write holds it (up to WriteTimeout). It must be called while the
// connection is tracked (under Server.mu), which orders the Add before
// ServeConn's Wait.
func (c *conn) startGoAway() {
	c.goAwayWG.Add(1)
	go func() {
		defer c.goAwayWG.Done()
		c.goAway()
	}()
}

// goAway starts a graceful shutdown: GOAWAY(NO_ERROR, last stream id), then
// the connection ends once no stream is open.
func (c *conn) goAway() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.goingAway || c.closed {
		return
	}
	c.goingAway = true
	if !c.prefaceDone {
		// Our SETTINGS must come first; handshake sends the GOAWAY.
		return
	}
	c.writeGoAwayLocked(http2.ErrCodeNo)
	_ = c.flushLocked()
	c.maybeWakeLocked()
	if c.srv.onGoAway != nil {
		c.srv.onGoAway()
	}
}

// maybeWakeLocked wakes the reader when a going-away connection has no open
// stream left.
func (c *conn) maybeWakeLocked() {
	if c.goingAway && len(c.streams) == 0 && !c.wakeReader {
		c.wakeReader = true
		_ = c.nc.SetReadDeadline(time.Now())
	}
}

// closeNow closes the connection at once (Close, SettingsTimeout).
func (c *conn) closeNow() {
	c.cancel()
	rawClose(c.nc)
}

// rawClose closes the transport under a TLS connection without sending
// close_notify, which could block on a peer that does not read.
func rawClose(nc net.Conn) {
	if u, ok := nc.(interface{ NetConn() net.Conn }); ok {
		_ = u.NetConn().Close()
	}
	_ = nc.Close()
}

// teardown ends the connection: GOAWAY for a protocol error, cancel every
// stream, wake blocked writers and readers, wait for handlers, close.
func (c *conn) teardown(err error) {
	var ce connErr
	isConnErr := errors.As(err, &ce)
	if isConnErr {
		c.log.Debug("h2front: connection error", "remote", c.remoteAddr, "code", ce.code.String(), "reason", ce.reason)
	}
	c.mu.Lock()
	if isConnErr && c.prefaceDone && c.werr == nil {
		c.writeGoAwayLocked(ce.code)
		_ = c.flushLocked()
	}
	c.closed = true
	c.stopKeepaliveLocked()
	for _, st := range c.streams {
		st.abortLocked(errConnClosed)
	}
	clear(c.streams)
	c.sendCond.Broadcast()
	hard := c.werr != nil
	c.mu.Unlock()
	for _, st := range c.pending {
		st.cancel()
	}
	c.pending = nil
	c.cancel()

	graceful := errors.Is(err, errGracefulDone)
	if hard {
		rawClose(c.nc)
	} else if isConnErr || graceful {
		// After a graceful end too: the last answer was just flushed, and
		// closing with unread client bytes (a PING, a WINDOW_UPDATE sent
		// meanwhile) would make the kernel reset the connection and
		// discard that answer if it is not yet delivered.
		c.linger()
	}
	if graceful {
		_ = c.nc.SetWriteDeadline(time.Now().Add(c.lim.writeTimeout))
		_ = c.nc.Close()
	} else {
		rawClose(c.nc)
	}
	c.br.Release()
	c.wg.Wait()
}

// linger reads and discards for up to goAwayLinger, or until the peer
// closes, so that the peer receives our last frames before the close
// (closing with unread data would reset the connection and may discard
// them). Close (closeNow) ends it at once.
func (c *conn) linger() {
	_ = c.nc.SetReadDeadline(time.Now().Add(goAwayLinger))
	_, _ = io.Copy(io.Discard, c.br)
}
