package e2e

import (
	"strings"
	"testing"

	"github.com/betcode-dev/betcode/agent/internal/testenv"
)

// TestDaemonStatus runs `betcode daemon status` against a real daemon: it
// reports each component serving, its uptime and version, and exits 0.
func TestDaemonStatus(t *testing.T) {
	api := testenv.FakeAPI(t)
	agent := testenv.StartAgent(t, testenv.AgentOptions{APIURL: api.URL()})
	out, errOut, code := runCLI(t, agent.Opts.Socket, "daemon", "status")
	if code != 0 {
		t.Fatalf("daemon status: exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	for _, want := range []string{"Daemon: SERVING\n", "  sqlite: SERVING", "  local_server: SERVING", "  subprocess_pool: SERVING", "Uptime: ", "Version: "} {
		if !strings.Contains(out, want) {
			t.Errorf("daemon status lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "degraded") {
		t.Errorf("a daemon without a relay reported itself degraded:\n%s", out)
	}
}
