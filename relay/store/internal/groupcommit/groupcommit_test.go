package groupcommit

import (
	"context"
	"errors"
	"runtime"
	"sync"
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
