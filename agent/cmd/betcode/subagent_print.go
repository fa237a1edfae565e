package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// printSubagent writes one subagent as "key: value" lines, its result or
// error last, in full.
func printSubagent(out io.Writer, sa *pb.Subagent) error {
	w := tabwriter.NewWriter(out, 0, 4, 1, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(w, "%s:\t%s\n", k, v) }
	row("id", sa.GetId())
	row("name", orDash(sa.GetName()))
	row("status", subagentStatusText(sa.GetStatus()))
	row("parent", sa.GetParentSessionId())
	row("session", orDash(sa.GetSessionId()))
	if sa.GetOrchestrationId() != "" {
		row("orchestration", fmt.Sprintf("%s, step %s (attempt %d)", sa.GetOrchestrationId(), sa.GetStepId(), sa.GetAttempt()))
	}
	if sa.GetProvider() != pb.SessionProvider_SESSION_PROVIDER_UNSPECIFIED {
		row("provider", providerText(sa.GetProvider()))
	}
	row("model", orDash(sa.GetModel()))
	if sa.GetWorktreeId() != "" {
		row("worktree", sa.GetWorktreeId())
	}
	if u := sa.GetUsage(); u.GetInputTokens()+u.GetOutputTokens() > 0 || u.GetCostUsd() > 0 {
		row("usage", fmt.Sprintf("%d in / %d out tokens, $%.4f", u.GetInputTokens(), u.GetOutputTokens(), u.GetCostUsd()))
	}
	row("created", stamp(sa.GetCreatedAt()))
	row("started", stamp(sa.GetStartedAt()))
	if sa.GetFinishedAt() != nil {
		row("finished", stamp(sa.GetFinishedAt()))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	var err error
	if sa.GetError() != "" {
		_, err = fmt.Fprintf(out, "error:\n%s\n", indent(sa.GetError()))
	}
	if err == nil && sa.GetResult() != "" {
		_, err = fmt.Fprintf(out, "result:\n%s\n", indent(sa.GetResult()))
	}
	return err
}

// indent prefixes every line of s with two spaces.
func indent(s string) string {
	return "  " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n  ")
}

// printSubagentTable writes one line per subagent; now dates the running
// ones' durations.
func printSubagentTable(out io.Writer, list []*pb.Subagent, now time.Time) error {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tNAME\tSTATUS\tSTEP\tMODEL\tTOKENS IN/OUT\tCOST\tTOOK\tRESULT")
	for _, sa := range list {
		step := "-"
		if sa.GetOrchestrationId() != "" {
			step = short(sa.GetOrchestrationId()) + "/" + sa.GetStepId()
			if sa.GetAttempt() > 1 {
				step += fmt.Sprintf(" #%d", sa.GetAttempt())
			}
		}
		cost := "-"
		if c := sa.GetUsage().GetCostUsd(); c > 0 {
			cost = fmt.Sprintf("$%.4f", c)
		}
		result := sa.GetResult()
		if sa.GetError() != "" {
			result = "error: " + sa.GetError()
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%d/%d\t%s\t%s\t%s\n", sa.GetId(), orDash(sa.GetName()), subagentStatusText(sa.GetStatus()),
			step, orDash(sa.GetModel()), sa.GetUsage().GetInputTokens(), sa.GetUsage().GetOutputTokens(), cost,
			took(sa.GetStartedAt(), sa.GetFinishedAt(), now), orDash(firstLine(result, 60)))
	}
	return w.Flush()
}

// took is the time from start to end (or to now, while running), "-"
// before the start.
func took(start, end *timestamppb.Timestamp, now time.Time) string {
	if start == nil {
		return "-"
	}
	to := now
	if end != nil {
		to = end.AsTime()
	}
	d := to.Sub(start.AsTime())
	if d < 0 {
		d = 0
	}
	if d < time.Minute {
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}
