package server

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/buildinfo"
)

// APIVersion is the API version this agent serves.
const APIVersion = "v1"

// Client version policy. MinClientVersion is the oldest betcode client this
// agent serves; raise it only when a client-visible break forces it.
const (
	MinClientVersion = "0.1.0"
	UpgradeURL       = "https://github.com/betcode-dev/betcode/releases"
	// ClaudeUpgradeURL is where the spec sends users whose Claude Code is
	// older than the tested range.
	ClaudeUpgradeURL = "https://docs.anthropic.com/claude-code/install"
)

// MDClientVersion carries the caller's client version (e.g. "0.2.0") on
// every call; see Version.UnaryInterceptor.
const MDClientVersion = "x-betcode-client-version"

// CodeClientTooOld is the BetCode error code of a call refused because the
// client is older than the agent's minimum.
const CodeClientTooOld = "CLIENT_TOO_OLD"

// Features the agent offers: the enabled entries of DefaultFlags.
var Features = enabledNames(DefaultFlags)

// Version implements VersionService. The zero value of every field but
// ServerVersion has a sensible default, so the daemon sets only what it
// knows.
type Version struct {
	pb.UnimplementedVersionServiceServer
	ServerVersion string
	ClaudeVersion string // empty when unknown
	// ClaudeRange is the Claude Code releases this build was tested with;
	// it decides ClaudeCodeInfo.compatibility. Zero: not known.
	ClaudeRange ClaudeRange
	// MinClientVersion is the oldest client served (default MinClientVersion).
	MinClientVersion string
	// UpgradeURL is where refused clients are sent (default UpgradeURL).
	UpgradeURL string
	// Flags are the feature flags (default DefaultFlags).
	Flags []Flag
	// Log receives refusals and calls from clients that did not say their
	// version (default: discard).
	Log *slog.Logger

	warnedAnonymous atomic.Bool
}

func (v *Version) minClient() string {
	if v.MinClientVersion != "" {
		return v.MinClientVersion
	}
	return MinClientVersion
}

func (v *Version) upgradeURL() string {
	if v.UpgradeURL != "" {
		return v.UpgradeURL
	}
	return UpgradeURL
}

func (v *Version) flags() []Flag {
	if v.Flags != nil {
		return v.Flags
	}
	return DefaultFlags
}

func (v *Version) log() *slog.Logger {
	if v.Log != nil {
		return v.Log
	}
	return slog.New(slog.DiscardHandler)
}

// GetVersion reports the agent's and Claude Code's versions, the client
// constraints and the feature flags.
func (v *Version) GetVersion(ctx context.Context, _ *pb.GetVersionRequest) (*pb.GetVersionResponse, error) {
	flags := v.flags()
	resp := &pb.GetVersionResponse{
		ApiVersion: APIVersion, ServerVersion: v.ServerVersion, Features: enabledNames(flags),
		ClaudeCode: &pb.ClaudeCodeInfo{
			Version: v.ClaudeVersion, Compatibility: v.ClaudeRange.Compatibility(v.ClaudeVersion),
			TestedMinVersion: v.ClaudeRange.Min, TestedMaxVersion: v.ClaudeRange.Max,
		},
		Constraints: &pb.VersionConstraints{
			MinClientVersion: v.minClient(), RecommendedClient: v.ServerVersion,
			FeatureReplacements: map[string]string{},
		},
	}
	for _, f := range flags {
		resp.FeatureFlags = append(resp.FeatureFlags, f.Proto())
		if f.Stage == pb.FeatureStage_DEPRECATED {
			resp.Constraints.DeprecatedFeatures = append(resp.Constraints.DeprecatedFeatures, f.Name)
			if f.Replacement != "" {
				resp.Constraints.FeatureReplacements[f.Name] = f.Replacement
			}
		}
	}
	return resp, nil
}

