package openaiapi

import (
	"sync"

	"github.com/betcode-dev/betcode/agent/provider"
)

// outQueue is a conversation's output waiting for Next. It is unbounded so
// that the turn loop never blocks on a slow reader: the session answers
// permission requests from the goroutine that reads, and a bounded queue
// could deadlock it.
type outQueue struct {
	mu     sync.Mutex
	cond   *sync.Cond
	items  []provider.Output
	closed bool
}

func newOutQueue() *outQueue {
	q := &outQueue{}
	q.cond = sync.NewCond(&q.mu)
	return q
}

// push appends o; it is dropped after close.
func (q *outQueue) push(o provider.Output) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return
	}
	q.items = append(q.items, o)
	q.cond.Signal()
}

// close ends the queue: next returns what is left, then false.
func (q *outQueue) close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	q.cond.Broadcast()
}

// next blocks until an output is queued or the queue is closed and empty.
func (q *outQueue) next() (provider.Output, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.items) == 0 && !q.closed {
		q.cond.Wait()
	}
	if len(q.items) == 0 {
		return provider.Output{}, false
	}
	o := q.items[0]
	q.items[0] = provider.Output{}
	q.items = q.items[1:]
	return o, true
}
