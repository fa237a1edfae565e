package leakcheck

import (
	"strings"
	"testing"
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
	if got := Leaked("betcode/agent/internal/leakcheck", 0); !strings.Contains(got, "leakcheck.park") {
		t.Fatalf("a parked goroutine was not reported: %q", got)
	}
	close(stop)
	<-done
	if got := Leaked("betcode/agent/internal/leakcheck", 0); strings.Contains(got, "leakcheck.park") {
		t.Fatalf("an ended goroutine was reported: %q", got)
	}
}
