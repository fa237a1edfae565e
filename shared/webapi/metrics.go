package webapi

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the handler's Prometheus metrics.
type metrics struct {
	sockets  prometheus.Gauge
	requests *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		sockets: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "betcode_web_websockets_open", Help: "WebSockets of the web API open now.",
		}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "betcode_web_requests_total", Help: "Web API requests by route pattern and HTTP status.",
		}, []string{"route", "status"}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.sockets, m.requests} {
		if err := reg.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				return nil, err
			}
		}
	}
	return m, nil
}

// statusWriter records the status of a response.
type statusWriter struct {
	http.ResponseWriter
	status int
}

// WriteHeader records the status.
func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

// Write records an implicit 200.
func (w *statusWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController (and the WebSocket's hijack) reach
// the underlying writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// instrument counts the requests of one route.
func (h *Handler) instrument(route string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r)
		st := sw.status
		if st == 0 {
			st = http.StatusOK
		}
		h.metrics.requests.WithLabelValues(route, strconv.Itoa(st)).Inc()
	})
}
