package server

import (
	"net/http"

	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// readyz answers the readiness probe on the metrics listener (Kubernetes'
// grpc probes cannot speak TLS, and the gRPC health service is only on the
// TLS port): 200 while hs reports the server SERVING, 503 from the moment
// the replica drains (the drain sets hs NOT_SERVING first), so that the
// Service stops sending it new connections.
func readyz(hs *health.Server) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		resp, err := hs.Check(r.Context(), &healthpb.HealthCheckRequest{})
		if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			http.Error(w, "not ready: draining", http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ok\n"))
	}
}
