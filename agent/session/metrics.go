package session

import "github.com/prometheus/client_golang/prometheus"

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
	reg.MustRegister(m.CLIStarts, m.CLIRestarts, m.CLICrashes, m.SlowConsumerCuts, m.Permissions)
	return m
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
