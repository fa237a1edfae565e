package webapi

import (
	"testing"
	"time"

	"github.com/betcode-dev/betcode/shared/leakcheck"
)

// TestMain fails the run when a goroutine of the package outlives the
// tests: every socket's goroutines must end with it (asynchronously,
// after the connections close).
func TestMain(m *testing.M) {
	leakcheck.MainMatching(m, 2*time.Second,
		"shared/webapi.(*socket)", "shared/webapi.(*Handler).serveWS", "shared/webapi.aside",
		"shared/webapi.(*Handler).serveCarrier", "shared/webapi.(*Handler).runCarrier")
}
