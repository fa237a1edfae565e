package router

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the router's Prometheus metrics. A nil *Metrics records
// nothing.
type Metrics struct {
	Forwarded *prometheus.CounterVec
	Offline   prometheus.Counter
	Buffered  prometheus.Counter
	Delivered prometheus.Counter
	// ToPeer counts calls handed to the replica holding the tunnel.
	ToPeer prometheus.Counter
}

// NewMetrics registers the router's metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Forwarded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "betcode_relay_forwarded_calls_total", Help: "Client calls forwarded to a machine, by service.",
		}, []string{"service"}),
		Offline: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "betcode_relay_offline_calls_total", Help: "Calls refused because their machine was offline.",
		}),
		Buffered: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "betcode_relay_buffered_messages_total", Help: "Requests stored for offline machines.",
		}),
		Delivered: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "betcode_relay_delivered_messages_total", Help: "Buffered requests delivered after reconnection.",
		}),
		ToPeer: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "betcode_relay_peer_forwarded_calls_total", Help: "Client calls handed to the relay replica that holds the machine's tunnel.",
		}),
	}
	reg.MustRegister(m.Forwarded, m.Offline, m.Buffered, m.Delivered, m.ToPeer)
	return m
}

func (m *Metrics) forwarded(service string) {
	if m != nil {
		m.Forwarded.WithLabelValues(service).Inc()
	}
}

func (m *Metrics) offline() {
	if m != nil {
		m.Offline.Inc()
	}
}

func (m *Metrics) buffered() {
	if m != nil {
		m.Buffered.Inc()
	}
}

func (m *Metrics) delivered() {
	if m != nil {
		m.Delivered.Inc()
	}
}

func (m *Metrics) toPeer() {
	if m != nil {
		m.ToPeer.Inc()
	}
}
