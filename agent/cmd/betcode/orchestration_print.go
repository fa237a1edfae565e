package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/betcode-dev/betcode/agent/client"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// orchStatusText is "RUNNING" for ORCHESTRATION_STATUS_RUNNING.
func orchStatusText(st pb.OrchestrationStatus) string {
	if st == pb.OrchestrationStatus_ORCHESTRATION_STATUS_UNSPECIFIED {
		return "-"
	}
	return strings.TrimPrefix(st.String(), "ORCHESTRATION_STATUS_")
}

func terminalOrchestration(st pb.OrchestrationStatus) bool {
	return st != pb.OrchestrationStatus_ORCHESTRATION_STATUS_UNSPECIFIED && st != pb.OrchestrationStatus_ORCHESTRATION_STATUS_RUNNING
}

// completedSteps counts o's completed steps.
func completedSteps(o *pb.Orchestration) int {
	n := 0
	for _, s := range o.GetSteps() {
		if s.GetStatus() == pb.SubagentStatus_SUBAGENT_STATUS_COMPLETED {
			n++
		}
	}
	return n
}

// printOrchestration writes a headline and the table of o's steps.
func printOrchestration(out io.Writer, o *pb.Orchestration) error {
	name := ""
	if o.GetName() != "" {
		name = fmt.Sprintf(" %q", o.GetName())
	}
	fmt.Fprintf(out, "orchestration %s%s: %s, %d/%d steps completed\n", o.GetId(), name, orchStatusText(o.GetStatus()),
		completedSteps(o), len(o.GetSteps()))
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "STEP\tSTATUS\tATTEMPT\tSUBAGENT\tDEPENDS ON\tERROR")
	for _, s := range o.GetSteps() {
		attempt := "-"
		if s.GetAttempt() > 0 {
			attempt = fmt.Sprint(s.GetAttempt())
		}
		deps := "-"
		if len(s.GetDependsOn()) > 0 {
			deps = strings.Join(s.GetDependsOn(), ", ")
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", s.GetStepId(), subagentStatusText(s.GetStatus()), attempt,
			orDash(s.GetSubagentId()), deps, orDash(firstLine(s.GetError(), 60)))
	}
	return w.Flush()
}

// printOrchestrationList writes one line per orchestration.
func printOrchestrationList(out io.Writer, list []*pb.Orchestration) error {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tNAME\tSTATUS\tSTEPS DONE\tPARENT\tCREATED\tFINISHED")
	for _, o := range list {
		fmt.Fprintf(w, "%s\t%s\t%s\t%d/%d\t%s\t%s\t%s\n", o.GetId(), orDash(o.GetName()), orchStatusText(o.GetStatus()),
			completedSteps(o), len(o.GetSteps()), o.GetParentSessionId(), stamp(o.GetCreatedAt()), stamp(o.GetFinishedAt()))
	}
	return w.Flush()
}

// orchestrationView prints a WatchOrchestration stream. It keeps the
// orchestration's state (the snapshot with the step updates applied);
// live, it redraws the table in place after each event (a terminal);
// otherwise it prints the table at the first and the last snapshot and
// one line per step update between them.
type orchestrationView struct {
	out   io.Writer
	json  bool
	live  bool
	state *pb.Orchestration
	drawn int // lines of the table on screen (live)
}

func (v *orchestrationView) print(m *pb.WatchOrchestrationResponse) error {
	first := v.state == nil
	var prev pb.SubagentStatus
	switch {
	case m.GetSnapshot() != nil:
		v.state = proto.CloneOf(m.GetSnapshot())
	case m.GetStepUpdate() != nil && v.state != nil:
		prev = v.apply(m.GetStepUpdate())
	}
	if v.json {
		return printJSON(v.out, m)
	}
	if v.state == nil {
		return nil
	}
	if v.live {
		return v.redraw()
	}
	if snap := m.GetSnapshot(); snap != nil {
		if first || terminalOrchestration(snap.GetStatus()) {
			return printOrchestration(v.out, v.state)
		}
		return nil
	}
	u := m.GetStepUpdate()
	change := subagentStatusText(prev) + " -> " + subagentStatusText(u.GetStatus())
	if prev == u.GetStatus() {
		change = subagentStatusText(u.GetStatus()) // a new subagent, attempt or error
	}
	line := fmt.Sprintf("%s  %s  %s", m.GetTimestamp().AsTime().Local().Format(time.TimeOnly), u.GetStepId(), change)
	if u.GetAttempt() > 0 {
		line += fmt.Sprintf("  attempt %d", u.GetAttempt())
	}
	if u.GetSubagentId() != "" {
		line += "  subagent " + u.GetSubagentId()
	}
	if u.GetError() != "" {
		line += "  error: " + firstLine(u.GetError(), 100)
	}
	_, err := fmt.Fprintln(v.out, line)
	return err
}

// apply puts a step's new state into v.state and returns its previous
// status.
func (v *orchestrationView) apply(u *pb.OrchestrationStepState) pb.SubagentStatus {
	for i, s := range v.state.Steps {
		if s.GetStepId() == u.GetStepId() {
			v.state.Steps[i] = proto.CloneOf(u)
			return s.GetStatus()
		}
	}
	v.state.Steps = append(v.state.Steps, proto.CloneOf(u))
	return pb.SubagentStatus_SUBAGENT_STATUS_UNSPECIFIED
}

// redraw replaces the table on screen by the current one.
func (v *orchestrationView) redraw() error {
	var b bytes.Buffer
	if v.drawn > 0 {
		fmt.Fprintf(&b, "\x1b[%dA\x1b[J", v.drawn) // up to the table's first line, clear below
	}
	var t bytes.Buffer
	if err := printOrchestration(&t, v.state); err != nil {
		return err
	}
	v.drawn = bytes.Count(t.Bytes(), []byte("\n"))
	b.Write(t.Bytes())
	_, err := v.out.Write(b.Bytes())
	return err
}

// result is nil when the orchestration completed, else an error (exit 1)
// naming the steps that did not complete.
func (v *orchestrationView) result(id string) error {
	if v.state == nil {
		return &client.ExitError{Code: client.ExitConnection, Err: fmt.Errorf("watch orchestration %s: the stream ended before its first snapshot", id)}
	}
	st := v.state.GetStatus()
	switch {
	case st == pb.OrchestrationStatus_ORCHESTRATION_STATUS_COMPLETED:
		return nil
	case !terminalOrchestration(st):
		return &client.ExitError{Code: client.ExitConnection, Err: fmt.Errorf("watch orchestration %s: the stream ended while it was %s", id, orchStatusText(st))}
	}
	var steps []string
	for _, s := range v.state.GetSteps() {
		if s.GetStatus() == pb.SubagentStatus_SUBAGENT_STATUS_COMPLETED {
			continue
		}
		d := s.GetStepId() + " " + subagentStatusText(s.GetStatus())
		if s.GetError() != "" {
			d += " (" + firstLine(s.GetError(), 80) + ")"
		}
		steps = append(steps, d)
	}
	msg := fmt.Sprintf("orchestration %s ended %s", id, orchStatusText(st))
	if len(steps) > 0 {
		msg += ": " + strings.Join(steps, ", ")
	}
	return &client.ExitError{Code: client.ExitAgentError, Err: errors.New(msg)}
}
