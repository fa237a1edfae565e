package limits

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		wantErr string // a substring; "" for valid
	}{
		{"zero takes defaults", Config{}, ""},
		{"defaults", DefaultConfig(), ""},
		{"negative rate", Config{CallsPerSecond: -1}, "CallsPerSecond"},
		{"NaN rate", Config{CallsPerSecond: math.NaN()}, "CallsPerSecond"},
		{"infinite rate", Config{CallsPerSecond: math.Inf(1)}, "CallsPerSecond"},
		{"negative burst", Config{Burst: -1}, "Burst"},
		{"negative message size", Config{MaxMessageBytes: -1}, "MaxMessageBytes"},
		{"message size over a frame's", Config{MaxMessageBytes: 1 << 33}, "MaxMessageBytes"},
		{"negative token streams", Config{MaxStreamsPerToken: -1}, "MaxStreamsPerToken"},
		{"negative tunnel streams", Config{MaxStreamsPerTunnel: -1}, "MaxStreamsPerTunnel"},
		{"negative pending", Config{MaxPendingConns: -1}, "MaxPendingConns"},
		{"negative handshake timeout", Config{HandshakeTimeout: -time.Second}, "HandshakeTimeout"},
		{"negative tracked tokens", Config{MaxTrackedTokens: -1}, "MaxTrackedTokens"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Validate() = %v, want an error naming %s", err, tc.wantErr)
			}
			if _, err := New(tc.cfg); err == nil {
				t.Fatalf("New accepted an invalid config")
			}
		})
	}
}

func TestWithDefaults(t *testing.T) {
	got := Config{Burst: 5}.WithDefaults()
	want := Config{
		CallsPerSecond: DefaultCallsPerSecond, Burst: 5, MaxMessageBytes: 16 << 20, MaxStreamsPerToken: 64,
		MaxStreamsPerTunnel: 512, MaxPendingConns: 256, HandshakeTimeout: 10 * time.Second, MaxTrackedTokens: 1 << 16,
	}
	if got != want {
		t.Fatalf("WithDefaults() = %+v, want %+v", got, want)
	}
}
