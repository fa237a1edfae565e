package e2e

import (
	"regexp"
	"testing"

	"github.com/betcode-dev/betcode/agent/internal/testenv"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/promtest"
)

// TestMetricsMoveAndPassPromtool scrapes an agent started with
// --metrics-listen after a turn whose CLI crashed: promtool finds nothing
// to report, and the CLI, event log and session series moved.
func TestMetricsMoveAndPassPromtool(t *testing.T) {
	promtest.Promtool(t) // skip (or, under CI, fail) before starting anything
	agent := testenv.StartAgent(t, testenv.AgentOptions{ClaudeBin: testenv.Binaries(t).FakeClaude, Args: []string{"--metrics-listen", "127.0.0.1:0"}})
	url := metricsURL(t, agent)
	ctx := ctxT(t)
	s := startConv(t, ctx, agent.API, &pb.StartConversation{WorkingDirectory: agent.ProjectDir(t)})
	say(t, s, "please CRASH")
	id := sessionID(t, until(t, s, isTurnComplete))
	if err := s.CloseSend(); err != nil {
		t.Fatal(err)
	}
	// A second client catching up from the log moves the replay series.
	r, err := agent.API.ResumeSession(ctx, &pb.ResumeSessionRequest{SessionId: id})
	if err != nil {
		t.Fatal(err)
	}
	if replayed := until(t, r, isTurnComplete); len(replayed) < 2 {
		t.Fatalf("replayed %d events; want the whole turn", len(replayed))
	}

	text := promtest.Scrape(t, url)
	promtest.CheckMetrics(t, text)
	tests := []struct {
		name   string
		metric string
		labels []string
		min    float64
	}{
		{"CLI started", "betcode_agent_cli_starts_total", nil, 1},
		{"CLI crashed", "betcode_agent_cli_crashes_total", nil, 1},
		{"events persisted", "betcode_agent_events_persisted_total", nil, 1},
		{"commits timed", "betcode_agent_event_commit_duration_seconds_count", nil, 1},
		{"live events' fan-out lag", "betcode_agent_fanout_lag_seconds_count", nil, 1},
		{"catch-up timed", "betcode_agent_replay_duration_seconds_count", nil, 1},
		{"events replayed", "betcode_agent_replayed_events_total", nil, 2},
		{"one session loaded", "betcode_agent_sessions", []string{"status", "idle"}, 1},
		{"go collector", "go_goroutines", nil, 1},
		{"process collector", "process_resident_memory_bytes", nil, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v, ok := promtest.Value(text, tc.metric, tc.labels...)
			if !ok || v < tc.min {
				t.Errorf("%s%v = %v (found %v), want at least %v", tc.metric, tc.labels, v, ok, tc.min)
			}
		})
	}
	if v, ok := promtest.Value(text, "betcode_agent_tunnel_up"); !ok || v != 0 {
		t.Errorf("tunnel up without a relay = %v (found %v), want 0", v, ok)
	}
}

// metricsURL is the /metrics URL of an agent started with --metrics-listen.
func metricsURL(t *testing.T, agent *testenv.Agent) string {
	t.Helper()
	m := regexp.MustCompile(`agent metrics.* addr=(\S+)`).FindStringSubmatch(agent.Log())
	if m == nil {
		t.Fatalf("the agent logged no metrics address:\n%s", agent.Log())
	}
	return "http://" + m[1] + "/metrics"
}

// TestPermissionMetrics: a request no rule decides counts as asked, and
// its expiry as a deny by timeout.
func TestPermissionMetrics(t *testing.T) {
	promtest.Promtool(t)
	api := testenv.FakeAPI(t)
	agent := testenv.StartAgent(t, testenv.AgentOptions{APIURL: api.URL(), Args: []string{"--permission-timeout", "1s", "--metrics-listen", "127.0.0.1:0"}})
	url := metricsURL(t, agent)
	ctx := ctxT(t)
	s := startConv(t, ctx, agent.API, &pb.StartConversation{WorkingDirectory: agent.ProjectDir(t)})
	say(t, s, runTool)
	waitForPermission(t, s)
	until(t, s, isTurnComplete)

	text := promtest.Scrape(t, url)
	promtest.CheckMetrics(t, text)
	for _, l := range [][]string{{"decision", "ask", "source", "rule"}, {"decision", "deny", "source", "timeout"}} {
		if v, ok := promtest.Value(text, "betcode_agent_permission_decisions_total", l...); !ok || v != 1 {
			t.Errorf("permission decisions %v = %v (found %v), want 1", l, v, ok)
		}
	}
}
