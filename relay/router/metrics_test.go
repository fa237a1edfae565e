package router

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/betcode-dev/betcode/relay/store"
)

// TestCallMetricsCodeAndBytes: a forwarded call is counted with the code
// of its answer's grpc-status (trailers, else headers), its method bounded
// to the API's, and the bytes through it.
func TestCallMetricsCodeAndBytes(t *testing.T) {
	tests := []struct {
		name            string
		path            string
		header          http.Header
		service, method string
		code            string
	}{
		{"trailer", "/betcode.v1.AgentService/ListSessions", http.Header{http.TrailerPrefix + "Grpc-Status": {"0"}}, "betcode.v1.AgentService", "ListSessions", "OK"},
		{"trailers-only", "/betcode.v1.AgentService/Converse", http.Header{"Grpc-Status": {"14"}}, "betcode.v1.AgentService", "Converse", "Unavailable"},
		{"trailer wins", "/betcode.v1.AgentService/Converse", http.Header{"Grpc-Status": {"0"}, http.TrailerPrefix + "Grpc-Status": {"5"}}, "betcode.v1.AgentService", "Converse", "NotFound"},
		{"no status: the client left", "/betcode.v1.AgentService/Converse", http.Header{}, "betcode.v1.AgentService", "Converse", "Canceled"},
		{"garbage status", "/betcode.v1.AgentService/Converse", http.Header{"Grpc-Status": {"x"}}, "betcode.v1.AgentService", "Converse", "Unknown"},
		{"status out of range", "/betcode.v1.AgentService/Converse", http.Header{"Grpc-Status": {"99"}}, "betcode.v1.AgentService", "Converse", "Unknown"},
		{"unknown method", "/betcode.v1.AgentService/NoSuch", http.Header{"Grpc-Status": {"12"}}, "other", "other", "Unimplemented"},
		{"unknown service", "/evil.Service/" + strings.Repeat("x", 200), http.Header{"Grpc-Status": {"12"}}, "other", "other", "Unimplemented"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := NewMetrics(prometheus.NewRegistry())
			r := httptest.NewRequest(http.MethodPost, tc.path, strings.NewReader("12345678"))
			rec := httptest.NewRecorder()
			call := m.call(tc.path, time.Now())
			if got := testutil.ToFloat64(m.OpenStreams); got != 1 {
				t.Errorf("open streams during the call = %v", got)
			}
			w := call.wrap(rec, r)
			if _, ok := w.(http.Flusher); !ok {
				t.Error("the wrapped writer lost http.Flusher")
			}
			if _, err := io.ReadAll(r.Body); err != nil {
				t.Fatal(err)
			}
			w.Write([]byte("abc"))
			for k, v := range tc.header {
				rec.Header()[k] = v
			}
			call.done(rec.Header())
			if got := testutil.ToFloat64(m.Forwarded.WithLabelValues(tc.service, tc.method, tc.code)); got != 1 {
				t.Errorf("forwarded{%s,%s,%s} = %v, want 1", tc.service, tc.method, tc.code, got)
			}
			if got := testutil.ToFloat64(m.OpenStreams); got != 0 {
				t.Errorf("open streams after the call = %v", got)
			}
			if in, out := testutil.ToFloat64(m.toMachine), testutil.ToFloat64(m.toUser); in != 8 || out != 3 {
				t.Errorf("bytes to machine, from machine = %v, %v; want 8, 3", in, out)
			}
		})
	}
}

// TestNilMetricsRecordNothing: a router without metrics wraps nothing.
func TestNilMetricsRecordNothing(t *testing.T) {
	var m *Metrics
	call := m.call("/betcode.v1.AgentService/Converse", time.Now())
	rec := httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodPost, "/x", strings.NewReader("x"))
	body := r.Body
	if w := call.wrap(rec, r); w != rec || r.Body != body {
		t.Error("nil metrics wrapped the call")
	}
	call.done(rec.Header())
}

