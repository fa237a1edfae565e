package deploytest

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/betcode-dev/betcode/relay/internal/image"
)

// TestRelayDockerfileMatchesImage: deploy/Dockerfile.relay (for people with
// Docker) and `make image` (relay/internal/image, no Docker) run the relay
// alike: the same user, entrypoint, environment, ports, stop signal and
// health check.
func TestRelayDockerfileMatchesImage(t *testing.T) {
	stages := parseDockerfile(t, filepath.Join(repo, "deploy", "Dockerfile.relay"))
	final := stages[len(stages)-1]
	get := func(cmd string) string {
		t.Helper()
		in := final.last(cmd)
		if in == nil {
			t.Fatalf("deploy/Dockerfile.relay's final stage has no %s", cmd)
		}
		return in.args
	}
	if got := get("USER"); got != image.User {
		t.Errorf("USER %s; the image runs as %s", got, image.User)
	}
	var entry []string
	if err := json.Unmarshal([]byte(get("ENTRYPOINT")), &entry); err != nil || !slices.Equal(entry, image.Entrypoint()) {
		t.Errorf("ENTRYPOINT %s (%v); the image's is %q", get("ENTRYPOINT"), err, image.Entrypoint())
	}
	if got := get("STOPSIGNAL"); got != image.StopSignal {
		t.Errorf("STOPSIGNAL %s; the image's is %s", got, image.StopSignal)
	}
	if !strings.Contains(get("COPY"), image.BinaryPath) {
		t.Errorf("COPY %s: the binary is not at %s", get("COPY"), image.BinaryPath)
	}
	for _, e := range image.Env() {
		k, _, _ := strings.Cut(e, "=")
		if k == "PATH" || k == "SSL_CERT_FILE" {
			continue // the distroless base sets them to the same
		}
		if !strings.Contains(get("ENV"), e) {
			t.Errorf("ENV %s lacks %s (the image sets it)", get("ENV"), e)
		}
	}
	expose := strings.Fields(get("EXPOSE"))
	for _, p := range image.ExposedPorts() {
		if !slices.Contains(expose, strings.TrimSuffix(p, "/tcp")) {
			t.Errorf("EXPOSE %v lacks %s", expose, p)
		}
	}
	hc := image.Healthcheck()
	opts, cmd, ok := strings.Cut(get("HEALTHCHECK"), "CMD ")
	var test []string
	if !ok || json.Unmarshal([]byte(cmd), &test) != nil || !slices.Equal(append([]string{"CMD"}, test...), hc.Test) {
		t.Errorf("HEALTHCHECK %s; the image's runs %q", get("HEALTHCHECK"), hc.Test)
	}
	for flag, d := range map[string]time.Duration{"--interval": hc.Interval, "--timeout": hc.Timeout, "--start-period": hc.StartPeriod} {
		if !strings.Contains(opts, flag+"="+d.String()) {
			t.Errorf("HEALTHCHECK %s: want %s=%s as the image", opts, flag, d)
		}
	}
	if !strings.Contains(opts, "--retries=3") || hc.Retries != 3 {
		t.Errorf("HEALTHCHECK %s: want --retries=%d as the image", opts, hc.Retries)
	}
}
