package push

import "github.com/prometheus/client_golang/prometheus"

// Outcomes of a send (betcode_agent_push_sends_total's outcome label).
const (
	// OutcomeSent: the push service took the message (2xx).
	OutcomeSent = "sent"
	// OutcomeRetried: one attempt the relay or the push service could not
	// take now (unavailable, 429, 5xx, a network error), tried again.
	OutcomeRetried = "retried"
	// OutcomeFailed: given up (refused, out of retries, or the queue was
	// full).
	OutcomeFailed = "failed"
	// OutcomeGone: the push service answered 404 or 410; the subscription
	// was dropped.
	OutcomeGone = "gone"
)

// metrics are the notifier's counters; a nil Registerer leaves them
// unregistered (they still count).
type metrics struct {
	sends *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{sends: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "betcode_agent_push_sends_total",
		Help: "Web Push messages the machine sent to its paired devices through the relay, by kind (permission_request, question, turn_complete, turn_failed, resolved) and outcome (sent, retried, failed, gone).",
	}, []string{"kind", "outcome"})}
	if reg != nil {
		if err := reg.Register(m.sends); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *metrics) add(kind, outcome string) { m.sends.WithLabelValues(kind, outcome).Inc() }
