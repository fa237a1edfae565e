package h2client

import (
	"errors"
	"fmt"
	"time"
)

var errPingTimeout = errors.New("ping timeout: no frame read after PING")

// onPingTimer runs the keepalive: it sends a PING after PingEvery with no
// frame read, and fails the connection if nothing is read within
// PingTimeout after it. Every frame read (not only the PING ack) counts.
func (cc *Conn) onPingTimer() {
	now := time.Since(cc.start)
	cc.mu.Lock()
	if cc.err != nil {
		cc.mu.Unlock()
		return
	}
	last := time.Duration(cc.lastRead.Load())
	send := false
	var next time.Duration
	if cc.pingOut && last < cc.pingSent {
		if now-cc.pingSent >= cc.opts.PingTimeout {
			cc.mu.Unlock()
			cc.fail(fmt.Errorf("h2client: connection failed: %w (%v)", errPingTimeout, cc.opts.PingTimeout), 0, false)
			return
		}
		next = cc.pingSent + cc.opts.PingTimeout - now
	} else {
		cc.pingOut = false
		if idle := now - last; idle >= cc.opts.PingEvery {
			send = true
			cc.pingOut = true
			cc.pingSent = now
			next = cc.opts.PingTimeout
		} else {
			next = cc.opts.PingEvery - idle
		}
	}
	cc.pingTimer.Reset(next)
	cc.mu.Unlock()
	if send {
		cc.wmu.Lock()
		cc.wfr.WritePing(false, [8]byte{'h', '2', 'c', 'l', 'i', 'e', 'n', 't'})
		err := cc.bw.Flush()
		cc.wmu.Unlock()
		if err != nil {
			cc.failWrite(err)
		}
	}
}
