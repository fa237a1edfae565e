package main

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/betcode-dev/betcode/agent/client"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// newDaemonCmd is `betcode daemon`: the agent daemon itself.
func newDaemonCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "daemon",
		Short: "The agent daemon itself (status)",
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "status",
		Short: "Show the agent's health: each component (subprocess pool, SQLite, local server, relay tunnel), whether it is degraded and why, uptime and version",
		Long: `Show the agent's health as BetCodeHealth.GetHealthDetails reports it.

The exit status is 0 when the agent is serving (even degraded), 1 when it is
not serving, and the usual connection codes when it cannot be reached.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			conn, err := g.dial()
			if err != nil {
				return err
			}
			defer conn.Close()
			resp, err := pb.NewBetCodeHealthClient(conn).GetHealthDetails(cmd.Context(), &pb.HealthDetailsRequest{})
			if err != nil {
				return fmt.Errorf("ask the agent for its health: %w", err)
			}
			printHealth(cmd.OutOrStdout(), resp)
			if resp.OverallStatus != pb.ServingStatus_SERVING {
				return &client.ExitError{Code: client.ExitAgentError, Err: fmt.Errorf("the agent is %s", resp.OverallStatus)}
			}
			return nil
		},
	})
	return cmd
}

// printHealth writes a health report the way the spec's CLI Health Command
// shows it.
func printHealth(w io.Writer, h *pb.HealthDetailsResponse) {
	overall := h.OverallStatus.String()
	if h.Degraded {
		overall += " (degraded)"
	}
	fmt.Fprintf(w, "Daemon: %s\n", overall)
	for _, c := range h.Components {
		line := fmt.Sprintf("  %s: %s", c.Name, c.Status)
		if c.Message != "" {
			line += " (" + c.Message + ")"
		}
		fmt.Fprintln(w, line)
	}
	if h.Degraded {
		reason := h.DegradedReason
		if reason == "" {
			reason = "a component is not serving"
		}
		fmt.Fprintf(w, "\nDegraded: %s\n", reason)
	}
	md := h.Metadata
	if v := md["uptime"]; v != "" {
		fmt.Fprintf(w, "Uptime: %s\n", v)
	}
	if v := md["version"]; v != "" {
		fmt.Fprintf(w, "Version: %s\n", v)
	}
	if v := md["claude_version"]; v != "" {
		fmt.Fprintf(w, "Claude Code: %s\n", v)
	}
	var rest []string
	for k := range md {
		switch k {
		case "uptime", "version", "claude_version":
		default:
			rest = append(rest, k)
		}
	}
	sort.Strings(rest)
	for _, k := range rest {
		fmt.Fprintf(w, "%s: %s\n", strings.ReplaceAll(k, "_", " "), md[k])
	}
}
