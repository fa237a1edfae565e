package tunnelsvc

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are TunnelService's Prometheus metrics. A nil *Metrics records
// nothing.
type Metrics struct {
	// Registrations counts Register calls by outcome: accepted, refused
	// (revoked, wrong owner, not enrolled, no certificate) or error.
	Registrations *prometheus.CounterVec
	// TunnelsOpened counts tunnels that came up on this replica;
	// Reconnects those of a machine that had one here before.
	TunnelsOpened prometheus.Counter
	Reconnects    prometheus.Counter
	// HeartbeatLag is now minus the heartbeat's sent_at: network delay
	// plus clock skew between the agent and the relay.
	HeartbeatLag prometheus.Histogram

	accepted, refused, failed prometheus.Counter
	seen                      sync.Map // machine id -> struct{}: had a tunnel on this replica
}

// NewMetrics registers TunnelService's metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Registrations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "betcode_relay_registrations_total", Help: "Machine Register calls, by outcome: accepted, refused or error.",
		}, []string{"outcome"}),
		TunnelsOpened: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "betcode_relay_tunnels_opened_total", Help: "Machine tunnels that came up on this replica.",
		}),
		Reconnects: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "betcode_relay_tunnel_reconnects_total", Help: "Tunnels opened by a machine that had one on this replica before (since the replica started).",
		}),
		HeartbeatLag: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "betcode_relay_heartbeat_lag_seconds", Help: "Time from an agent sending a heartbeat (its clock) to the relay receiving it (the relay's clock).",
			Buckets: []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}),
	}
	reg.MustRegister(m.Registrations, m.TunnelsOpened, m.Reconnects, m.HeartbeatLag)
	m.accepted = m.Registrations.WithLabelValues("accepted")
	m.refused = m.Registrations.WithLabelValues("refused")
	m.failed = m.Registrations.WithLabelValues("error")
	return m
}

// registered counts a Register call that ended with err.
func (m *Metrics) registered(err error, refused bool) {
	switch {
	case m == nil:
	case err == nil:
		m.accepted.Inc()
	case refused:
		m.refused.Inc()
	default:
		m.failed.Inc()
	}
}

func (m *Metrics) opened(machineID string) {
	if m == nil {
		return
	}
	m.TunnelsOpened.Inc()
	if _, again := m.seen.LoadOrStore(machineID, struct{}{}); again {
		m.Reconnects.Inc()
	}
}

func (m *Metrics) heartbeat(lag time.Duration) {
	if m != nil {
		m.HeartbeatLag.Observe(max(lag, 0).Seconds())
	}
}
