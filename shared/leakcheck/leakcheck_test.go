package leakcheck

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// park tells started that it is running, then waits for stop.
func park(started chan<- struct{}, stop <-chan struct{}) {
	close(started)
	<-stop
}

// A goroutine running the package's code is reported while it runs and
// not once it has ended.
func TestLeaked(t *testing.T) {
	started := make(chan struct{})
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { park(started, stop); close(done) }()
	<-started // the goroutine is inside park from here until stop closes
	if got := Leaked("betcode/shared/leakcheck", 0); !strings.Contains(got, "leakcheck.park") {
		t.Fatalf("a parked goroutine was not reported: %q", got)
	}
	close(stop)
	<-done
	if got := Leaked("betcode/shared/leakcheck", 0); strings.Contains(got, "leakcheck.park") {
		t.Fatalf("an ended goroutine was reported: %q", got)
	}
}

// recorder is a testing.TB that keeps what a check reports and runs its
// cleanups when asked.
type recorder struct {
	testing.TB
	errs     []string
	cleanups []func()
}

func (r *recorder) Helper()          {}
func (r *recorder) Cleanup(f func()) { r.cleanups = append(r.cleanups, f) }
func (r *recorder) Errorf(format string, a ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, a...))
}
func (r *recorder) end() {
	for i := len(r.cleanups) - 1; i >= 0; i-- {
		r.cleanups[i]()
	}
}

// A test that leaves a goroutine running fails, with the goroutine's
// stack; one whose goroutines have ended by its cleanup passes.
func TestGoroutines(t *testing.T) {
	t.Run("left running", func(t *testing.T) {
		r := &recorder{TB: t}
		goroutines(r, 100*time.Millisecond)
		// Several, so that goroutines of earlier tests still ending
		// (the check counts) cannot hide them: one alone was missed
		// once in CI.
		const n = 32
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for range n {
			started := make(chan struct{})
			wg.Go(func() { park(started, stop) })
			<-started
		}
		r.end()
		close(stop)
		wg.Wait()
		if len(r.errs) != 1 || !strings.Contains(r.errs[0], "leakcheck.park") {
			t.Fatalf("a goroutine left running was reported as %q", r.errs)
		}
	})
	t.Run("ended", func(t *testing.T) {
		r := &recorder{TB: t}
		Goroutines(r)
		started, stop := make(chan struct{}), make(chan struct{})
		done := make(chan struct{})
		go func() { park(started, stop); close(done) }()
		<-started
		close(stop)
		<-done
		r.end()
		if len(r.errs) != 0 {
			t.Fatalf("an ended goroutine was reported: %q", r.errs)
		}
	})
}
