package server

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// TestReadyz follows the relay's health server: ready while it serves, not
// ready once a drain (hs.Shutdown) or anything else sets it NOT_SERVING.
func TestReadyz(t *testing.T) {
	tests := []struct {
		name string
		set  func(hs *health.Server)
		want int
	}{
		{"serving", func(*health.Server) {}, http.StatusOK},
		{"draining", func(hs *health.Server) { hs.Shutdown() }, http.StatusServiceUnavailable},
		{"not serving", func(hs *health.Server) { hs.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING) }, http.StatusServiceUnavailable},
		{"serving again", func(hs *health.Server) {
			hs.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
			hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
		}, http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hs := health.NewServer()
			tt.set(hs)
			srv := httptest.NewServer(readyz(hs))
			defer srv.Close()
			resp, err := srv.Client().Get(srv.URL + "/readyz")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tt.want {
				t.Fatalf("status %d, want %d", resp.StatusCode, tt.want)
			}
		})
	}
}
