package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// enumText is an enum value's name without prefix, lower-case ("working"
// for TEAMMATE_STATUS_WORKING), "-" for the zero value.
func enumText(name, prefix string, zero bool) string {
	if zero {
		return "-"
	}
	return strings.ToLower(strings.TrimPrefix(name, prefix))
}

// stepDetail is " (failed)" when a step's own status says more than the
// ccgrid status shows, "" otherwise.
func stepDetail(st pb.SubagentStatus) string {
	switch st {
	case pb.SubagentStatus_SUBAGENT_STATUS_FAILED, pb.SubagentStatus_SUBAGENT_STATUS_CANCELLED,
		pb.SubagentStatus_SUBAGENT_STATUS_SKIPPED, pb.SubagentStatus_SUBAGENT_STATUS_WAITING_FOR_USER:
		return " (" + strings.ToLower(subagentStatusText(st)) + ")"
	}
	return ""
}

// printTeammates writes one line per teammate.
func printTeammates(out io.Writer, list []*pb.Teammate) error {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "AGENT ID\tNAME\tKIND\tTYPE\tSTATUS\tSTEP\tCOST\tOUTPUT")
	for _, tm := range list {
		st := enumText(tm.GetStatus().String(), "TEAMMATE_STATUS_", tm.GetStatus() == 0) + stepDetail(tm.GetSubagentStatus())
		kind := strings.ReplaceAll(enumText(tm.GetKind().String(), "TEAMMATE_KIND_", tm.GetKind() == 0), "_", "-")
		step := "-"
		if tm.GetOrchestrationId() != "" {
			step = short(tm.GetOrchestrationId()) + "/" + tm.GetStepId()
		}
		cost := "-"
		if tm.GetCostUsd() > 0 {
			cost = fmt.Sprintf("$%.4f", tm.GetCostUsd())
		}
		output := tm.GetOutput()
		if tm.GetError() != "" {
			output = "error: " + tm.GetError()
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", tm.GetAgentId(), orDash(tm.GetName()), kind, orDash(tm.GetAgentType()),
			st, step, cost, orDash(firstLine(output, 60)))
	}
	return w.Flush()
}

// printTasks writes one line per task. A step's id "<orchestration
// id>/<step>" shows the orchestration id shortened, and the steps it
// waits for by their step ids (--json has them in full).
func printTasks(out io.Writer, list []*pb.TeamTask) error {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tSTATUS\tOWNER\tBLOCKED BY\tSUBJECT")
	for _, t := range list {
		st := enumText(t.GetStatus().String(), "TEAM_TASK_STATUS_", t.GetStatus() == 0) + stepDetail(t.GetStepStatus())
		id, prefix := t.GetId(), ""
		if o := t.GetOrchestrationId(); o != "" {
			prefix = o + "/"
			if step, ok := strings.CutPrefix(id, prefix); ok {
				id = short(o) + "/" + step
			}
		}
		blocked := make([]string, 0, len(t.GetBlockedBy()))
		for _, b := range t.GetBlockedBy() {
			if step, ok := strings.CutPrefix(b, prefix); ok && prefix != "" {
				b = step
			}
			blocked = append(blocked, b)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", id, st, orDash(t.GetAssignedAgentId()), orDash(strings.Join(blocked, ", ")),
			orDash(firstLine(t.GetSubject(), 60)))
	}
	return w.Flush()
}

// printTeammateSpecs writes one line per teammate spec.
func printTeammateSpecs(out io.Writer, list []*pb.TeammateSpec) error {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tNAME\tROLE\tMODEL\tSKILLS\tUPDATED\tINSTRUCTIONS")
	for _, s := range list {
		skills := "-"
		if len(s.GetSkillIds()) > 0 {
			skills = strings.Join(s.GetSkillIds(), ", ")
		}
		updated := s.GetUpdatedAt()
		if updated == nil {
			updated = s.GetCreatedAt()
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.GetId(), s.GetName(), orDash(s.GetRole()), orDash(s.GetModel()), skills,
			stamp(updated), orDash(firstLine(s.GetInstructions(), 50)))
	}
	return w.Flush()
}

// printSkillSpecs writes one line per skill spec.
func printSkillSpecs(out io.Writer, list []*pb.SkillSpec) error {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tNAME\tTYPE\tPLUGIN\tALLOWED TOOLS\tCREATED\tDESCRIPTION")
	for _, s := range list {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.GetId(), s.GetName(),
			enumText(s.GetSkillType().String(), "SKILL_TYPE_", s.GetSkillType() == 0), orDash(s.GetPluginName()),
			orDash(s.GetAllowedTools()), stamp(s.GetCreatedAt()), orDash(firstLine(s.GetDescription(), 60)))
	}
	return w.Flush()
}
