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
	"slices"
	"strings"
	"testing"
	"time"
)

// Main runs the tests of m and then, if they passed, fails the run when
// goroutines with code of package path (e.g. "betcode/agent/acp") are
// still running after a grace of five seconds for ones finishing up. Call
// it from TestMain; it exits.
func Main(m *testing.M, path string) { MainMatching(m, 5*time.Second, path+".") }

// MainMatching is Main for the goroutines whose stacks hold any of marks
// (e.g. "shared/webapi.(*socket)": the ones a package's tests must not
// leave behind, where others of the package may outlive them), with a
// grace of its own.
func MainMatching(m *testing.M, grace time.Duration, marks ...string) {
	code := m.Run()
	if code == 0 {
		if leaked := leakedMatching(grace, marks); leaked != "" {
			fmt.Fprintf(os.Stderr, "goroutines outlived the tests (%s):\n%s\n", strings.Join(marks, ", "), leaked)
			code = 1
		}
	}
	os.Exit(code)
}

// Leaked returns the stacks of the goroutines (other than the caller's)
// running code of package path, waiting up to grace for them to end; ""
// when none is left.
func Leaked(path string, grace time.Duration) string {
	return leakedMatching(grace, []string{path + "."})
}

// leakedMatching returns the stacks of the goroutines (other than the
// caller's) that hold any of marks, waiting up to grace for them to end;
// "" when none is left.
func leakedMatching(grace time.Duration, marks []string) string {
	var leaked []string
	deadline := time.Now().Add(grace)
	for {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		leaked = leaked[:0]
		for i, g := range strings.Split(string(buf), "\n\n") {
			if i > 0 && slices.ContainsFunc(marks, func(mark string) bool { return strings.Contains(g, mark) }) {
				leaked = append(leaked, g)
			}
		}
		if len(leaked) == 0 || time.Now().After(deadline) {
			return strings.Join(leaked, "\n\n")
		}
		time.Sleep(20 * time.Millisecond) // polling the runtime: nothing to wait on
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
