package codex

import (
	"os"
	"testing"
)

// requireCodex returns the pinned Codex binary or fails the test with what
// to install. It never skips: a missing CLI must not turn these tests green.
func requireCodex(t testing.TB) string {
	t.Helper()
	p, err := FindBinary()
	if err == nil {
		return p
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%v\nCI must install the pinned Codex before the tests: run make codex (scripts/install-codex.sh; needs Node.js and npm)", err)
	}
	t.Fatalf("%v\ninstall it once with `make codex` (or scripts/install-codex.sh), or point %s at a codex %s binary", err, BinaryEnv, PinnedVersion)
	return ""
}
