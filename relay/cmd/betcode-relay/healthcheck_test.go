package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestHealthcheck(t *testing.T) {
	var ready atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/healthz":
			w.Write([]byte("ok\n"))
		case r.URL.Path == "/readyz" && ready.Load():
			w.Write([]byte("ok\n"))
		default:
			http.Error(w, "not ready: draining", http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	tests := []struct {
		name    string
		addr    string
		path    string
		ready   bool
		wantErr string
	}{
		{name: "ready", addr: addr, path: "/readyz", ready: true},
		{name: "draining", addr: addr, path: "/readyz", ready: false, wantErr: "503"},
		{name: "alive while draining", addr: addr, path: "/healthz", ready: false},
		{name: "no listener configured", addr: "", path: "/readyz", wantErr: "no --metrics-listen"},
		{name: "bad address", addr: "9090", path: "/readyz", wantErr: "--metrics-listen"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ready.Store(tt.ready)
			var out bytes.Buffer
			err := healthcheck(context.Background(), tt.addr, tt.path, 5*time.Second, &out)
			if tt.wantErr == "" && err != nil {
				t.Fatalf("healthcheck: %v", err)
			}
			if tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("healthcheck: %v, want an error with %q", err, tt.wantErr)
			}
		})
	}
}

// TestHealthcheckCommand runs the subcommand as the image's HEALTHCHECK
// does: the address comes from BETCODE_RELAY_METRICS_LISTEN.
func TestHealthcheckCommand(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok\n")) }))
	defer srv.Close()
	t.Setenv("BETCODE_RELAY_METRICS_LISTEN", strings.TrimPrefix(srv.URL, "http://"))
	cmd := newRootCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"healthcheck"})
	if err := cmd.ExecuteContext(context.Background()); err != nil {
		t.Fatalf("healthcheck: %v", err)
	}
	if !strings.Contains(out.String(), "/readyz: ok") {
		t.Fatalf("output %q", out.String())
	}
}
