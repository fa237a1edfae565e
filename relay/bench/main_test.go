package bench

import (
	"os"
	"testing"

	"github.com/betcode-dev/betcode/relay/internal/pgtest"
)

// TestMain doubles as the benchmark agent's process (see agentMain) and as
// the idle case's fleet of agents (see fleetMain) and as the floor paths'
// TCP proxy (see l4Main) and HTTP/2 hop (see h2Main), and lets
// BETCODE_BENCH_STORE=postgres give the relay a fresh PostgreSQL schema
// (pgtest); the default store is SQLite in a temp dir.
func TestMain(m *testing.M) {
	if os.Getenv(agentModeEnv) == "1" {
		os.Exit(agentMain())
	}
	if os.Getenv(proxyModeEnv) == "1" {
		os.Exit(l4Main())
	}
	if os.Getenv(h2ModeEnv) == "1" {
		os.Exit(h2Main())
	}
	if os.Getenv(fleetModeEnv) == "1" {
		os.Exit(fleetMain())
	}
	pgtest.Main(m)
}
