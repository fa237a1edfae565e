package daemon

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/betcode-dev/betcode/agent/relaylink"
)

// newRegistry returns a registry with the Go and process collectors.
func newRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// registerTunnel adds the relay tunnel's state: 1 connected, 0 not (or no
// relay configured).
func registerTunnel(reg prometheus.Registerer, link *relaylink.Link) {
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "betcode_agent_tunnel_up", Help: "1 while the tunnel to the relay is connected, else 0 (also 0 with no relay configured).",
	}, func() float64 {
		if link == nil {
			return 0
		}
		if up, _ := link.Connected(); up {
			return 1
		}
		return 0
	}))
}

// metricsServer serves /metrics on its own listener.
type metricsServer struct {
	srv  *http.Server
	done chan struct{}
}

// serveMetrics serves reg's metrics at http://addr/metrics.
func serveMetrics(addr string, reg *prometheus.Registry, log *slog.Logger) (*metricsServer, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen for metrics on %s (--metrics-listen): %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	m := &metricsServer{srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		if err := m.srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("agent: metrics listener failed", "err", err)
		}
	}()
	log.Info("agent metrics", "addr", l.Addr().String())
	return m, nil
}

// close stops serving and waits for the server's goroutine.
func (m *metricsServer) close() {
	if m == nil {
		return
	}
	m.srv.Close()
	<-m.done
}
