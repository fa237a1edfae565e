package subagent

import (
	"testing"

	"github.com/betcode-dev/betcode/shared/leakcheck"
)

// TestMain fails the run when goroutines of this package (an orchestration's run loop, a step)
// outlive the tests.
func TestMain(m *testing.M) { leakcheck.Main(m, "betcode/agent/subagent") }
