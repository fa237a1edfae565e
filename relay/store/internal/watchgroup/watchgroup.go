// Package watchgroup tracks a store's running Watch calls, so that the
// store's Close can end them and wait for them before it releases the
// connections they read from.
package watchgroup

import (
	"context"
	"sync"
)

// Group is the set of Watch calls running on one store. The zero value is
// not usable; call New.
type Group struct {
	mu     sync.Mutex // orders Join's Add before Close's Wait
	closed context.Context
	close  context.CancelFunc
	wg     sync.WaitGroup
}

// New returns an open Group.
func New() *Group {
	g := &Group{}
	g.closed, g.close = context.WithCancel(context.Background())
	return g
}

// Join registers a Watch call. It returns a context that ends with ctx or
// when the group closes, and leave, which the call must run when it
// returns. ok is false once the group is closed.
func (g *Group) Join(ctx context.Context) (_ context.Context, leave func(), ok bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed.Err() != nil {
		return nil, nil, false
	}
	g.wg.Add(1)
	wctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(g.closed, cancel)
	return wctx, func() {
		stop()
		cancel()
		g.wg.Done()
	}, true
}

// Closed reports whether Close was called.
func (g *Group) Closed() bool { return g.closed.Err() != nil }

// Close ends the contexts of every joined call and waits until each has
// left. Later Joins fail. It is idempotent.
func (g *Group) Close() {
	g.mu.Lock()
	g.close()
	g.mu.Unlock()
	g.wg.Wait()
}
