package acp

import (
	"sync"

	"github.com/betcode-dev/betcode/agent/provider"
)

// outQueue is a conversation's output, in order. Pushing never blocks:
// the SDK processes an agent's notifications one at a time and closes the
// connection when its own queue overflows, so a slow reader must not stall
// it; the session manager reads continuously.
type outQueue struct {
	mu     sync.Mutex
	items  []provider.Output
	closed bool
	wake   chan struct{} // has a token when items or closed changed
}

func newOutQueue() *outQueue { return &outQueue{wake: make(chan struct{}, 1)} }

func (q *outQueue) push(o provider.Output) {
	q.mu.Lock()
	if !q.closed {
		q.items = append(q.items, o)
	}
	q.mu.Unlock()
	q.signal()
}

// close ends the queue once its items are read.
func (q *outQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.signal()
}

func (q *outQueue) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// next blocks until an item is there (true) or the queue is closed and
// drained (false).
func (q *outQueue) next() (provider.Output, bool) {
	for {
		q.mu.Lock()
		if len(q.items) > 0 {
			o := q.items[0]
			q.items[0] = provider.Output{}
			q.items = q.items[1:]
			more := len(q.items) > 0 || q.closed
			q.mu.Unlock()
			if more {
				q.signal() // another reader may be waiting
			}
			return o, true
		}
		if q.closed {
			q.mu.Unlock()
			q.signal()
			return provider.Output{}, false
		}
		q.mu.Unlock()
		<-q.wake
	}
}
