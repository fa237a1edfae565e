package session

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// Metrics are the session manager's Prometheus metrics. A nil *Metrics
// records nothing.
type Metrics struct {
	// CLIStarts counts Claude CLI processes started; CLIRestarts those
	// started with --resume after a crash; CLICrashes the CLIs that
	// exited mid-turn.
	CLIStarts, CLIRestarts, CLICrashes prometheus.Counter
	// SlowConsumerCuts counts clients cut off for falling behind.
	SlowConsumerCuts prometheus.Counter
	// Permissions counts permission decisions by decision (allow, deny,
	// ask) and source (rule, session_grant, mode, user, timeout, cancelled).
	Permissions *prometheus.CounterVec
	// ReplayDuration observes how long a client's catch-up from the event
	// log took (events after its last sequence, up to the live ones);
	// ReplayedEvents counts the events it sent.
	ReplayDuration prometheus.Histogram
	ReplayedEvents prometheus.Counter
	// FanoutLag observes, per live event sent to a client, the time from
	// the event's creation (its timestamp) to the send.
	FanoutLag prometheus.Histogram
}

// NewMetrics registers the session manager's metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	}
	m := &Metrics{
		CLIStarts:        counter("betcode_agent_cli_starts_total", "Claude CLI processes started."),
		CLIRestarts:      counter("betcode_agent_cli_restarts_total", "Claude CLI processes restarted with --resume after a crash."),
		CLICrashes:       counter("betcode_agent_cli_crashes_total", "Claude CLI processes that exited (or hung and were stopped) mid-turn."),
		SlowConsumerCuts: counter("betcode_agent_slow_consumer_cuts_total", "Clients cut off because their live buffer filled (they resume from the log)."),
		Permissions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "betcode_agent_permission_decisions_total",
			Help: "Tool permission decisions by decision (allow, deny, ask) and source (rule, session_grant, mode, user, timeout, cancelled).",
		}, []string{"decision", "source"}),
	}
	m.ReplayDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "betcode_agent_replay_duration_seconds",
		Help:    "Time a client's catch-up from the event log took (resume or attach after its last sequence).",
		Buckets: []float64{.001, .005, .01, .05, .1, .5, 1, 5, 10, 30},
	})
	m.ReplayedEvents = counter("betcode_agent_replayed_events_total", "Events sent to clients from the event log (catch-up), not live.")
	m.FanoutLag = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "betcode_agent_fanout_lag_seconds",
		Help:    "Time from a live event's creation to its send to a client (persistence and queueing included).",
		Buckets: []float64{.0001, .0005, .001, .0025, .005, .01, .025, .05, .1, .5, 1},
	})
	reg.MustRegister(m.CLIStarts, m.CLIRestarts, m.CLICrashes, m.SlowConsumerCuts, m.Permissions, m.ReplayDuration, m.ReplayedEvents, m.FanoutLag)
	return m
}

// replayed records a catch-up of n events that took d.
func (m *Metrics) replayed(n int, d time.Duration) {
	if m == nil || n == 0 {
		return
	}
	m.ReplayDuration.Observe(d.Seconds())
	m.ReplayedEvents.Add(float64(n))
}

// sentLive records the fan-out lag of a live event sent at now.
func (m *Metrics) sentLive(ev *pb.AgentEvent, now time.Time) {
	if m == nil || ev.Timestamp == nil {
		return
	}
	if lag := now.Sub(ev.Timestamp.AsTime()); lag >= 0 {
		m.FanoutLag.Observe(lag.Seconds())
	}
}

func (m *Metrics) started(restart bool) {
	if m == nil {
		return
	}
	m.CLIStarts.Inc()
	if restart {
		m.CLIRestarts.Inc()
	}
}

func (m *Metrics) crashed() {
	if m != nil {
		m.CLICrashes.Inc()
	}
}

func (m *Metrics) cut() {
	if m != nil {
		m.SlowConsumerCuts.Inc()
	}
}

// decided counts a permission decision; labels outside the known sets
// count as "other" so that the series stay bounded.
func (m *Metrics) decided(decision, source string) {
	if m == nil {
		return
	}
	switch decision {
	case "allow", "deny", "ask":
	default:
		decision = "other"
	}
	switch source {
	case "rule", "session_grant", "mode", "user", "timeout", "cancelled":
	default:
		source = "other"
	}
	m.Permissions.WithLabelValues(decision, source).Inc()
}

// SessionCollector reports the loaded sessions by status and the CLI
// processes running, read from the manager when scraped.
type SessionCollector struct {
	mgr             *Manager
	sessions, procs *prometheus.Desc
}

// Collector returns a collector of m's sessions and processes.
func (m *Manager) Collector() *SessionCollector {
	return &SessionCollector{
		mgr:      m,
		sessions: prometheus.NewDesc("betcode_agent_sessions", "Sessions loaded in the agent, by status (active: a turn is running; idle).", []string{"status"}, nil),
		procs:    prometheus.NewDesc("betcode_agent_cli_processes", "Claude CLI processes running.", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *SessionCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.sessions
	ch <- c.procs
}

// Collect implements prometheus.Collector.
func (c *SessionCollector) Collect(ch chan<- prometheus.Metric) {
	c.mgr.mu.Lock()
	list := make([]*Session, 0, len(c.mgr.sessions))
	for _, s := range c.mgr.sessions {
		list = append(list, s)
	}
	running := c.mgr.running
	c.mgr.mu.Unlock()
	active := 0
	for _, s := range list {
		s.mu.Lock()
		if s.meta.Status == StatusActive {
			active++
		}
		s.mu.Unlock()
	}
	ch <- prometheus.MustNewConstMetric(c.sessions, prometheus.GaugeValue, float64(active), StatusActive)
	ch <- prometheus.MustNewConstMetric(c.sessions, prometheus.GaugeValue, float64(len(list)-active), StatusIdle)
	ch <- prometheus.MustNewConstMetric(c.procs, prometheus.GaugeValue, float64(running))
}
