package e2ee

import (
	"sync"
	"time"
)

// deadline is a settable point in time whose passing closes a channel, the
// way net.Pipe implements its deadlines.
type deadline struct {
	mu     sync.Mutex
	timer  *time.Timer
	passed chan struct{} // closed once the deadline has passed
}

func newDeadline() *deadline { return &deadline{passed: make(chan struct{})} }

// set moves the deadline to t; the zero t means none.
func (d *deadline) set(t time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.timer != nil && !d.timer.Stop() {
		<-d.passed // the timer fired: let its close finish
	}
	d.timer = nil
	passed := isClosed(d.passed)
	if t.IsZero() {
		if passed {
			d.passed = make(chan struct{})
		}
		return
	}
	if dur := time.Until(t); dur > 0 {
		if passed {
			d.passed = make(chan struct{})
		}
		ch := d.passed
		d.timer = time.AfterFunc(dur, func() { close(ch) })
		return
	}
	if !passed {
		close(d.passed)
	}
}

// wait returns a channel that is closed once the deadline passes.
func (d *deadline) wait() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.passed
}

// isClosed reports whether ch is closed; nothing is ever sent on it.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
