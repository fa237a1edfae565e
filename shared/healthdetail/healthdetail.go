// Package healthdetail implements BetCodeHealth.GetHealthDetails from a list
// of component checks, with the spec's rule: NOT_SERVING when a critical
// component is down, SERVING but degraded when only a non-critical one is.
package healthdetail

import (
	"context"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// Check is one component.
type Check struct {
	Name     string
	Critical bool
	// Run reports whether the component serves, and a message.
	Run func(ctx context.Context) (ok bool, msg string)
}

// Server implements BetCodeHealth.
type Server struct {
	pb.UnimplementedBetCodeHealthServer
	Checks   []Check
	Metadata func() map[string]string
}

// GetHealthDetails runs every check (each bounded by 2 s).
func (s *Server) GetHealthDetails(ctx context.Context, _ *pb.HealthDetailsRequest) (*pb.HealthDetailsResponse, error) {
	resp := &pb.HealthDetailsResponse{OverallStatus: pb.ServingStatus_SERVING}
	var degraded []string
	for _, c := range s.Checks {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		ok, msg := c.Run(cctx)
		cancel()
		st := pb.ServingStatus_SERVING
		if !ok {
			st = pb.ServingStatus_NOT_SERVING
			if c.Critical {
				resp.OverallStatus = pb.ServingStatus_NOT_SERVING
			} else {
				degraded = append(degraded, c.Name+": "+msg)
			}
		}
		resp.Components = append(resp.Components, &pb.ComponentHealth{Name: c.Name, Status: st, Message: msg, LastCheck: timestamppb.Now()})
	}
	if len(degraded) > 0 && resp.OverallStatus == pb.ServingStatus_SERVING {
		resp.Degraded = true
		resp.DegradedReason = strings.Join(degraded, "; ")
	}
	if s.Metadata != nil {
		resp.Metadata = s.Metadata()
	}
	return resp, nil
}