// NegotiateCapabilities refuses clients older than the minimum (and every
// client when Claude Code is older than the tested range, as the spec
// says), and grants the requested features that are enabled, warning about
// the rest and about deprecated ones.
func (v *Version) NegotiateCapabilities(ctx context.Context, req *pb.NegotiateRequest) (*pb.NegotiateResponse, error) {
	if reason := v.tooOld(req.ClientVersion); reason != "" {
		v.log().Info("refused client", "client_version", req.ClientVersion, "client_type", req.ClientType, "min_client_version", v.minClient())
		return &pb.NegotiateResponse{RejectionReason: reason, UpgradeUrl: v.upgradeURL()}, nil
	}
	if v.ClaudeRange.Compatibility(v.ClaudeVersion) == pb.CompatibilityLevel_INCOMPATIBLE {
		return &pb.NegotiateResponse{
			RejectionReason: fmt.Sprintf("Claude Code %s on this machine is older than the oldest tested release %s: upgrade Claude Code", v.ClaudeVersion, v.ClaudeRange.Min),
			UpgradeUrl:      ClaudeUpgradeURL,
		}, nil
	}
	flags := v.flags()
	caps := &pb.CapabilitySet{StreamingSupported: true, MaxMessageSize: 16 << 20, FeatureFlags: map[string]bool{}}
	for _, f := range flags {
		caps.FeatureFlags[f.Name] = f.Enabled
	}
	caps.WorktreesEnabled = caps.FeatureFlags["worktree_management"]
	caps.SubagentsEnabled = caps.FeatureFlags["subagent_orchestration"]
	resp := &pb.NegotiateResponse{Accepted: true, Capabilities: caps}
	cv, known := buildinfo.Parse(req.ClientVersion)
	if !known && !buildinfo.IsDev(req.ClientVersion) {
		// A development build ("dev", a commit, v0.2.0-dev+669d2cc) is
		// not an untested release: no warning for it.
		resp.Warnings = append(resp.Warnings, fmt.Sprintf("untested client version %q", req.ClientVersion))
	}
	for _, name := range req.RequestedFeatures {
		f, ok := findFlag(flags, name)
		switch {
		case !ok:
			resp.Warnings = append(resp.Warnings, name+" is not a feature of this agent")
		case !f.Enabled:
			resp.Warnings = append(resp.Warnings, name+" is not enabled on this agent")
		case known && needsNewer(cv, f.MinClient):
			resp.Warnings = append(resp.Warnings, fmt.Sprintf("%s needs client %s or newer", name, f.MinClient))
		default:
			resp.GrantedFeatures = append(resp.GrantedFeatures, name)
			if f.Stage == pb.FeatureStage_DEPRECATED {
				resp.Warnings = append(resp.Warnings, f.deprecationText())
			}
		}
	}
	return resp, nil
}

// tooOld returns the refusal for a client version below the minimum, or ""
// when the version is acceptable or not parseable (unknown clients are
// served, with a warning).
func (v *Version) tooOld(clientVersion string) string {
	cv, ok := buildinfo.Parse(clientVersion)
	if !ok {
		return ""
	}
	min, ok := buildinfo.Parse(v.minClient())
	if !ok || !cv.Less(min) {
		return ""
	}
	return fmt.Sprintf("betcode %s is too old for this agent (minimum %s): upgrade from %s",
		strings.TrimPrefix(clientVersion, "v"), v.minClient(), v.upgradeURL())
}

// clientVersion returns the x-betcode-client-version metadata of a call.
func clientVersion(ctx context.Context) (string, bool) {
	md, _ := metadata.FromIncomingContext(ctx)
	vs := md.Get(MDClientVersion)
	if len(vs) == 0 {
		return "", false
	}
	return vs[0], true
}

// checkClient refuses a call from a client older than the minimum with
// FAILED_PRECONDITION and CLIENT_TOO_OLD. Calls without the header
// (grpcurl, scripts, clients before 0.2.0) are served: the first is logged
// at warn level, the rest at debug.
func (v *Version) checkClient(ctx context.Context, method string) error {
	if exemptFromVersionCheck(method) {
		return nil
	}
	cv, ok := clientVersion(ctx)
	if !ok {
		lvl := slog.LevelDebug
		if v.warnedAnonymous.CompareAndSwap(false, true) {
			lvl = slog.LevelWarn
		}
		v.log().Log(ctx, lvl, "call without "+MDClientVersion+"; serving it as an untested client", "method", method)
		return nil
	}
	if reason := v.tooOld(cv); reason != "" {
		v.log().Info("refused client", "client_version", cv, "method", method, "min_client_version", v.minClient())
		return StatusWith(codes.FailedPrecondition, CodeClientTooOld, reason,
			map[string]string{"client_version": cv, "min_client_version": v.minClient(), "upgrade_url": v.upgradeURL()})
	}
	return nil
}

// exemptFromVersionCheck: a client too old for the rest may still ask for
// the versions (to learn the minimum), health and reflection.
func exemptFromVersionCheck(method string) bool {
	for _, p := range []string{"/betcode.v1.VersionService/", "/grpc.health.v1.Health/", "/betcode.v1.BetCodeHealth/", "/grpc.reflection."} {
		if strings.HasPrefix(method, p) {
			return true
		}
	}
	return false
}

// needsNewer reports whether client version cv is below a flag's minimum.
func needsNewer(cv buildinfo.Semver, minClient string) bool {
	min, ok := buildinfo.Parse(minClient)
	return ok && cv.Less(min)
}
