// Package image builds the relay's container image without Docker: a
// static betcode-relay per platform, CA certificates and a non-root user in
// one layer on an empty base, an OCI image index for every platform, and a
// CycloneDX SBOM of each binary attached as an OCI 1.1 referrer. It writes
// an OCI image layout directory and the same layout as one tar (an
// oci-archive). The same commit builds the same bytes.
//
// The image's settings (user, entrypoint, environment, ports, health check)
// are the exported values below; deploy/Dockerfile.relay sets the same ones
// for people who build with Docker, and relay/deploytest checks that the two
// agree. docs/deploy.md describes `make image`.
package image

import (
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Settings of the relay image. deploy/Dockerfile.relay must match them.
const (
	// BinaryPath is where the relay binary lives in the image.
	BinaryPath = "/usr/local/bin/betcode-relay"
	// User is the non-root user and group the relay runs as (distroless'
	// "nonroot").
	User = "65532:65532"
	// UID and GID of User.
	UID, GID = 65532, 65532
	// Home is the user's home and the image's working directory.
	Home = "/home/nonroot"
	// CACertsPath is the CA bundle in the image (Go's crypto/x509 looks
	// there on Linux).
	CACertsPath = "/etc/ssl/certs/ca-certificates.crt"
	// StopSignal starts the relay's drain (--drain-grace).
	StopSignal = "SIGTERM"
	// SBOMArtifactType is the artifactType of the SBOM referrers and the
	// media type of their one layer.
	SBOMArtifactType = "application/vnd.cyclonedx+json"
)

// Entrypoint is the image's entrypoint.
func Entrypoint() []string { return []string{BinaryPath, "serve"} }

// Env is the image's environment. GODEBUG: goroutines start with the
// minimum stack instead of the running average, so each idle tunnel's
// keepalive goroutine keeps 2 KiB, not 4 (it must be set in the
// environment; //go:debug does not accept it).
func Env() []string {
	return []string{
		"PATH=/usr/local/bin:/usr/bin:/bin",
		"SSL_CERT_FILE=" + CACertsPath,
		"GODEBUG=adaptivestackstart=0",
		"BETCODE_RELAY_METRICS_LISTEN=:9090",
	}
}

// ExposedPorts are the relay's TLS port (agents, clients, the web app) and
// its metrics port (/metrics, /healthz, /readyz).
func ExposedPorts() []string { return []string{"8443/tcp", "9090/tcp"} }

// Healthcheck is the Docker health check: the relay asks its own /readyz
// (the image has no shell nor curl), ready while it serves, not once it
// drains. Kubernetes uses the chart's probes instead.
func Healthcheck() *v1.HealthConfig {
	return &v1.HealthConfig{
		Test:        []string{"CMD", BinaryPath, "healthcheck"},
		Interval:    10 * time.Second,
		Timeout:     5 * time.Second,
		StartPeriod: 30 * time.Second,
		Retries:     3,
	}
}
