// Package groupcommit collects concurrent requests into batches that a few
// writer goroutines commit together, so that many callers share one
// transaction (and one fsync) instead of paying for one each.
package groupcommit

import (
	"context"
	"errors"
	"sync"
	"time"
)

// ErrClosed is returned by Do after Close.
var ErrClosed = errors.New("group commit queue closed")

// Request is one caller's submission. The commit function sets Out or Err
// on every request of its batch.
type Request[In, Out any] struct {
	In  In
	Out Out
	Err error

	done chan struct{}
}

// CommitFunc commits a batch and sets each request's Out or Err. ctx ends
// only when Close gives up waiting.
type CommitFunc[In, Out any] func(ctx context.Context, batch []*Request[In, Out])

// Options configures a Queue; zero fields take defaults.
type Options struct {
	// MaxBatch caps requests per commit (default 1000).
	MaxBatch int
	// Writers is how many batches may be in flight at once (default 1).
	Writers int
	// QueueSize bounds waiting requests (default 4*MaxBatch); Do blocks
	// while it is full.
	QueueSize int
	// Linger is how long a writer waits for one more request before it
	// commits a batch, so that callers woken by the previous commit can
	// join this one instead of paying for a commit of their own (0: take
	// only what is already queued). A writer lingers only after a batch of
	// more than one request, so a lone caller never waits.
	Linger time.Duration
	// MaxDelay caps the total lingering per batch (default 4*Linger).
	MaxDelay time.Duration
}

// Queue batches requests for a CommitFunc.
type Queue[In, Out any] struct {
	commit   CommitFunc[In, Out]
	maxBatch int
	linger   time.Duration
	maxDelay time.Duration
	reqs     chan *Request[In, Out]

	// mu orders sends on reqs with Close's close(reqs).
	mu     sync.RWMutex
	closed bool

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// New starts opt.Writers writer goroutines; Close stops them.
func New[In, Out any](commit CommitFunc[In, Out], opt Options) *Queue[In, Out] {
	if opt.MaxBatch <= 0 {
		opt.MaxBatch = 1000
	}
	if opt.Writers <= 0 {
		opt.Writers = 1
	}
	if opt.QueueSize <= 0 {
		opt.QueueSize = 4 * opt.MaxBatch
	}
	if opt.MaxDelay <= 0 {
		opt.MaxDelay = 4 * opt.Linger
	}
	q := &Queue[In, Out]{
		commit:   commit,
		maxBatch: opt.MaxBatch,
		linger:   opt.Linger,
		maxDelay: opt.MaxDelay,
		reqs:     make(chan *Request[In, Out], opt.QueueSize),
	}
	q.ctx, q.cancel = context.WithCancel(context.Background())
	for range opt.Writers {
		q.wg.Go(q.writer)
	}
	return q
}

// Do submits in and waits for its batch to commit. If ctx ends first, Do
// returns ctx's error; the request may still be committed.
func (q *Queue[In, Out]) Do(ctx context.Context, in In) (Out, error) {
	r := &Request[In, Out]{In: in, done: make(chan struct{})}
	var zero Out
	q.mu.RLock()
	if q.closed {
		q.mu.RUnlock()
		return zero, ErrClosed
	}
	select {
	case q.reqs <- r:
		q.mu.RUnlock()
	case <-ctx.Done():
		q.mu.RUnlock()
		return zero, ctx.Err()
	}
	select {
	case <-r.done:
		return r.Out, r.Err
	case <-ctx.Done():
		return zero, ctx.Err()
	}
}

// Close stops taking requests, commits those already queued and waits for
// the writers. After timeout it cancels the commit context, failing what is
// still in flight, and waits for the writers to return.
func (q *Queue[In, Out]) Close(timeout time.Duration) {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return
	}
	q.closed = true
	close(q.reqs)
	q.mu.Unlock()

	done := make(chan struct{})
	go func() { q.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(timeout):
		q.cancel()
		<-done
	}
	q.cancel()
}

func (q *Queue[In, Out]) writer() {
	batch := make([]*Request[In, Out], 0, q.maxBatch)
	var timer *time.Timer
	if q.linger > 0 {
		timer = time.NewTimer(time.Hour)
		timer.Stop()
	}
	last := 0 // size of the previous batch
	for {
		r, ok := <-q.reqs
		if !ok {
			return
		}
		batch = append(batch[:0], r)
		open := q.collect(&batch, timer, last > 1)
		q.commit(q.ctx, batch)
		for _, r := range batch {
			close(r.done)
		}
		last = len(batch)
		clear(batch) // drop payload references until the next batch
		if !open {
			return
		}
	}
}

// collect adds queued requests to batch, up to maxBatch. If linger, it
// also waits up to q.linger for each further request, for at most
// q.maxDelay in all. It reports false if it saw the queue closed.
func (q *Queue[In, Out]) collect(batch *[]*Request[In, Out], timer *time.Timer, linger bool) bool {
	var deadline time.Time
	if linger && timer != nil {
		deadline = time.Now().Add(q.maxDelay)
	}
	for len(*batch) < q.maxBatch {
		select {
		case r, ok := <-q.reqs:
			if !ok {
				return false
			}
			*batch = append(*batch, r)
			continue
		default:
		}
		if deadline.IsZero() {
			return true
		}
		wait := min(q.linger, time.Until(deadline))
		if wait <= 0 {
			return true
		}
		timer.Reset(wait)
		select {
		case r, ok := <-q.reqs:
			timer.Stop()
			if !ok {
				return false
			}
			*batch = append(*batch, r)
		case <-timer.C:
			return true
		}
	}
	return true
}
