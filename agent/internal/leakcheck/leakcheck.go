// Package leakcheck fails a package's test run when goroutines running
// the package's own code outlive its tests (a turn loop, a reader, a
// step that nobody stopped), as goleak does, without its dependency.
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
