package channelsvc_test

import (
	"testing"
	"time"

	"github.com/betcode-dev/betcode/shared/leakcheck"
)

// TestMain fails the run when a web channel's goroutine outlives the
// tests: every one must end with its channel.
func TestMain(m *testing.M) {
	leakcheck.MainMatching(m, 5*time.Second,
		"agent/channelsvc.(*webChannel)", "agent/channelsvc.(*eventSocket)", "agent/channelsvc.(*Service).serveWeb")
}
