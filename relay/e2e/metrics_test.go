package e2e

import (
	"regexp"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/promtest"
)

// TestMetricsMoveAndPassPromtool scrapes a relay started with
// --metrics-listen: promtool finds nothing to report, and a forwarded call,
// a refused one, a tunnel and its heartbeats show in the series.
func TestMetricsMoveAndPassPromtool(t *testing.T) {
	promtest.Promtool(t) // skip (or, under CI, fail) before starting anything
	w := newWorldOf(t, &world{t: t, pki: t.TempDir(), dataDir: t.TempDir(), extraArgs: []string{"--metrics-listen", "127.0.0.1:0"}})
	m := regexp.MustCompile(`relay metrics.* addr=(\S+)`).FindStringSubmatch(w.relay.Log())
	if m == nil {
		t.Fatalf("the relay logged no metrics address:\n%s", w.relay.Log())
	}
	url := "http://" + m[1] + "/metrics"
	a := w.startAgent("m1", w.addr)
	ctx := ctxT(t, 60*time.Second)
	alice := pb.NewAgentServiceClient(w.client())
	if _, err := alice.ListSessions(onMachine(ctx, "m1"), &pb.ListSessionsRequest{}); err != nil {
		t.Fatal(err)
	}
	err := w.client().Invoke(onMachine(ctx, "m1"), "/betcode.v1.AgentService/NoSuchMethod", &pb.ListSessionsRequest{}, &pb.ListSessionsResponse{})
	wantCode(t, "unknown method", err, codes.Unimplemented, "")

	// The call brought the agent's direct connection.
	w.relay.waitLine(t, `calls now go over the machine's direct connection" machine_id=m1`, 30*time.Second)
	// Heartbeats come every second (the harness's --heartbeat-interval);
	// the relay has counted one once the agent has its answer.
	a.proc.waitLine(t, `relay heartbeat acknowledged`, 10*time.Second)
	text := promtest.Scrape(t, url)
	promtest.CheckMetrics(t, text)

	tests := []struct {
		name   string
		metric string
		labels []string
		min    float64
	}{
		{"forwarded call with its code", "betcode_relay_forwarded_calls_total", []string{"service", "betcode.v1.AgentService", "method", "ListSessions", "code", "OK"}, 1},
		{"unknown method as other", "betcode_relay_forwarded_calls_total", []string{"service", "other", "method", "other", "code", "Unimplemented"}, 1},
		{"call latency", "betcode_relay_forwarded_call_duration_seconds_count", []string{"method", "ListSessions"}, 1},
		{"request bytes", "betcode_relay_tunnel_bytes_total", []string{"direction", "to_machine"}, 1},
		{"response bytes", "betcode_relay_tunnel_bytes_total", []string{"direction", "from_machine"}, 1},
		{"registration", "betcode_relay_registrations_total", []string{"outcome", "accepted"}, 1},
		{"tunnel", "betcode_relay_tunnels_opened_total", nil, 1},
		{"connected", "betcode_relay_connected_machines", nil, 1},
		{"heartbeat lag", "betcode_relay_heartbeat_lag_seconds_count", nil, 1},
		{"buffer readable", "betcode_relay_buffer_stats_up", nil, 1},
		{"direct connection", "betcode_relay_direct_connections_total", []string{"outcome", "accepted"}, 1},
		{"go collector", "go_goroutines", nil, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v, ok := promtest.Value(text, tc.metric, tc.labels...)
			if !ok || v < tc.min {
				t.Errorf("%s%v = %v (found %v), want at least %v", tc.metric, tc.labels, v, ok, tc.min)
			}
		})
	}
	if v, _ := promtest.Value(text, "betcode_relay_open_streams"); v != 0 {
		t.Errorf("open streams after every call ended = %v, want 0", v)
	}
	for _, class := range []string{"connected", "offline"} {
		if v, ok := promtest.Value(text, "betcode_relay_buffer_messages", "machine_class", class); !ok || v != 0 {
			t.Errorf("buffer messages of %s machines = %v (found %v), want 0", class, v, ok)
		}
	}
}
