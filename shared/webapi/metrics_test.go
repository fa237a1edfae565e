package webapi

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	ts := newTestServer(t, Options{Registerer: reg})
	ts.call(t, "GET", "/api/health", "", nil)
	ts.call(t, "GET", "/api/sessions/x", "", nil)
	if n := testutil.ToFloat64(ts.h.metrics.requests.WithLabelValues("/api/health", "200")); n != 1 {
		t.Errorf("health requests = %v, want 1", n)
	}
	if n := testutil.ToFloat64(ts.h.metrics.requests.WithLabelValues("/api/sessions/{id}", "401")); n != 1 {
		t.Errorf("unauthenticated session requests = %v, want 1", n)
	}
	ws, _ := ts.hello(t, nil)
	if n := testutil.ToFloat64(ts.h.metrics.sockets); n != 1 {
		t.Errorf("open sockets = %v, want 1", n)
	}
	ws.c.CloseNow()
}
