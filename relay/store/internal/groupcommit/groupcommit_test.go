package groupcommit

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// recorder commits a batch by answering each request with its input times
// two, recording the batch sizes.
type recorder struct {
	mu      sync.Mutex
	batches []int
	block   chan struct{} // if non-nil, commit waits on it
	entered chan int      // if non-nil, receives each commit's batch size as it starts
}

func (r *recorder) commit(ctx context.Context, batch []*Request[int, int]) {
	if r.entered != nil {
		select {
		case r.entered <- len(batch):
		default:
		}
	}
	if r.block != nil {
		select {
		case <-r.block:
		case <-ctx.Done():
			for _, q := range batch {
				q.Err = ctx.Err()
			}
			return
		}
	}
	r.mu.Lock()
	r.batches = append(r.batches, len(batch))
	r.mu.Unlock()
	for _, q := range batch {
		q.Out = q.In * 2
	}
}

func TestBatching(t *testing.T) {
	r := &recorder{block: make(chan struct{}), entered: make(chan int, 1)}
	q := New(r.commit, Options{MaxBatch: 8})
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			out, err := q.Do(t.Context(), i)
			if err != nil || out != 2*i {
				t.Errorf("Do(%d) = %d, %v", i, out, err)
			}
		})
	}
	// Wait until all 20 are in the blocked first batch or queued behind it.
	first := <-r.entered
	deadline := time.Now().Add(10 * time.Second)
	for len(q.reqs) < 20-first {
		if time.Now().After(deadline) {
			t.Fatalf("only %d requests queued", len(q.reqs))
		}
		runtime.Gosched()
	}
	close(r.block)
	wg.Wait()
	q.Close(time.Second)
	total := 0
	for _, n := range r.batches {
		if n > 8 {
			t.Errorf("batch of %d > MaxBatch", n)
		}
		total += n
	}
	if total != 20 || len(r.batches) > 4 {
		t.Errorf("batches %v: want 20 requests in at most 4 batches", r.batches)
	}
	if _, err := q.Do(t.Context(), 1); !errors.Is(err, ErrClosed) {
		t.Errorf("Do after Close = %v; want ErrClosed", err)
	}
}

func TestCloseDrainsThenForces(t *testing.T) {
	r := &recorder{block: make(chan struct{}), entered: make(chan int, 1)}
	q := New(r.commit, Options{})
	errc := make(chan error, 1)
	go func() { _, err := q.Do(context.Background(), 1); errc <- err }()
	<-r.entered // the commit is in flight
	start := time.Now()
	q.Close(50 * time.Millisecond) // the commit never finishes by itself
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("in-flight Do after forced Close = %v; want context.Canceled", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("Close took %v", d)
	}
}

func TestDoContext(t *testing.T) {
	r := &recorder{block: make(chan struct{})}
	q := New(r.commit, Options{})
	defer q.Close(time.Second)
	defer close(r.block)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := q.Do(ctx, 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Do with an expiring context = %v", err)
	}
}

func TestLinger(t *testing.T) {
	r := &recorder{}
	q := New(r.commit, Options{Linger: 20 * time.Millisecond})
	defer q.Close(time.Second)
	// A lone caller does not wait for the linger.
	start := time.Now()
	if _, err := q.Do(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 15*time.Millisecond {
		t.Errorf("lone Do took %v; want no linger", d)
	}
}

// pipe is a SendFunc that answers each request with its input times two
// and logs "send <first input>" and "wait <first input>" per batch.
type pipe struct {
	mu          sync.Mutex
	events      []string
	inflight    int
	maxInflight int
	onSend      func(batch []*Request[int, int]) // if non-nil, called by send
	block       chan struct{}                    // if non-nil, waits wait on it
}

func (p *pipe) send(ctx context.Context, batch []*Request[int, int]) func() {
	p.mu.Lock()
	p.events = append(p.events, fmt.Sprintf("send %d", batch[0].In))
	p.inflight++
	p.maxInflight = max(p.maxInflight, p.inflight)
	p.mu.Unlock()
	if p.onSend != nil {
		p.onSend(batch)
	}
	return func() {
		var err error
		if p.block != nil {
			select {
			case <-p.block:
			case <-ctx.Done():
				err = ctx.Err()
			}
		}
		p.mu.Lock()
		p.events = append(p.events, fmt.Sprintf("wait %d", batch[0].In))
		p.inflight--
		p.mu.Unlock()
		for _, r := range batch {
			r.Out, r.Err = r.In*2, err
		}
	}
}

// waitUntil waits until cond holds, for at most 10 seconds; it reports
// whether cond held. It may run on any goroutine.
func waitUntil(cond func() bool) bool {
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		runtime.Gosched()
	}
	return true
}

// inFlight reports how many batches p has sent and not finished waiting for.
func (p *pipe) inFlight() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.inflight
}

