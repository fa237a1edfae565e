package main

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// cliFeatures are the features betcode asks for when it negotiates.
var cliFeatures = []string{"streaming_deltas", "permission_bridge", "session_persistence"}

func newVersionCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Show this client's version and the agent's: API, Claude Code and its compatibility, minimum client, feature flags",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "betcode %s\n", version)
			conn, err := g.dial()
			if err != nil {
				return err
			}
			defer conn.Close()
			resp, err := pb.NewVersionServiceClient(conn).GetVersion(cmd.Context(), &pb.GetVersionRequest{})
			if err != nil {
				return fmt.Errorf("get the agent's version: %w", err)
			}
			printVersion(cmd, resp)
			return nil
		},
	}
}

func printVersion(cmd *cobra.Command, v *pb.GetVersionResponse) {
	out := cmd.OutOrStdout()
	fmt.Fprintf(out, "agent   %s (API %s)\n", v.ServerVersion, v.ApiVersion)
	if cc := v.ClaudeCode; cc != nil {
		fmt.Fprintf(out, "claude  %s %s", orUnknown(cc.Version), compatibilityName(cc.Compatibility))
		if cc.TestedMinVersion != "" || cc.TestedMaxVersion != "" {
			fmt.Fprintf(out, " (tested %s – %s)", orUnknown(cc.TestedMinVersion), orUnknown(cc.TestedMaxVersion))
		}
		fmt.Fprintln(out)
	}
	if c := v.Constraints; c != nil {
		fmt.Fprintf(out, "minimum client %s", c.MinClientVersion)
		if c.RecommendedClient != "" {
			fmt.Fprintf(out, ", recommended %s", c.RecommendedClient)
		}
		fmt.Fprintln(out)
	}
	if len(v.FeatureFlags) == 0 {
		if len(v.Features) > 0 {
			fmt.Fprintf(out, "features: %s\n", strings.Join(v.Features, ", "))
		}
		return
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "FEATURE\tSTAGE\tSINCE\tSTATE\tNOTE")
	enabled := map[string]bool{}
	for _, f := range v.Features {
		enabled[f] = true
	}
	for _, f := range v.FeatureFlags {
		state := "off"
		if enabled[f.Name] {
			state = "on"
		}
		note := ""
		if f.RemovalVersion != "" {
			note = "removal in " + f.RemovalVersion
			if r := v.GetConstraints().GetFeatureReplacements()[f.Name]; r != "" {
				note += "; use " + r
			}
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", f.Name, strings.ToLower(f.Stage.String()), f.IntroducedVersion, state, note)
	}
	w.Flush()
}

func compatibilityName(c pb.CompatibilityLevel) string {
	if c == pb.CompatibilityLevel_COMPATIBILITY_UNKNOWN {
		return "compatibility unknown"
	}
	return strings.ToLower(strings.ReplaceAll(c.String(), "_", " "))
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}
