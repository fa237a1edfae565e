package eventlog

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the event log's Prometheus metrics. A nil *Metrics records
// nothing.
type Metrics struct {
	// Persisted counts events committed to the log.
	Persisted prometheus.Counter
	// Commits is how long each group commit (one transaction) took.
	Commits prometheus.Histogram
	// Failed counts commits that failed (the log then turns read-only).
	Failed prometheus.Counter
}

// NewMetrics registers the event log's metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Persisted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "betcode_agent_events_persisted_total", Help: "Session events committed to the event log.",
		}),
		Commits: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "betcode_agent_event_commit_duration_seconds", Help: "Duration of one group commit of the event log (one transaction of one or more events).",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, 1},
		}),
		Failed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "betcode_agent_event_commit_failures_total", Help: "Event log commits that failed (the log is read-only after one).",
		}),
	}
	reg.MustRegister(m.Persisted, m.Commits, m.Failed)
	return m
}
