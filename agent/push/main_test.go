package push

import (
	"testing"

	"github.com/betcode-dev/betcode/shared/leakcheck"
)

// TestMain fails the run when goroutines of this package (the notifier's
// watch, a send) outlive the tests.
func TestMain(m *testing.M) { leakcheck.Main(m, "betcode/agent/push") }
