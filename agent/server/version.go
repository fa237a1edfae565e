package server

import (
	"context"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// APIVersion is the API version this agent serves.
const APIVersion = "v1"

// Features the agent offers, as NegotiateCapabilities grants them.
var Features = []string{"streaming_deltas", "session_persistence", "permission_bridge"}

// Version implements VersionService.
type Version struct {
	pb.UnimplementedVersionServiceServer
	ServerVersion string
	ClaudeVersion string // empty when unknown
}

// GetVersion reports the agent's and Claude Code's versions.
func (v *Version) GetVersion(ctx context.Context, _ *pb.GetVersionRequest) (*pb.GetVersionResponse, error) {
	compat := pb.CompatibilityLevel_COMPATIBILITY_UNKNOWN
	if v.ClaudeVersion != "" {
		compat = pb.CompatibilityLevel_FULLY_COMPATIBLE
	}
	return &pb.GetVersionResponse{
		ApiVersion: APIVersion, ServerVersion: v.ServerVersion, Features: Features,
		ClaudeCode:  &pb.ClaudeCodeInfo{Version: v.ClaudeVersion, Compatibility: compat},
		Constraints: &pb.VersionConstraints{MinClientVersion: "0.1.0", RecommendedClient: v.ServerVersion},
	}, nil
}

// NegotiateCapabilities grants the requested features the agent has.
func (v *Version) NegotiateCapabilities(ctx context.Context, req *pb.NegotiateRequest) (*pb.NegotiateResponse, error) {
	resp := &pb.NegotiateResponse{Accepted: true, Capabilities: &pb.CapabilitySet{
		StreamingSupported: true, MaxMessageSize: 16 << 20, FeatureFlags: map[string]bool{},
	}}
	for _, f := range Features {
		resp.Capabilities.FeatureFlags[f] = true
	}
	for _, f := range req.RequestedFeatures {
		if resp.Capabilities.FeatureFlags[f] {
			resp.GrantedFeatures = append(resp.GrantedFeatures, f)
		} else {
			resp.Warnings = append(resp.Warnings, f+" is not available on this agent")
		}
	}
	return resp, nil
}
