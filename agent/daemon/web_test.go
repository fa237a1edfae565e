package daemon

import (
	"strings"
	"testing"
)

func TestWebConfigError(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want string // substring of the error; "" for none
	}{
		{name: "loopback", cfg: Config{HTTPListen: "127.0.0.1:7819"}},
		{name: "localhost", cfg: Config{HTTPListen: "localhost:0"}},
		{name: "ipv6 loopback", cfg: Config{HTTPListen: "[::1]:7819"}},
		{name: "off loopback without TLS", cfg: Config{HTTPListen: "0.0.0.0:7819"}, want: "--http-insecure"},
		{name: "off loopback insecure", cfg: Config{HTTPListen: "0.0.0.0:7819", HTTPInsecure: true}},
		{name: "off loopback with TLS", cfg: Config{HTTPListen: "0.0.0.0:7819", HTTPTLSCert: "c.pem", HTTPTLSKey: "k.pem"}},
		{name: "cert without key", cfg: Config{HTTPListen: "127.0.0.1:7819", HTTPTLSCert: "c.pem"}, want: "both"},
		{name: "not host:port", cfg: Config{HTTPListen: "7819"}, want: "host:port"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := webConfigError(tt.cfg)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("error %v, want none", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("error %v, want one mentioning %q", err, tt.want)
			}
		})
	}
}
