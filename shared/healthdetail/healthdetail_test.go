package healthdetail

import (
	"context"
	"testing"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

func TestOverallStatus(t *testing.T) {
	up := func(context.Context) (bool, string) { return true, "ok" }
	down := func(context.Context) (bool, string) { return false, "down" }
	tests := []struct {
		name     string
		checks   []Check
		want     pb.ServingStatus
		degraded bool
	}{
		{"all up", []Check{{"db", true, up}, {"tunnel", false, up}}, pb.ServingStatus_SERVING, false},
		{"non-critical down", []Check{{"db", true, up}, {"tunnel", false, down}}, pb.ServingStatus_SERVING, true},
		{"critical down", []Check{{"db", true, down}, {"tunnel", false, down}}, pb.ServingStatus_NOT_SERVING, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := (&Server{Checks: tt.checks}).GetHealthDetails(context.Background(), &pb.HealthDetailsRequest{})
			if err != nil || resp.OverallStatus != tt.want || resp.Degraded != tt.degraded || len(resp.Components) != len(tt.checks) {
				t.Fatalf("got %v, %v", resp, err)
			}
		})
	}
}