// TestCallMetricsAllocations: the per-call cost is one allocation.
func TestCallMetricsAllocations(t *testing.T) {
	m := NewMetrics(prometheus.NewRegistry())
	r := httptest.NewRequest(http.MethodPost, "/betcode.v1.AgentService/Converse", strings.NewReader(""))
	h := http.Header{"Grpc-Status": {"0"}}
	rec := httptest.NewRecorder()
	n := testing.AllocsPerRun(100, func() {
		call := m.call("/betcode.v1.AgentService/Converse", time.Now())
		call.wrap(rec, r)
		call.done(h)
	})
	if n > 1 {
		t.Errorf("%v allocations per call; want 1", n)
	}
}

type bufferStats struct {
	connected, offline store.BufferStat
	liveSince          *time.Time
	err                error
}

func (b bufferStats) BufferStats(_ context.Context, _, liveSince time.Time) (store.BufferStat, store.BufferStat, error) {
	if b.liveSince != nil {
		*b.liveSince = liveSince
	}
	return b.connected, b.offline, b.err
}

// TestBufferCollector: depth and oldest age per machine class when the
// store answers; only stats_up 0 when it does not.
func TestBufferCollector(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	tests := []struct {
		name string
		st   bufferStats
		want string
	}{
		{"empty", bufferStats{}, `
betcode_relay_buffer_messages{machine_class="connected"} 0
betcode_relay_buffer_messages{machine_class="offline"} 0
betcode_relay_buffer_oldest_message_age_seconds{machine_class="connected"} 0
betcode_relay_buffer_oldest_message_age_seconds{machine_class="offline"} 0
betcode_relay_buffer_stats_up 1
`},
		{"waiting", bufferStats{
			connected: store.BufferStat{Messages: 2, Oldest: now.Add(-5 * time.Second)},
			offline:   store.BufferStat{Messages: 7, Oldest: now.Add(-90 * time.Second)},
		}, `
betcode_relay_buffer_messages{machine_class="connected"} 2
betcode_relay_buffer_messages{machine_class="offline"} 7
betcode_relay_buffer_oldest_message_age_seconds{machine_class="connected"} 5
betcode_relay_buffer_oldest_message_age_seconds{machine_class="offline"} 90
betcode_relay_buffer_stats_up 1
`},
		{"store down", bufferStats{err: errors.New("down")}, `
betcode_relay_buffer_stats_up 0
`},
	}
	help := map[string]string{
		"betcode_relay_buffer_messages":                   "Messages waiting in the offline buffer for their machines, by machine class (connected, offline); all replicas.",
		"betcode_relay_buffer_oldest_message_age_seconds": "Age of the oldest unexpired message in the offline buffer by machine class; 0 when there is none.",
		"betcode_relay_buffer_stats_up":                   "1 if the last scrape could read the buffer's statistics from the store, else 0.",
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var liveSince time.Time
			tc.st.liveSince = &liveSince
			c := NewBufferCollector(tc.st)
			c.Now = func() time.Time { return now }
			c.PresenceTTL = 15 * time.Second
			var b strings.Builder
			seen := map[string]bool{}
			for l := range strings.Lines(strings.TrimPrefix(tc.want, "\n")) {
				name, _, _ := strings.Cut(l, " ")
				name, _, _ = strings.Cut(name, "{")
				if !seen[name] {
					seen[name] = true
					b.WriteString("# HELP " + name + " " + help[name] + "\n# TYPE " + name + " gauge\n")
				}
				b.WriteString(l)
			}
			if err := testutil.CollectAndCompare(c, strings.NewReader(b.String())); err != nil {
				t.Error(err)
			}
			if want := now.Add(-15 * time.Second); !liveSince.Equal(want) {
				t.Errorf("collector asked for machines live since %v; want %v (now - PresenceTTL)", liveSince, want)
			}
		})
	}
}
