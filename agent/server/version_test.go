package server

import (
	"bytes"
	"context"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

func TestClaudeCompatibility(t *testing.T) {
	r := ClaudeRange{Min: "2.0.50", Max: "2.1.328"}
	tests := []struct {
		name    string
		r       ClaudeRange
		version string
		want    pb.CompatibilityLevel
	}{
		{"not detected", r, "", pb.CompatibilityLevel_COMPATIBILITY_UNKNOWN},
		{"unparseable", r, "nightly", pb.CompatibilityLevel_COMPATIBILITY_UNKNOWN},
		{"oldest tested", r, "2.0.50", pb.CompatibilityLevel_FULLY_COMPATIBLE},
		{"pinned", r, "2.1.328", pb.CompatibilityLevel_FULLY_COMPATIBLE},
		{"between", r, "2.1.0", pb.CompatibilityLevel_FULLY_COMPATIBLE},
		{"older than tested", r, "2.0.49", pb.CompatibilityLevel_INCOMPATIBLE},
		{"much older", r, "1.0.22", pb.CompatibilityLevel_INCOMPATIBLE},
		{"newer patch", r, "2.1.329", pb.CompatibilityLevel_LIKELY_COMPATIBLE},
		{"newer minor", r, "2.2.0", pb.CompatibilityLevel_LIKELY_COMPATIBLE},
		{"newer major", r, "3.0.0", pb.CompatibilityLevel_DEGRADED},
		{"no range", ClaudeRange{}, "2.1.328", pb.CompatibilityLevel_LIKELY_COMPATIBLE},
		{"only a minimum", ClaudeRange{Min: "2.0.0"}, "9.0.0", pb.CompatibilityLevel_FULLY_COMPATIBLE},
		{"prerelease counts as its release", r, "2.1.328-beta.1", pb.CompatibilityLevel_FULLY_COMPATIBLE},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.r.Compatibility(tt.version); got != tt.want {
				t.Errorf("Compatibility(%q) = %v, want %v", tt.version, got, tt.want)
			}
		})
	}
}

