package webapi

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestMain fails the run when a goroutine of the package outlives the
// tests: every socket's goroutines must end with it.
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if leak := leakedGoroutines(2 * time.Second); leak != "" {
			fmt.Fprintf(os.Stderr, "goroutines leaked:\n%s\n", leak)
			code = 1
		}
	}
	os.Exit(code)
}

// leakedGoroutines waits up to d for the package's goroutines to end (they
// end asynchronously after the connections close) and returns the stacks
// of those left.
func leakedGoroutines(d time.Duration) string {
	deadline := time.Now().Add(d)
	for {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		var leaked []string
		for _, g := range strings.Split(string(buf), "\n\n") {
			if strings.Contains(g, "shared/webapi.(*socket)") || strings.Contains(g, "shared/webapi.(*Handler).serveWS") || strings.Contains(g, "shared/webapi.aside") ||
				strings.Contains(g, "shared/webapi.(*Handler).serveCarrier") || strings.Contains(g, "shared/webapi.(*Handler).runCarrier") {
				leaked = append(leaked, g)
			}
		}
		if len(leaked) == 0 || time.Now().After(deadline) {
			return strings.Join(leaked, "\n\n")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
