package h2front

import "time"

// keepalivePing is the payload of the server's keepalive PINGs.
var keepalivePing = [8]byte{'b', 'e', 't', 'c', 'o', 'd', 'e', 'k'}

// startKeepalive arms the keepalive timer (Server.KeepaliveTime): a
// connection from which no frame has arrived for KeepaliveTime is sent a
// PING, and closed if still nothing has arrived KeepaliveTimeout later. A
// peer that vanished without a FIN (a laptop's lid closed, a NAT that
// forgot the flow) is noticed within KeepaliveTime·2 + KeepaliveTimeout
// instead of at the kernel's TCP keepalive minutes later. The timer is a
// runtime timer, not a goroutine: an idle connection pays for it a few
// dozen bytes.
func (c *conn) startKeepalive() {
	if c.lim.keepaliveTime <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.closed {
		c.kaTimer = time.AfterFunc(c.lim.keepaliveTime, c.keepaliveTick)
	}
}

// stopKeepaliveLocked stops the timer for good.
func (c *conn) stopKeepaliveLocked() {
	if c.kaTimer != nil {
		c.kaTimer.Stop()
	}
}

// keepaliveTick runs when the timer fires: frames arrived since the last
// tick (the peer is there), a PING goes out (silence), or the PING went
// unanswered (the connection is closed).
func (c *conn) keepaliveTick() {
	n := c.framesRead.Load()
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	switch {
	case n != c.kaSeen:
		c.kaSeen, c.kaPinged = n, false
		c.kaTimer.Reset(c.lim.keepaliveTime)
	case !c.kaPinged:
		c.kaPinged = true
		c.writeCtrlLocked(func() error { return c.wfr.WritePing(false, keepalivePing) })
		// The reader is blocked waiting for the peer: it will not flush.
		_ = c.flushLocked()
		c.kaTimer.Reset(c.lim.keepaliveTimeout)
	default:
		c.mu.Unlock()
		c.log.Debug("h2front: keepalive PING unanswered: closing the connection", "remote", c.remoteAddr,
			"after", (c.lim.keepaliveTime + c.lim.keepaliveTimeout).String())
		c.closeNow()
		return
	}
	c.mu.Unlock()
}
