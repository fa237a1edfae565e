package openaiapi

import (
	"testing"

	"github.com/betcode-dev/betcode/shared/leakcheck"
)

// TestMain fails the run when goroutines of this package (a turn loop, a command, a stream watchdog)
// outlive the tests.
func TestMain(m *testing.M) { leakcheck.Main(m, "betcode/agent/openaiapi") }
