package leakcheck

import (
	"strings"
	"testing"
)

func park(stop <-chan struct{}) { <-stop }

// A goroutine running the package's code is reported while it runs and
// not once it has ended.
func TestLeaked(t *testing.T) {
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { park(stop); close(done) }()
	if got := Leaked("betcode/agent/internal/leakcheck", 0); !strings.Contains(got, "leakcheck.park") {
		t.Fatalf("a parked goroutine was not reported: %q", got)
	}
	close(stop)
	<-done
	if got := Leaked("betcode/agent/internal/leakcheck", 0); strings.Contains(got, "leakcheck.park") {
		t.Fatalf("an ended goroutine was reported: %q", got)
	}
}
