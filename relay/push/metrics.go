package push

import "github.com/prometheus/client_golang/prometheus"

// Outcomes of one send (betcode_relay_push_sends_total's outcome label).
const (
	OutcomeSent = "sent"
	// OutcomeSuppressed: already sent for this key (another replica, a
	// reconnected watcher) or the subscription does not want this kind.
	OutcomeSuppressed = "suppressed"
	// OutcomeNoSubscription: a recipient has no live subscription
	// (counted once per recipient and notification).
	OutcomeNoSubscription = "no_subscription"
	OutcomeFailed         = "failed"
	// OutcomeExpired: the push service answered 404 or 410; the
	// subscription is marked expired and never sent to again.
	OutcomeExpired = "expired"
)

// metrics are the package's metrics; every method is a no-op without a
// Registerer.
type metrics struct {
	sends    *prometheus.CounterVec
	watchers prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		sends: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "betcode_relay_push_sends_total",
			Help: "Web Push sends by notification kind (permission_request, question, turn_complete, turn_failed, resolved, test, relayed) and outcome (sent, suppressed, no_subscription, failed, expired).",
		}, []string{"kind", "outcome"}),
		watchers: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "betcode_relay_push_watched_machines",
			Help: "Connected machines whose sessions this replica watches for notifications.",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.sends, m.watchers)
	}
	return m
}

func (m *metrics) send(kind, outcome string) { m.sends.WithLabelValues(kind, outcome).Inc() }
