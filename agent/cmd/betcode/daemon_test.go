package main

import (
	"bytes"
	"testing"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

func TestPrintHealth(t *testing.T) {
	tests := []struct {
		name string
		in   *pb.HealthDetailsResponse
		want string
	}{
		{
			name: "degraded, as the spec shows it",
			in: &pb.HealthDetailsResponse{
				OverallStatus: pb.ServingStatus_SERVING, Degraded: true,
				DegradedReason: "Relay tunnel not connected. Remote access unavailable.",
				Components: []*pb.ComponentHealth{
					{Name: "subprocess_pool", Status: pb.ServingStatus_SERVING, Message: "3/5 slots used"},
					{Name: "sqlite", Status: pb.ServingStatus_SERVING},
					{Name: "local_server", Status: pb.ServingStatus_SERVING},
					{Name: "tunnel", Status: pb.ServingStatus_NOT_SERVING, Message: "relay connection failed, retrying"},
				},
				Metadata: map[string]string{"uptime": "2h34m0s", "version": "0.1.0-alpha.1"},
			},
			want: `Daemon: SERVING (degraded)
  subprocess_pool: SERVING (3/5 slots used)
  sqlite: SERVING
  local_server: SERVING
  tunnel: NOT_SERVING (relay connection failed, retrying)

Degraded: Relay tunnel not connected. Remote access unavailable.
Uptime: 2h34m0s
Version: 0.1.0-alpha.1
`,
		},
		{
			name: "not serving, extra metadata sorted",
			in: &pb.HealthDetailsResponse{
				OverallStatus: pb.ServingStatus_NOT_SERVING,
				Components:    []*pb.ComponentHealth{{Name: "sqlite", Status: pb.ServingStatus_NOT_SERVING, Message: "disk I/O error"}},
				Metadata:      map[string]string{"version": "0.4.0", "machine_id": "m1", "claude_version": "2.1.328", "a_b": "x"},
			},
			want: `Daemon: NOT_SERVING
  sqlite: NOT_SERVING (disk I/O error)
Version: 0.4.0
Claude Code: 2.1.328
a b: x
machine id: m1
`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			printHealth(&b, tt.in)
			if b.String() != tt.want {
				t.Errorf("got\n%s\nwant\n%s", b.String(), tt.want)
			}
		})
	}
}
