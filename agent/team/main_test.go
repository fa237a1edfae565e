package team

import (
	"testing"

	"github.com/betcode-dev/betcode/shared/leakcheck"
)

// TestMain fails the run when goroutines of this package outlive the
// tests (the service starts none; this keeps it so).
func TestMain(m *testing.M) { leakcheck.Main(m, "betcode/agent/team") }
