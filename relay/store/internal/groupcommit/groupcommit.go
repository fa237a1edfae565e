// Package groupcommit collects concurrent requests into batches that a
// writer goroutine commits together, so that many callers share one
// transaction (and one fsync) instead of paying for one each.
//
// A writer can also pipeline its batches (NewPipelined with Options.Depth
// 2): it sends the next batch while the database is still committing the
// previous one, so that the database need not wait for the writer to
// collect, encode and send each batch, nor for the previous batch's callers
// to come back.
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

// SendFunc starts committing a batch and returns a function that waits for
// the outcome and sets each request's Out or Err. A writer calls the wait
// functions in the order it sent the batches, and may send up to
// Options.Depth batches before it waits for the first. ctx ends only when
// Close gives up waiting.
type SendFunc[In, Out any] func(ctx context.Context, batch []*Request[In, Out]) (wait func())

// Options configures a Queue; zero fields take defaults.
type Options struct {
	// MaxBatch caps requests per commit (default 1000).
	MaxBatch int
	// QueueSize bounds waiting requests (default 4*MaxBatch); Do blocks
	// while it is full.
	QueueSize int
	// Linger is how long a writer with no batch in flight waits for one
	// more request before it sends a batch, so that callers woken by the
	// previous commit can join this one instead of paying for a commit of
	// their own (0: take only what is already queued). A writer lingers
	// only after a batch of more than one request, so a lone caller never
	// waits.
	Linger time.Duration
	// MaxDelay caps the total lingering per batch (default 4*Linger).
	MaxDelay time.Duration
	// Depth is how many batches a writer of NewPipelined may have sent and
	// not yet waited for (default 1; New always uses 1). With more than
	// one, while a batch commits the writer collects the next one: it waits
	// for as many requests as the batch it last finished had (their callers
	// usually come back), but no longer than half the time the previous
	// batch took, so that the next batch is sent before the database runs
	// out of work.
	Depth int
}

// Queue batches requests for a CommitFunc or a SendFunc.
type Queue[In, Out any] struct {
	send     SendFunc[In, Out]
	depth    int
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

// New starts a writer goroutine that commits batches with commit, one at a
// time; Close stops it.
func New[In, Out any](commit CommitFunc[In, Out], opt Options) *Queue[In, Out] {
	opt.Depth = 1
	return NewPipelined(func(ctx context.Context, batch []*Request[In, Out]) func() {
		commit(ctx, batch)
		return func() {}
	}, opt)
}

// NewPipelined starts a writer goroutine that sends up to opt.Depth batches
// ahead with send; Close stops it. Only that goroutine calls send and the
// wait functions, so they need no locking of their own.
func NewPipelined[In, Out any](send SendFunc[In, Out], opt Options) *Queue[In, Out] {
	if opt.Depth <= 0 {
		opt.Depth = 1
	}
	if opt.MaxBatch <= 0 {
		opt.MaxBatch = 1000
	}
	if opt.QueueSize <= 0 {
		opt.QueueSize = 4 * opt.MaxBatch
	}
	if opt.MaxDelay <= 0 {
		opt.MaxDelay = 4 * opt.Linger
	}
	q := &Queue[In, Out]{
		send:     send,
		depth:    opt.Depth,
		maxBatch: opt.MaxBatch,
		linger:   opt.Linger,
		maxDelay: opt.MaxDelay,
		reqs:     make(chan *Request[In, Out], opt.QueueSize),
	}
	q.ctx, q.cancel = context.WithCancel(context.Background())
	q.wg.Go(q.writer)
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
// the writer. After timeout it cancels the commit context, failing what is
// still in flight, and waits for the writer to return.
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

// flight is a batch sent and not yet waited for.
type flight[In, Out any] struct {
	batch []*Request[In, Out]
	wait  func()
	sent  time.Time
}

func (q *Queue[In, Out]) writer() {
	var (
		flights []flight[In, Out] // oldest first
		free    [][]*Request[In, Out]
		open    = true
		last    int           // size of the batch last finished
		credit  int           // its requests not collected again since
		service time.Duration // how long the batch last finished took to commit
		done    time.Time     // when it finished
		timer   *time.Timer
	)
	if q.linger > 0 || q.depth > 1 {
		timer = time.NewTimer(time.Hour)
		timer.Stop()
	}
	for open || len(flights) > 0 {
		if open && len(flights) < q.depth {
			var batch []*Request[In, Out]
			if n := len(free); n > 0 {
				batch, free = free[n-1], free[:n-1]
			} else {
				batch = make([]*Request[In, Out], 0, q.maxBatch)
			}
			if len(flights) == 0 {
				r, ok := <-q.reqs
				if !ok {
					open = false
					continue
				}
				batch = append(batch, r)
				open = q.collect(&batch, timer, last > 1)
			} else {
				// A batch is committing: collect the next one meanwhile,
				// but send it before the database runs out of work.
				open = q.gather(&batch, timer, credit, time.Now().Add(service/2))
			}
			if len(batch) > 0 {
				credit = max(credit-len(batch), 0)
				flights = append(flights, flight[In, Out]{batch: batch, wait: q.send(q.ctx, batch), sent: time.Now()})
				continue
			}
			free = append(free, batch)
		}
		f := flights[0]
		flights = flights[1:]
		f.wait()
		now := time.Now()
		// The database started on this batch when it was sent or when it
		// finished the previous one, whichever was later.
		start := f.sent
		if done.After(start) {
			start = done
		}
		service, done = now.Sub(start), now
		for _, r := range f.batch {
			close(r.done)
		}
		last, credit = len(f.batch), len(f.batch)
		clear(f.batch) // drop payload references until the slice is reused
		free = append(free, f.batch[:0])
	}
}

// gather adds queued requests to batch, up to maxBatch, and waits for more
// until it holds want of them or until deadline. It reports false if it saw
// the queue closed.
func (q *Queue[In, Out]) gather(batch *[]*Request[In, Out], timer *time.Timer, want int, deadline time.Time) bool {
	want = min(want, q.maxBatch)
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
		wait := time.Until(deadline)
		if len(*batch) >= want || wait <= 0 {
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
