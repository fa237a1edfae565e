package chaos

import (
	"fmt"
	"sort"
	"sync"
	"time"
)

// recorder collects the run's timeline: events received per second with
// their delivery latency, the faults as they happened, errors.
type recorder struct {
	start time.Time

	mu      sync.Mutex
	buckets map[int]*bucket
	faults  []FaultRecord
	errs    []string
	marks   map[string]int
}

type bucket struct {
	n    int
	lats []time.Duration
}

func newRecorder(start time.Time) *recorder {
	return &recorder{start: start, buckets: map[int]*bucket{}, marks: map[string]int{}}
}

func (r *recorder) event(at time.Time, lat time.Duration) {
	s := int(at.Sub(r.start) / time.Second)
	r.mu.Lock()
	defer r.mu.Unlock()
	b := r.buckets[s]
	if b == nil {
		b = &bucket{}
		r.buckets[s] = b
	}
	b.n++
	if len(b.lats) < 20000 {
		b.lats = append(b.lats, lat)
	}
}

func (r *recorder) errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, fmt.Sprintf("%7.2fs ", time.Since(r.start).Seconds())+fmt.Sprintf(format, args...))
}

func (r *recorder) mark(what string, _ int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.marks[what]++
}

func (r *recorder) fault(f FaultRecord) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.faults = append(r.faults, f)
}

// samples is the per-second timeline.
func (r *recorder) samples() []Sample {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Sample
	for s, b := range r.buckets {
		sort.Slice(b.lats, func(i, j int) bool { return b.lats[i] < b.lats[j] })
		sm := Sample{At: time.Duration(s) * time.Second, Events: b.n}
		if len(b.lats) > 0 {
			sm.P50 = b.lats[len(b.lats)/2]
			sm.P99 = b.lats[len(b.lats)*99/100]
		}
		out = append(out, sm)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].At < out[j].At })
	return out
}
