package channelsvc_test

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestMain fails the run when a web channel's goroutine outlives the
// tests: every one must end with its channel.
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if leak := leakedGoroutines(5 * time.Second); leak != "" {
			fmt.Fprintf(os.Stderr, "goroutines leaked:\n%s\n", leak)
			code = 1
		}
	}
	os.Exit(code)
}

// leakedGoroutines waits up to d for the web channels' goroutines to end
// and returns the stacks of those left.
func leakedGoroutines(d time.Duration) string {
	deadline := time.Now().Add(d)
	for {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		var leaked []string
		for _, g := range strings.Split(string(buf), "\n\n") {
			if strings.Contains(g, "agent/channelsvc.(*webChannel)") || strings.Contains(g, "agent/channelsvc.(*eventSocket)") ||
				strings.Contains(g, "agent/channelsvc.(*Service).serveWeb") {
				leaked = append(leaked, g)
			}
		}
		if len(leaked) == 0 || time.Now().After(deadline) {
			return strings.Join(leaked, "\n\n")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