func TestGetVersion(t *testing.T) {
	v := &Version{ServerVersion: "0.2.0", ClaudeVersion: "2.1.328", ClaudeRange: ClaudeRange{Min: "2.0.50", Max: "2.1.328"}}
	resp, err := v.GetVersion(context.Background(), &pb.GetVersionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if resp.ApiVersion != "v1" || resp.ServerVersion != "0.2.0" {
		t.Errorf("versions: %v %v", resp.ApiVersion, resp.ServerVersion)
	}
	cc := resp.ClaudeCode
	if cc.Version != "2.1.328" || cc.Compatibility != pb.CompatibilityLevel_FULLY_COMPATIBLE || cc.TestedMinVersion != "2.0.50" || cc.TestedMaxVersion != "2.1.328" {
		t.Errorf("claude_code = %v", cc)
	}
	if got := resp.Constraints.MinClientVersion; got != MinClientVersion {
		t.Errorf("min_client_version = %q", got)
	}
	if !slices.Equal(resp.Constraints.DeprecatedFeatures, []string{LegacyPermissionFormat}) || resp.Constraints.FeatureReplacements[LegacyPermissionFormat] == "" {
		t.Errorf("constraints = %v", resp.Constraints)
	}
	if len(resp.FeatureFlags) != len(DefaultFlags) {
		t.Fatalf("%d feature flags, want %d", len(resp.FeatureFlags), len(DefaultFlags))
	}
	stages := map[string]pb.FeatureStage{}
	for _, f := range resp.FeatureFlags {
		stages[f.Name] = f.Stage
	}
	for name, want := range map[string]pb.FeatureStage{
		"streaming_deltas": pb.FeatureStage_STABLE, "worktree_management": pb.FeatureStage_BETA,
		"subagent_orchestration": pb.FeatureStage_ALPHA, LegacyPermissionFormat: pb.FeatureStage_DEPRECATED,
	} {
		if stages[name] != want {
			t.Errorf("stage of %s = %v, want %v", name, stages[name], want)
		}
	}
	if slices.Contains(resp.Features, "subagent_orchestration") || !slices.Contains(resp.Features, "streaming_deltas") {
		t.Errorf("enabled features = %v", resp.Features)
	}
}

func TestNegotiateCapabilities(t *testing.T) {
	tests := []struct {
		name         string
		v            *Version
		req          *pb.NegotiateRequest
		accepted     bool
		reason       string // substring of rejection_reason
		granted      []string
		warningsLike []string
	}{
		{
			name: "current client", v: &Version{ServerVersion: "0.2.0"},
			req:      &pb.NegotiateRequest{ClientVersion: "0.2.0", ClientType: "cli", RequestedFeatures: []string{"streaming_deltas", "permission_bridge"}},
			accepted: true, granted: []string{"streaming_deltas", "permission_bridge"},
		},
		{
			name: "dev build of the minimum", v: &Version{ServerVersion: "0.2.0"},
			req: &pb.NegotiateRequest{ClientVersion: "0.1.0-dev"}, accepted: true,
		},
		{
			name: "too old", v: &Version{ServerVersion: "0.2.0", MinClientVersion: "0.2.0"},
			req:    &pb.NegotiateRequest{ClientVersion: "0.1.5", RequestedFeatures: []string{"streaming_deltas"}},
			reason: "betcode 0.1.5 is too old for this agent (minimum 0.2.0): upgrade from " + UpgradeURL,
		},
		{
			name: "no version: untested, served", v: &Version{},
			req: &pb.NegotiateRequest{}, accepted: true, warningsLike: []string{"untested client version"},
		},
		{
			name: "unknown, disabled and deprecated features", v: &Version{},
			req:      &pb.NegotiateRequest{ClientVersion: "0.2.0", RequestedFeatures: []string{"teleport", "subagent_orchestration", LegacyPermissionFormat}},
			accepted: true, granted: []string{LegacyPermissionFormat},
			warningsLike: []string{"teleport is not a feature", "subagent_orchestration is not enabled", "legacy_permission_format is deprecated and goes in 0.4.0"},
		},
		{
			name: "feature needing a newer client", v: &Version{Flags: []Flag{{Name: "x", Enabled: true, MinClient: "0.3.0"}}},
			req: &pb.NegotiateRequest{ClientVersion: "0.2.0", RequestedFeatures: []string{"x"}}, accepted: true,
			warningsLike: []string{"x needs client 0.3.0 or newer"},
		},
		{
			name: "claude older than tested", v: &Version{ClaudeVersion: "1.0.0", ClaudeRange: ClaudeRange{Min: "2.0.0", Max: "2.1.0"}},
			req:    &pb.NegotiateRequest{ClientVersion: "0.2.0"},
			reason: "Claude Code 1.0.0 on this machine is older than the oldest tested release 2.0.0",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := tt.v.NegotiateCapabilities(context.Background(), tt.req)
			if err != nil {
				t.Fatal(err)
			}
			if resp.Accepted != tt.accepted {
				t.Fatalf("accepted = %v (%q), want %v", resp.Accepted, resp.RejectionReason, tt.accepted)
			}
			if !strings.Contains(resp.RejectionReason, tt.reason) || (tt.reason != "" && resp.UpgradeUrl == "") {
				t.Errorf("rejection = %q (%q), want %q", resp.RejectionReason, resp.UpgradeUrl, tt.reason)
			}
			if !slices.Equal(resp.GrantedFeatures, tt.granted) {
				t.Errorf("granted = %v, want %v", resp.GrantedFeatures, tt.granted)
			}
			for _, w := range tt.warningsLike {
				if !slices.ContainsFunc(resp.Warnings, func(s string) bool { return strings.Contains(s, w) }) {
					t.Errorf("warnings %q lack %q", resp.Warnings, w)
				}
			}
		})
	}
}

