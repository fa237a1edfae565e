package server

import (
	"net"
	"sync"
	"testing"
	"time"
)

// fakeConn records whether it was closed.
type fakeConn struct {
	net.Conn
	mu     sync.Mutex
	closed bool
}

func (c *fakeConn) Close() error {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	return nil
}

func (c *fakeConn) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// guardClock is a manual clock and timer for a connGuard.
type guardClock struct {
	now     time.Time
	pending func() // the armed check, nil when none
	after   time.Duration
}

func newTestGuard(timeout time.Duration) (*connGuard, *fakeConn, *guardClock) {
	c := &fakeConn{}
	clk := &guardClock{now: time.Unix(1000, 0)}
	g := (&guards{}).newGuard(c, timeout)
	g.now = func() time.Time { return clk.now }
	g.after = func(d time.Duration, f func()) func() bool {
		clk.pending, clk.after = f, d
		return func() bool { clk.pending = nil; return true }
	}
	return g, c, clk
}

// fire advances the clock to the armed check and runs it.
func (clk *guardClock) fire(t *testing.T) {
	t.Helper()
	f := clk.pending
	if f == nil {
		t.Fatal("no check armed")
	}
	clk.pending = nil
	clk.now = clk.now.Add(clk.after)
	f()
}

func TestConnGuard(t *testing.T) {
	const timeout = 10 * time.Second
	tests := []struct {
		name       string
		run        func(t *testing.T, g *connGuard, clk *guardClock)
		wantClosed bool
	}{
		{"never used: closed at the timeout", func(t *testing.T, g *connGuard, clk *guardClock) {
			g.check()
		}, true},
		{"a web request in flight at the timeout keeps it", func(t *testing.T, g *connGuard, clk *guardClock) {
			g.begin() // a slow download, say
			g.check()
		}, false},
		{"closed a timeout after its last web request ended", func(t *testing.T, g *connGuard, clk *guardClock) {
			end := g.begin()
			g.check()
			clk.now = clk.now.Add(time.Minute)
			end()
			clk.fire(t)
		}, true},
		{"a static load less than the timeout ago keeps it until idle", func(t *testing.T, g *connGuard, clk *guardClock) {
			g.begin()()
			clk.now = clk.now.Add(timeout - time.Second)
			g.check() // relay/auth's timer
			if g.conn.(*fakeConn).isClosed() {
				t.Fatal("closed while recently active")
			}
			if clk.after != time.Second {
				t.Fatalf("re-armed for %v; want 1s (the rest of the idle timeout)", clk.after)
			}
			g.begin()() // still loading
			clk.fire(t) // re-armed: active a moment ago
			clk.fire(t) // idle for the timeout now
		}, true},
		{"a gateway call that authenticated keeps it for good", func(t *testing.T, g *connGuard, clk *guardClock) {
			end := g.begin()
			g.markAuthed()
			end()
			clk.now = clk.now.Add(time.Hour)
			g.check()
		}, false},
		{"registered only while a web request runs", func(t *testing.T, g *connGuard, clk *guardClock) {
			end := g.begin()
			if g.reg.get(g.id) != g {
				t.Fatal("not registered during a web request")
			}
			end()
			if g.reg.Len() != 0 {
				t.Fatal("still registered after the web request ended")
			}
			clk.now = clk.now.Add(time.Hour)
			g.check()
		}, true},
		{"a WebSocket upgrade hands it off for good", func(t *testing.T, g *connGuard, clk *guardClock) {
			end := g.begin()
			g.handOff()
			if g.reg.Len() != 0 {
				t.Fatal("still registered after the hand-off")
			}
			end() // the upgrade request returns; the socket goes on
			if clk.pending != nil {
				t.Fatal("a check is armed after the hand-off")
			}
			clk.now = clk.now.Add(time.Hour)
			g.check() // relay/auth's timer
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, c, clk := newTestGuard(timeout)
			tt.run(t, g, clk)
			if c.isClosed() != tt.wantClosed {
				t.Fatalf("closed = %v; want %v", c.isClosed(), tt.wantClosed)
			}
		})
	}
}
