package team

import (
	"slices"
	"strings"

	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/betcode-dev/betcode/agent/session"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// TaskTools are the tool names under which Claude Code starts a subagent
// inside a session: "Agent" on the wire since Claude Code 2.1 (its
// system/init still lists it as "Task"), "Task" before.
var TaskTools = []string{"Agent", "Task"}

// DefaultAgentType is Claude Code's subagent type when the call names none.
const DefaultAgentType = "general-purpose"

// BackgroundLaunch starts the Agent tool's result when Claude Code ran the
// subagent in the background (its default in print mode in 2.1.328; an
// input run_in_background: true asks for it): the result only says that
// the subagent started, which then goes on after its parent's turn ended.
// agent/e2e/team_test.go checks the text against the pinned CLI.
const BackgroundLaunch = "Async agent launched"

// reportMarker precedes the subagent's report in the Agent tool's result of
// a foreground subagent; the report's lines are indented by two spaces, and
// the harness's own lines (e.g. "agentId: …") start at column zero.
const reportMarker = "The report follows:\n"

// Event kinds (session.Kind) the folds read.
var (
	kindToolStart  = session.Kind(&pb.AgentEvent{Event: &pb.AgentEvent_ToolCallStart{}})
	kindToolResult = session.Kind(&pb.AgentEvent{Event: &pb.AgentEvent_ToolCallResult{}})
	kindText       = session.Kind(&pb.AgentEvent{Event: &pb.AgentEvent_TextDelta{}})
	kindTurnEnd    = session.Kind(&pb.AgentEvent{Event: &pb.AgentEvent_TurnComplete{}})
	kindTodo       = session.Kind(&pb.AgentEvent{Event: &pb.AgentEvent_TodoUpdate{}})
	kindUserInput  = session.Kind(&pb.AgentEvent{Event: &pb.AgentEvent_UserInput{}})
)

// taskToolKinds are the events taskToolFold reads.
var taskToolKinds = []string{kindToolStart, kindToolResult, kindText, kindTurnEnd}

// ErrTurnEnded is the error of a Task-tool teammate whose session's turn
// ended (interrupted, crashed) before the tool call returned.
const ErrTurnEnded = "the session's turn ended before the subagent reported back"

// taskToolFold turns a session's events, in order, into the teammates its
// Agent/Task tool calls started. It is pure: feed it with add, read the
// result with teammates.
//
// A foreground subagent works until its call's ToolCallResult, which holds
// its report. A background one's ToolCallResult comes at once
// (BackgroundLaunch) and the end of its run is not in the event log (Claude
// Code announces it with a system/task_notification line, which agent/bridge
// does not translate): it counts as stopped while its latest event is a
// whole text, which is how a subagent's run ends (a final message without a
// tool call), and as working again if more of its events follow.
type taskToolFold struct {
	session string
	order   []*taskToolAgent
	byID    map[string]*taskToolAgent
}

type taskToolAgent struct {
	t          *pb.Teammate
	open       bool // no result (foreground) and no turn end yet
	background bool // its result was BackgroundLaunch
	text       tail // the subagent's text so far
	// endsWithText: the subagent's latest event is a whole text, at
	// lastAt.
	endsWithText bool
	lastAt       *timestamppb.Timestamp
}

func newTaskToolFold(sessionID string) *taskToolFold {
	return &taskToolFold{session: sessionID, byID: map[string]*taskToolAgent{}}
}

// add takes the session's next event.
func (f *taskToolFold) add(ev *pb.AgentEvent) {
	if a := f.byID[ev.GetParentToolUseId()]; a != nil {
		a.subagentEvent(ev)
	}
	switch e := ev.Event.(type) {
	case *pb.AgentEvent_ToolCallStart:
		cs := e.ToolCallStart
		if !slices.Contains(TaskTools, cs.GetToolName()) || f.byID[cs.GetToolId()] != nil {
			return
		}
		in := cs.GetInput().GetFields()
		a := &taskToolAgent{open: true, t: &pb.Teammate{
			AgentId: cs.GetToolId(), SessionId: f.session, Kind: pb.TeammateKind_TEAMMATE_KIND_TASK_TOOL,
			Status: pb.TeammateStatus_TEAMMATE_STATUS_WORKING, Name: str(in, "description"),
			AgentType: str(in, "subagent_type"), Prompt: head(str(in, "prompt"), MaxText), CreatedAt: ev.GetTimestamp(),
		}}
		if a.t.AgentType == "" {
			a.t.AgentType = DefaultAgentType
		}
		if a.t.Name == "" {
			a.t.Name = a.t.AgentType
		}
		f.byID[cs.GetToolId()] = a
		f.order = append(f.order, a)
	case *pb.AgentEvent_ToolCallResult:
		r := e.ToolCallResult
		a := f.byID[r.GetToolId()]
		if a == nil || !a.open || a.background {
			return
		}
		if !r.GetIsError() && strings.HasPrefix(r.GetOutput(), BackgroundLaunch) {
			a.background = true
			return
		}
		a.open = false
		a.t.Status = pb.TeammateStatus_TEAMMATE_STATUS_STOPPED
		a.t.Output = head(report(r.GetOutput()), MaxText)
		if r.GetIsError() {
			a.t.Error = a.t.Output
		}
		a.t.FinishedAt = ev.GetTimestamp()
	case *pb.AgentEvent_TurnComplete:
		if ev.GetParentToolUseId() != "" {
			return
		}
		for _, a := range f.order {
			if a.open && !a.background {
				a.open = false
				a.t.Status = pb.TeammateStatus_TEAMMATE_STATUS_STOPPED
				a.t.Output = a.text.String()
				a.t.Error = ErrTurnEnded
				a.t.FinishedAt = ev.GetTimestamp()
			}
		}
	}
}

// subagentEvent follows an event of a's subagent.
func (a *taskToolAgent) subagentEvent(ev *pb.AgentEvent) {
	if !a.open {
		return
	}
	d := ev.GetTextDelta()
	if d != nil {
		a.text.write(d.GetText())
	}
	a.endsWithText = d.GetIsComplete() && d.GetText() != ""
	a.lastAt = ev.GetTimestamp()
}

// teammates returns the teammates, oldest first. A running one whose
// subagent has a permission request or question open (in pending) is idle.
func (f *taskToolFold) teammates(pending []*pb.AgentEvent) []*pb.Teammate {
	out := make([]*pb.Teammate, 0, len(f.order))
	for _, a := range f.order {
		if a.open {
			a.t.Output = a.text.String()
			waiting := slices.ContainsFunc(pending, func(p *pb.AgentEvent) bool { return p.GetParentToolUseId() == a.t.GetAgentId() })
			switch {
			case waiting:
				a.t.Status = pb.TeammateStatus_TEAMMATE_STATUS_IDLE
			case a.background && a.endsWithText:
				a.t.Status = pb.TeammateStatus_TEAMMATE_STATUS_STOPPED
				a.t.FinishedAt = a.lastAt
			}
		}
		out = append(out, a.t)
	}
	return out
}

// report is the subagent's report in a foreground Agent call's result:
// the indented lines after reportMarker, unindented, without the harness's
// lines that follow; the whole output when it has no marker.
func report(output string) string {
	_, rest, ok := strings.Cut(output, reportMarker)
	if !ok {
		return output
	}
	var lines []string
	for line := range strings.Lines(rest) {
		body, indented := strings.CutPrefix(line, "  ")
		if !indented && strings.TrimSpace(line) != "" {
			break // the harness's own text again
		}
		lines = append(lines, body)
	}
	return strings.TrimRight(strings.Join(lines, ""), "\n")
}

func str(fields map[string]*structpb.Value, key string) string {
	return fields[key].GetStringValue()
}