func TestCheckClient(t *testing.T) {
	v := &Version{MinClientVersion: "0.2.0"}
	tests := []struct {
		name, method string
		md           []string
		want         codes.Code
	}{
		{"current", "/betcode.v1.AgentService/ListSessions", []string{MDClientVersion, "0.2.0"}, codes.OK},
		{"newer", "/betcode.v1.AgentService/ListSessions", []string{MDClientVersion, "1.0.0"}, codes.OK},
		{"too old", "/betcode.v1.AgentService/Converse", []string{MDClientVersion, "0.1.9"}, codes.FailedPrecondition},
		{"no header: served", "/betcode.v1.AgentService/ListSessions", nil, codes.OK},
		{"unparseable: served", "/betcode.v1.AgentService/ListSessions", []string{MDClientVersion, "main"}, codes.OK},
		{"too old may still ask for versions", "/betcode.v1.VersionService/GetVersion", []string{MDClientVersion, "0.0.1"}, codes.OK},
		{"too old may still check health", "/grpc.health.v1.Health/Check", []string{MDClientVersion, "0.0.1"}, codes.OK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs(tt.md...))
			err := v.checkClient(ctx, tt.method)
			if status.Code(err) != tt.want {
				t.Fatalf("checkClient = %v, want %v", err, tt.want)
			}
			if err != nil {
				if msg := status.Convert(err).Message(); !strings.Contains(msg, "betcode 0.1.9 is too old for this agent (minimum 0.2.0): upgrade") {
					t.Errorf("message %q", msg)
				}
				if ei := errorInfo(err); ei.GetReason() != CodeClientTooOld || ei.GetMetadata()["upgrade_url"] == "" {
					t.Errorf("error info = %v", ei)
				}
			}
		})
	}
}

// A newer client's fields are kept and logged at debug level (the spec's
// unknown-field policy for the daemon), however deep they are.
func TestUnknownFieldsLogged(t *testing.T) {
	start := &pb.StartConversation{SessionId: "s"}
	// Field 99, varint 1: a field this build does not know.
	start.ProtoReflect().SetUnknown(protowire.AppendVarint(protowire.AppendTag(nil, 99, protowire.VarintType), 1))
	req := &pb.AgentRequest{Request: &pb.AgentRequest_Start{Start: start}}
	if n := unknownBytes(req.ProtoReflect()); n != 3 {
		t.Fatalf("unknownBytes = %d, want 3", n)
	}
	var buf bytes.Buffer
	v := &Version{Log: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	v.logUnknown(context.Background(), "/betcode.v1.AgentService/Converse", req)
	if !strings.Contains(buf.String(), "unknown fields") || !strings.Contains(buf.String(), "unknown_bytes=3") {
		t.Errorf("log: %s", buf.String())
	}
	buf.Reset()
	v.logUnknown(context.Background(), "/betcode.v1.AgentService/Converse", &pb.AgentRequest{Request: &pb.AgentRequest_Start{Start: &pb.StartConversation{}}})
	if buf.Len() != 0 {
		t.Errorf("logged a request without unknown fields: %s", buf.String())
	}
}

// TestNegotiateDevVersions: a development build's version (what make build
// stamps between releases, a bare commit, go build's "(devel)") is served
// without the "untested client version" warning; a version that is none
// of those keeps it.
func TestNegotiateDevVersions(t *testing.T) {
	v := &Version{ServerVersion: "v0.2.0-dev+669d2cc"}
	for _, tt := range []struct {
		client   string
		untested bool
	}{
		{"v0.2.0-dev+669d2cc-dirty", false},
		{"0.2.0-dev", false},
		{"dev", false},
		{"(devel)", false},
		{"669d2cc", false},
		{"669d2cc-dirty", false},
		{"v0.1.0-5-g669d2cc", false},
		{"v0.2.1-0.20261206020000-669d2cc12345", false},
		{"v0.1.0", false},
		{"", true},
		{"banana", true},
	} {
		resp, err := v.NegotiateCapabilities(context.Background(), &pb.NegotiateRequest{ClientVersion: tt.client})
		if err != nil || !resp.Accepted {
			t.Fatalf("client %q: %v, %v", tt.client, resp, err)
		}
		got := slices.ContainsFunc(resp.Warnings, func(s string) bool { return strings.Contains(s, "untested client version") })
		if got != tt.untested {
			t.Errorf("client %q: warnings %q; want untested %v", tt.client, resp.Warnings, tt.untested)
		}
	}
}
