package h2client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"
)

// Pool is an http.RoundTripper that keeps one Conn per address (the
// request URL's host), dialed on the first call to it and again once that
// Conn can take no more calls (it failed, or the peer sent GOAWAY: its open
// calls finish on it, and it closes itself when they have). The relay uses
// it for the calls it hands to other replicas.
type Pool struct {
	// Dial connects to addr: TLS handshaken, with HTTP/2 negotiated.
	Dial func(ctx context.Context, addr string) (net.Conn, error)
	// Options configures each Conn.
	Options Options
	// DialTimeout bounds a dial and the start of its Conn; 0 means 10s.
	// A dial is shared by the calls waiting for it, so no one call's
	// context cancels it.
	DialTimeout time.Duration

	mu     sync.Mutex
	conns  map[string]*poolConn
	closed bool
}

var _ http.RoundTripper = (*Pool)(nil)

// poolConn is one address's Conn, or the dial that will give it.
type poolConn struct {
	ready chan struct{} // closed once the dial is over
	cc    *Conn
	err   error
}

// errPoolClosed is the error of calls after Close.
var errPoolClosed = errors.New("h2client: pool closed")

// RoundTrip sends req on the Conn for req.URL.Host.
func (p *Pool) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL == nil {
		return nil, errNoURL
	}
	cc, err := p.conn(req.Context(), req.URL.Host)
	if err != nil {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, err
	}
	return cc.RoundTrip(req)
}

// conn returns a Conn to addr that can take calls, dialing if need be.
func (p *Pool) conn(ctx context.Context, addr string) (*Conn, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, errPoolClosed
	}
	pc := p.conns[addr]
	if pc != nil {
		select {
		case <-pc.ready:
			if pc.err == nil && pc.cc.Err() == nil {
				p.mu.Unlock()
				return pc.cc, nil
			}
			pc = nil // gone: dial again
		default:
		}
	}
	dialing := pc == nil
	if dialing {
		pc = &poolConn{ready: make(chan struct{})}
		if p.conns == nil {
			p.conns = make(map[string]*poolConn)
		}
		p.conns[addr] = pc
	}
	p.mu.Unlock()
	if dialing {
		p.dial(addr, pc)
	}
	select {
	case <-pc.ready:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if pc.err != nil {
		return nil, pc.err
	}
	return pc.cc, nil
}

// dial connects pc to addr. A failed dial is forgotten, so the next call
// tries again.
func (p *Pool) dial(addr string, pc *poolConn) {
	timeout := p.DialTimeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	c, err := p.Dial(ctx, addr)
	if err == nil {
		pc.cc, err = New(ctx, c, p.Options) // New closes c on failure
	}
	if err != nil {
		pc.err = fmt.Errorf("h2client: connect to %s: %w", addr, err)
	}
	p.mu.Lock()
	if err != nil && p.conns[addr] == pc {
		delete(p.conns, addr)
	}
	closed := p.closed
	p.mu.Unlock()
	if closed && pc.cc != nil {
		pc.cc.Close()
		pc.cc, pc.err = nil, errPoolClosed
	}
	close(pc.ready)
}

// Close closes every Conn and fails later calls.
func (p *Pool) Close() error {
	p.mu.Lock()
	p.closed = true
	conns := p.conns
	p.conns = nil
	p.mu.Unlock()
	for _, pc := range conns {
		select {
		case <-pc.ready:
			if pc.cc != nil {
				pc.cc.Close()
			}
		default: // dial's end closes it
		}
	}
	return nil
}