// TestPipelineOverlap: with Depth 2 the writer sends the next batch before
// it waits for the previous one, and waits in send order.
func TestPipelineOverlap(t *testing.T) {
	p := &pipe{}
	var q *Queue[int, int]
	entered := make(chan struct{})
	p.onSend = func(batch []*Request[int, int]) {
		if batch[0].In == 1 {
			close(entered)
			if !waitUntil(func() bool { return len(q.reqs) == 1 }) { // the second request
				t.Error("the second request never queued")
			}
		}
	}
	q = NewPipelined(p.send, Options{Depth: 2})
	defer q.Close(time.Second)
	var wg sync.WaitGroup
	do := func(in int) {
		if out, err := q.Do(t.Context(), in); err != nil || out != 2*in {
			t.Errorf("Do(%d) = %d, %v", in, out, err)
		}
	}
	wg.Go(func() { do(1) })
	<-entered
	wg.Go(func() { do(2) })
	wg.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	if want := []string{"send 1", "send 2", "wait 1", "wait 2"}; !slices.Equal(p.events, want) {
		t.Errorf("events %q; want %q", p.events, want)
	}
}

// TestPipelineLoad: many callers; at most Depth batches in flight, waited
// for in send order, every request answered.
func TestPipelineLoad(t *testing.T) {
	p := &pipe{}
	q := NewPipelined(p.send, Options{Depth: 2, MaxBatch: 16})
	var wg sync.WaitGroup
	for g := range 40 {
		wg.Go(func() {
			for i := range 50 {
				in := g*1000 + i
				if out, err := q.Do(t.Context(), in); err != nil || out != 2*in {
					t.Errorf("Do(%d) = %d, %v", in, out, err)
					return
				}
			}
		})
	}
	wg.Wait()
	q.Close(time.Second)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.maxInflight > 2 {
		t.Errorf("%d batches in flight; Depth is 2", p.maxInflight)
	}
	var sends, waits []string
	for _, e := range p.events {
		if s, ok := strings.CutPrefix(e, "send "); ok {
			sends = append(sends, s)
		} else {
			waits = append(waits, strings.TrimPrefix(e, "wait "))
		}
	}
	if !slices.Equal(sends, waits) {
		t.Errorf("batches waited for in another order than sent:\nsent   %v\nwaited %v", sends, waits)
	}
}

// TestPipelineClose: Close commits the batches in flight and those queued.
func TestPipelineClose(t *testing.T) {
	p := &pipe{block: make(chan struct{})}
	q := NewPipelined(p.send, Options{Depth: 2})
	var wg sync.WaitGroup
	var answered, refused atomic.Int64
	for i := range 30 {
		wg.Go(func() {
			out, err := q.Do(context.Background(), i)
			switch {
			case errors.Is(err, ErrClosed):
				refused.Add(1)
			case err != nil || out != 2*i:
				t.Errorf("Do(%d) = %d, %v", i, out, err)
			default:
				answered.Add(1)
			}
		})
	}
	if !waitUntil(func() bool { return p.inFlight() > 0 }) {
		t.Fatal("no batch sent")
	}
	closed := make(chan struct{})
	go func() { q.Close(10 * time.Second); close(closed) }()
	close(p.block)
	<-closed
	wg.Wait()
	if answered.Load() == 0 || answered.Load()+refused.Load() != 30 {
		t.Errorf("%d answered, %d refused; want 30 in all, some answered", answered.Load(), refused.Load())
	}
}

// TestPipelineForcedClose: when Close gives up, the batches in flight see
// the commit context end.
func TestPipelineForcedClose(t *testing.T) {
	p := &pipe{block: make(chan struct{})}
	var q *Queue[int, int]
	entered := make(chan struct{})
	p.onSend = func(batch []*Request[int, int]) {
		if batch[0].In == 1 {
			close(entered)
			if !waitUntil(func() bool { return len(q.reqs) == 1 }) {
				t.Error("the second request never queued")
			}
		}
	}
	q = NewPipelined(p.send, Options{Depth: 2})
	errs := make(chan error, 2)
	go func() { _, err := q.Do(context.Background(), 1); errs <- err }()
	<-entered
	go func() { _, err := q.Do(context.Background(), 2); errs <- err }()
	if !waitUntil(func() bool { return p.inFlight() == 2 }) {
		t.Fatal("the second batch was not sent")
	}
	q.Close(50 * time.Millisecond) // the commits never finish by themselves
	for range 2 {
		if err := <-errs; !errors.Is(err, context.Canceled) {
			t.Errorf("in-flight Do after forced Close = %v; want context.Canceled", err)
		}
	}
	if p.maxInflight != 2 {
		t.Errorf("%d batches were in flight; want 2", p.maxInflight)
	}
}
