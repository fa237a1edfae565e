package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/viper"

	"github.com/betcode-dev/betcode/agent/enroll"
	"github.com/betcode-dev/betcode/shared/authtoken"
)

// TestEnrollTokenSources checks where enroll takes the token from; the
// tokens are client tokens, so the local check refuses them before any
// network call, naming what it read.
func TestEnrollTokenSources(t *testing.T) {
	fromStdin, _ := authtoken.New(authtoken.Client)
	tests := []struct {
		name  string
		args  []string
		env   string
		stdin string
		want  string
	}{
		{"stdin", []string{"--token", "-"}, "", fromStdin + "\n", "this is a client token"},
		{"environment", nil, "bcj_short", "", "was it cut short"},
		{"flag wins over environment", []string{"--token", "bcj_short"}, fromStdin, "", "was it cut short"},
		{"none", nil, "", "", "no join token"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(envJoinToken, tt.env)
			cmd := newRootCmd()
			cmd.SetArgs(append([]string{"enroll", "--relay", "127.0.0.1:1", "--data-dir", t.TempDir()}, tt.args...))
			cmd.SetIn(strings.NewReader(tt.stdin))
			cmd.SetOut(io.Discard)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err := cmd.ExecuteContext(ctx)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("enroll: %v, want an error mentioning %q", err, tt.want)
			}
			if strings.Contains(err.Error(), fromStdin) {
				t.Fatalf("error %q shows the token", err)
			}
		})
	}
}

func TestRelayLinkFromEnrollment(t *testing.T) {
	enrolled := t.TempDir()
	files := enroll.FilesIn(enrolled)
	if err := os.MkdirAll(files.Dir, 0o700); err != nil {
		t.Fatal(err)
	}
	info := `{"relay": "relay.example:8443", "machine_id": "m-7", "name": "box", "not_after": "2030-01-01T00:00:00Z"}`
	if err := os.WriteFile(files.Info, []byte(info), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		dataDir string
		set     map[string]string
		want    linkConfig
		logged  bool
	}{
		{"enrollment", enrolled, nil,
			linkConfig{Relay: "relay.example:8443", RelayCA: files.CA, MachineCert: files.Cert, MachineKey: files.Key, MachineName: "box"}, true},
		{"enrollment, own name", enrolled, map[string]string{"machine-name": "other"},
			linkConfig{Relay: "relay.example:8443", RelayCA: files.CA, MachineCert: files.Cert, MachineKey: files.Key, MachineName: "other"}, true},
		{"flags win", enrolled, map[string]string{"relay": "r:1", "relay-ca": "ca", "machine-cert": "c", "machine-key": "k"},
			linkConfig{Relay: "r:1", RelayCA: "ca", MachineCert: "c", MachineKey: "k"}, false},
		{"not enrolled", t.TempDir(), nil, linkConfig{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := viper.New()
			v.Set("data-dir", tt.dataDir)
			for k, val := range tt.set {
				v.Set(k, val)
			}
			var logBuf bytes.Buffer
			got, err := relayLink(v, slog.New(slog.NewTextHandler(&logBuf, nil)))
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Fatalf("relayLink = %+v, want %+v", got, tt.want)
			}
			if logged := strings.Contains(logBuf.String(), "using the enrollment"); logged != tt.logged {
				t.Fatalf("logged %q, want a line about the enrollment: %v", logBuf.String(), tt.logged)
			}
		})
	}
	// A broken enrollment is an error, not a silent start without relay.
	if err := os.WriteFile(files.Info, []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	v := viper.New()
	v.Set("data-dir", enrolled)
	if _, err := relayLink(v, slog.New(slog.NewTextHandler(io.Discard, nil))); err == nil || !strings.Contains(err.Error(), filepath.Base(files.Info)) {
		t.Fatalf("relayLink with a broken enrollment.json: %v", err)
	}
}
