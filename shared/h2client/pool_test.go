package h2client

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/betcode-dev/betcode/shared/leakcheck"
)

// poolDialer dials the address the test maps each pool address to, and
// counts dials; fail makes the next dials fail.
type poolDialer struct {
	mu     sync.Mutex
	target map[string]string
	dials  atomic.Int32
	fail   atomic.Bool
}

func (d *poolDialer) dial(ctx context.Context, addr string) (net.Conn, error) {
	d.dials.Add(1)
	if d.fail.Load() {
		return nil, errors.New("refused (test)")
	}
	d.mu.Lock()
	to := d.target[addr]
	d.mu.Unlock()
	var nd net.Dialer
	return nd.DialContext(ctx, "tcp", to)
}

func (d *poolDialer) point(addr, to string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.target == nil {
		d.target = map[string]string{}
	}
	d.target[addr] = to
}

// A Pool keeps one connection per address, shared by concurrent callers;
// it dials again once the connection is gone, and after a failed dial.
func TestPool(t *testing.T) {
	leakcheck.Goroutines(t)
	a, b := startServer(t), startServer(t)
	d := &poolDialer{}
	d.point("a", a.addr)
	d.point("b", b.addr)
	p := &Pool{Dial: d.dial}
	t.Cleanup(func() { p.Close() })
	call := func(addr string) error {
		got, err := unary(p, addr, "/t/Echo", []byte("hi "+addr))
		if err == nil && string(got) != "hi "+addr {
			return errors.New("wrong answer " + string(got))
		}
		return err
	}

	t.Run("one connection per address, shared", func(t *testing.T) {
		var wg sync.WaitGroup
		errs := make(chan error, 40)
		for i := range 40 {
			addr := "a"
			if i%2 == 1 {
				addr = "b"
			}
			wg.Go(func() { errs <- call(addr) })
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		if n := d.dials.Load(); n != 2 {
			t.Fatalf("%d dials for 40 calls to 2 addresses; want 2", n)
		}
	})

	t.Run("a connection that is gone is dialed again", func(t *testing.T) {
		a.srv.Stop()
		a2 := startServer(t)
		d.point("a", a2.addr)
		// The pool may learn that the old connection is gone from a call
		// that fails on it; the next one must get a new connection.
		if err := call("a"); err != nil {
			if err := call("a"); err != nil {
				t.Fatalf("after the server went away: %v", err)
			}
		}
		if n := d.dials.Load(); n != 3 {
			t.Fatalf("%d dials; want 3", n)
		}
	})

	t.Run("a failed dial is not kept", func(t *testing.T) {
		d.fail.Store(true)
		d.point("c", b.addr)
		if err := call("c"); err == nil {
			t.Fatal("a call whose dial failed succeeded")
		}
		d.fail.Store(false)
		if err := call("c"); err != nil {
			t.Fatalf("the dial after a failed one: %v", err)
		}
	})

	t.Run("closed", func(t *testing.T) {
		p.Close()
		if err := call("b"); !errors.Is(err, errPoolClosed) {
			t.Fatalf("a call after Close: %v; want errPoolClosed", err)
		}
	})
}
