package server

import (
	"strings"
	"testing"

	"github.com/betcode-dev/betcode/relay/oidcsvc"
)

func TestValidateAdvertiseAddr(t *testing.T) {
	base := Config{Listen: ":8443", TLSCert: "c", TLSKey: "k", ClientCA: "ca"}
	tests := []struct {
		name      string
		db, dir   string
		advertise string
		wantErr   string
	}{
		{"single replica on SQLite", "", "d", "", ""},
		{"replicas on PostgreSQL", "postgres://x", "", "10.0.0.1:8443", ""},
		{"replicas on SQLite", "", "d", "10.0.0.1:8443", "needs --database-url"},
		{"no port", "postgres://x", "", "10.0.0.1", "want HOST:PORT"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := base
			c.DatabaseURL, c.DataDir, c.AdvertiseAddr = tt.db, tt.dir, tt.advertise
			err := c.Validate()
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("Validate = %v; want %q", err, tt.wantErr)
			}
		})
	}
}

func TestValidateOIDC(t *testing.T) {
	base := Config{Listen: ":8443", TLSCert: "c", TLSKey: "k", ClientCA: "ca", DataDir: "d"}
	tests := []struct {
		name    string
		oidc    oidcsvc.Config
		wantErr string
	}{
		{"off", oidcsvc.Config{}, ""},
		{"on", oidcsvc.Config{Issuer: "https://idp.example.com", ClientID: "betcode", GroupsClaim: "groups"}, ""},
		{"issuer without client", oidcsvc.Config{Issuer: "https://idp.example.com"}, "--oidc-issuer and --oidc-client-id go together"},
		{"plain http", oidcsvc.Config{Issuer: "http://idp.example.com", ClientID: "betcode"}, "want https"},
		{"groups without issuer", oidcsvc.Config{GroupsClaim: "groups"}, "need --oidc-issuer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := base
			c.OIDC = tt.oidc
			err := c.Validate()
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("Validate = %v; want %q", err, tt.wantErr)
			}
		})
	}
}
