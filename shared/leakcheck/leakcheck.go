// Package leakcheck fails tests whose goroutines outlive them: a
// package's whole run (Main: goroutines running the package's own code,
// a turn loop, a reader, a step that nobody stopped, as goleak does,
// without its dependency), or one test (Goroutines: the process's count
// back to where it was).
package leakcheck

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// Main runs the tests of m and then, if they passed, fails the run when
// goroutines with code of package path (e.g. "betcode/agent/acp") are
// still running after a grace of five seconds for ones finishing up. Call
// it from TestMain; it exits.
func Main(m *testing.M, path string) {
	code := m.Run()
	if code == 0 {
		if leaked := Leaked(path, 5*time.Second); leaked != "" {
			fmt.Fprintf(os.Stderr, "goroutines of %s outlived the tests:\n%s\n", path, leaked)
			code = 1
		}
	}
	os.Exit(code)
}

// Leaked returns the stacks of the goroutines (other than the caller's)
// running code of package path, waiting up to grace for them to end; ""
// when none is left.
func Leaked(path string, grace time.Duration) string {
	var leaked []string
	deadline := time.Now().Add(grace)
	for {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		leaked = leaked[:0]
		for i, g := range strings.Split(string(buf), "\n\n") {
			if i > 0 && strings.Contains(g, path+".") {
				leaked = append(leaked, g)
			}
		}
		if len(leaked) == 0 || time.Now().After(deadline) {
			return strings.Join(leaked, "\n\n")
		}
		time.Sleep(50 * time.Millisecond) // polling the runtime: nothing to wait on
	}
}

// Goroutines fails t if, at its cleanup, the process runs more goroutines
// than at the call, after up to ten seconds for ones finishing up, and
// prints every goroutine's stack. Call it first in the test so that its
// cleanup runs last. Tests that use it must not run in parallel.
func Goroutines(t testing.TB) {
	t.Helper()
	goroutines(t, 10*time.Second)
}

// goroutines is Goroutines with a grace of its own.
func goroutines(t testing.TB, grace time.Duration) {
	t.Helper()
	base := runtime.NumGoroutine()
	t.Cleanup(func() {
		// Nothing announces a goroutine's end: the count is checked on a
		// ticker, up to a deadline.
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		deadline := time.After(grace)
		for runtime.NumGoroutine() > base {
			select {
			case <-tick.C:
			case <-deadline:
				buf := make([]byte, 1<<20)
				n := runtime.Stack(buf, true)
				t.Errorf("goroutines: %d at the start of the test, %d at its end:\n%s", base, runtime.NumGoroutine(), buf[:n])
				return
			}
		}
	})
}
