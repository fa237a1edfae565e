package client

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCredentialsRoundTrip(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	path, err := CredentialsPath()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := LoadCredentials(path); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("LoadCredentials before login: %v, want ErrNotExist", err)
	}
	c := &Credentials{Relay: "relay:1", RelayCA: "/ca.crt", Token: "bct_secret", User: "alice"}
	if err := c.Save(path); err != nil {
		t.Fatal(err)
	}
	got, err := LoadCredentials(path)
	if err != nil || *got != *c {
		t.Fatalf("LoadCredentials = %+v, %v; want %+v", got, err, c)
	}
	if removed, err := RemoveCredentials(path); !removed || err != nil {
		t.Fatalf("RemoveCredentials = %v, %v", removed, err)
	}
	if removed, err := RemoveCredentials(path); removed || err != nil {
		t.Fatalf("second RemoveCredentials = %v, %v; want false, nil", removed, err)
	}
}

func TestLoadCredentialsRefuses(t *testing.T) {
	tests := []struct {
		name, content, want string
	}{
		{"not JSON", `{"token": "bct_secret",`, "not valid JSON"},
		{"no token", `{"relay": "r:1"}`, "no relay or token"},
		{"no relay", `{"token": "bct_secret"}`, "no relay or token"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "credentials.json")
			if err := os.WriteFile(path, []byte(tt.content), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := LoadCredentials(path)
			if err == nil || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "bct_secret") {
				t.Fatalf("LoadCredentials = %v, want an error mentioning %q without the token", err, tt.want)
			}
		})
	}
}

func TestDialTokens(t *testing.T) {
	tests := []struct {
		name string
		addr string
		o    DialOptions
		want string // error substring; empty: no error
	}{
		{"client token over TLS", "relay.example:443", DialOptions{TLS: true, Token: "t"}, ""},
		{"client token without TLS", "127.0.0.1:1", DialOptions{Token: "t"}, "without TLS"},
		{"agent token on loopback", "127.0.0.1:1", DialOptions{AgentToken: "t"}, ""},
		{"both tokens", "relay.example:443", DialOptions{TLS: true, Token: "t", AgentToken: "u"}, "pass one"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conn, err := Dial(tt.addr, tt.o)
			if conn != nil {
				conn.Close()
			}
			if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
				t.Fatalf("Dial = %v, want %q", err, tt.want)
			}
		})
	}
}
