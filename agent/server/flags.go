package server

import (
	"fmt"
	"slices"
	"strings"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/buildinfo"
)

// Flag is one feature flag: what GetVersion lists as a FeatureFlag and
// NegotiateCapabilities grants by name.
type Flag struct {
	Name, Description string
	Stage             pb.FeatureStage
	Since             string // server version that added it
	MinClient         string // oldest client that may use it; empty: any
	Enabled           bool   // served by this agent
	// For DEPRECATED flags: when deprecation started, when it goes, what to
	// use instead, where the migration is described, and how urgent it is.
	DeprecatedIn, RemovalIn string
	Replacement             string
	MigrationURL            string
	Severity                pb.Severity
}

// LegacyPermissionFormat is the spec's deprecated flag. In BetCode it is the
// one old-format permission answer the agent still accepts: a
// PermissionResponse whose decision is left unset
// (PERMISSION_DECISION_UNSPECIFIED), taken as DENY.
const LegacyPermissionFormat = "legacy_permission_format"

// SubagentOrchestration is the flag of SubagentService (package
// subagent): ALPHA, off unless the daemon is started with
// --feature-flag subagent_orchestration.
const SubagentOrchestration = "subagent_orchestration"

// DefaultFlags are the agent's feature flags. Stages follow the spec's table
// where the spec names the flag; Enabled says whether this agent serves it
// (--feature-flag turns on the ones that are off, see Enable).
var DefaultFlags = []Flag{
	{Name: "streaming_deltas", Description: "Real-time text streaming", Stage: pb.FeatureStage_STABLE, Since: "0.1.0", Enabled: true},
	{Name: "permission_bridge", Description: "Permission request forwarding", Stage: pb.FeatureStage_STABLE, Since: "0.1.0", Enabled: true},
	{Name: "session_persistence", Description: "SQLite message storage", Stage: pb.FeatureStage_STABLE, Since: "0.1.0", Enabled: true},
	{Name: "context_compaction", Description: "Session context compression (CompactSession, auto-compaction)", Stage: pb.FeatureStage_BETA, Since: "0.2.0", Enabled: true},
	{Name: "worktree_management", Description: "Git worktree operations (WorktreeService)", Stage: pb.FeatureStage_BETA, Since: "0.2.0", Enabled: true},
	{Name: SubagentOrchestration, Description: "Multi-agent DAG execution (SubagentService)", Stage: pb.FeatureStage_ALPHA, Since: "0.2.0"},
	{
		Name: LegacyPermissionFormat, Description: "PermissionResponse without a decision, taken as DENY",
		Stage: pb.FeatureStage_DEPRECATED, Since: "0.1.0", Enabled: true,
		DeprecatedIn: "0.2.0", RemovalIn: "0.4.0",
		Replacement:  "PermissionResponse.decision = DENY (with a reason)",
		MigrationURL: "https://github.com/betcode-dev/betcode/blob/main/docs/api.md#versions-and-negotiation",
		Severity:     pb.Severity_WARNING,
	},
}

// Proto returns the flag as GetVersion lists it.
func (f Flag) Proto() *pb.FeatureFlag {
	return &pb.FeatureFlag{
		Name: f.Name, Description: f.Description, Stage: f.Stage, IntroducedVersion: f.Since,
		MinClientVersion: f.MinClient, DeprecatedVersion: f.DeprecatedIn, RemovalVersion: f.RemovalIn,
	}
}

// Warning returns the DeprecationWarning sent when the flag's feature is
// used.
func (f Flag) Warning() *pb.DeprecationWarning {
	return &pb.DeprecationWarning{
		Feature: f.Name, Replacement: f.Replacement, RemovalVersion: f.RemovalIn,
		MigrationUrl: f.MigrationURL, Severity: f.Severity,
	}
}

func (f Flag) deprecationText() string {
	s := f.Name + " is deprecated"
	if f.RemovalIn != "" {
		s += " and goes in " + f.RemovalIn
	}
	if f.Replacement != "" {
		s += ": use " + f.Replacement
	}
	return s
}

// Enable returns a copy of flags with the named ones enabled (the
// --feature-flag setting); a name that is not a flag is an error.
func Enable(flags []Flag, names []string) ([]Flag, error) {
	out := slices.Clone(flags)
	for _, name := range names {
		i := slices.IndexFunc(out, func(f Flag) bool { return f.Name == name })
		if i < 0 {
			return nil, fmt.Errorf("feature flag %q does not exist (known: %s)", name, strings.Join(flagNames(flags), ", "))
		}
		out[i].Enabled = true
	}
	return out, nil
}

// IsEnabled reports whether the flag named name is on in flags.
func IsEnabled(flags []Flag, name string) bool {
	f, ok := findFlag(flags, name)
	return ok && f.Enabled
}

func flagNames(flags []Flag) []string {
	names := make([]string, 0, len(flags))
	for _, f := range flags {
		names = append(names, f.Name)
	}
	return names
}

func findFlag(flags []Flag, name string) (Flag, bool) {
	for _, f := range flags {
		if f.Name == name {
			return f, true
		}
	}
	return Flag{}, false
}

func enabledNames(flags []Flag) []string {
	var names []string
	for _, f := range flags {
		if f.Enabled {
			names = append(names, f.Name)
		}
	}
	return names
}

// ClaudeRange is the Claude Code releases an agent build was tested with
// (make compat): Min the oldest supported, Max the newest tested.
type ClaudeRange struct{ Min, Max string }

// Compatibility classifies a Claude Code version: inside the range
// FULLY_COMPATIBLE; older than Min INCOMPATIBLE; newer than Max in the same
// major version LIKELY_COMPATIBLE, in a newer major DEGRADED (the
// stream-json protocol may have changed); an unknown version
// COMPATIBILITY_UNKNOWN. With no range, a known version is LIKELY_COMPATIBLE.
func (r ClaudeRange) Compatibility(version string) pb.CompatibilityLevel {
	v, ok := buildinfo.Parse(version)
	if !ok {
		return pb.CompatibilityLevel_COMPATIBILITY_UNKNOWN
	}
	min, hasMin := buildinfo.Parse(r.Min)
	max, hasMax := buildinfo.Parse(r.Max)
	switch {
	case !hasMin && !hasMax:
		return pb.CompatibilityLevel_LIKELY_COMPATIBLE
	case hasMin && v.Less(min):
		return pb.CompatibilityLevel_INCOMPATIBLE
	case !hasMax || !max.Less(v):
		return pb.CompatibilityLevel_FULLY_COMPATIBLE
	case v[0] > max[0]:
		return pb.CompatibilityLevel_DEGRADED
	default:
		return pb.CompatibilityLevel_LIKELY_COMPATIBLE
	}
}
