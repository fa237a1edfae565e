package claudecli

import (
	"os"
	"testing"
)

// Require returns the CLI path for a test or fails it with what to install.
// It never skips: a missing CLI must not turn end-to-end tests green.
func Require(t testing.TB) string {
	t.Helper()
	p, err := Path()
	if err == nil {
		return p
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%v\nCI must install the pinned CLI before the tests: add a step running scripts/install-claude.sh (needs Node.js and npm)", err)
	}
	t.Fatalf("%v\ninstall it once with `make claude` (or scripts/install-claude.sh), or point %s at a claude %s binary", err, BinEnv, Version)
	return ""
}
