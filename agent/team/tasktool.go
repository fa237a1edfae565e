package team

import (
	"cmp"
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
	kindToolStart    = session.Kind(&pb.AgentEvent{Event: &pb.AgentEvent_ToolCallStart{}})
	kindToolResult   = session.Kind(&pb.AgentEvent{Event: &pb.AgentEvent_ToolCallResult{}})
	kindText         = session.Kind(&pb.AgentEvent{Event: &pb.AgentEvent_TextDelta{}})
	kindTurnEnd      = session.Kind(&pb.AgentEvent{Event: &pb.AgentEvent_TurnComplete{}})
	kindTodo         = session.Kind(&pb.AgentEvent{Event: &pb.AgentEvent_TodoUpdate{}})
	kindUserInput    = session.Kind(&pb.AgentEvent{Event: &pb.AgentEvent_UserInput{}})
	kindSubagentTask = session.Kind(&pb.AgentEvent{Event: &pb.AgentEvent_SubagentTask{}})
	kindSessionInfo  = session.Kind(&pb.AgentEvent{Event: &pb.AgentEvent_SessionInfo{}})
)

// taskToolKinds are the events taskToolFold reads.
var taskToolKinds = []string{kindToolStart, kindToolResult, kindText, kindTurnEnd, kindSubagentTask, kindSessionInfo}

// Errors of Task-tool teammates that stopped without finishing.
const (
	// ErrTurnEnded: the session's turn ended (interrupted, crashed) before
	// a foreground call returned.
	ErrTurnEnded = "the session's turn ended before the subagent reported back"
	// ErrStopped: Claude Code stopped the subagent (an interrupt, stop_task,
	// the TaskStop tool).
	ErrStopped = "the subagent was stopped before it finished"
	// ErrFailed: Claude Code reported a failure without saying why.
	ErrFailed = "the subagent failed"
	// ErrProcessEnded: the session's Claude Code process ended (stopped,
	// restarted) while the subagent ran; its subagents ended with it,
	// without a word in the log.
	ErrProcessEnded = "the session's Claude Code process ended before the subagent finished"
)

// taskToolFold turns a session's events, in order, into the teammates its
// Agent/Task tool calls started. It is pure: feed it with add, read the
// result with teammates.
//
// A teammate works from its call's ToolCallStart until the
// SubagentTaskUpdate that ends its subagent: COMPLETED (stopped, its
// output the report), FAILED or STOPPED (stopped with an error). A
// foreground call's ToolCallResult, and the end of the turn that made it,
// end it too if that update did not come. A background call's result comes
// at once (BackgroundLaunch), so only the update can end it, or the end of
// the session's Claude Code process (a SessionInfo with is_resumed starts
// the next one), which takes its subagents with it.
//
// Logs written before agent/bridge translated Claude Code's task lines
// (before 0.5.0) have no SubagentTaskUpdate: for a background call without
// any, the fold falls back to a guess, stopped while its subagent's latest
// event is a whole text (a subagent's run ends with a message without a
// tool call) and working again if more of its events follow.
type taskToolFold struct {
	session string
	order   []*taskToolAgent
	byID    map[string]*taskToolAgent
}

type taskToolAgent struct {
	t          *pb.Teammate
	open       bool // not ended yet
	background bool // its result was BackgroundLaunch, or its task said so
	tracked    bool // SubagentTaskUpdates report it: no guessing its end
	text       tail // the subagent's text so far
	// endsWithText: the subagent's latest event is a whole text, at
	// lastAt (the fallback for untracked background calls).
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
		f.start(ev, e.ToolCallStart)
	case *pb.AgentEvent_SubagentTask:
		if a := f.byID[e.SubagentTask.GetToolUseId()]; a != nil {
			a.task(ev, e.SubagentTask)
		}
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
		out := head(report(r.GetOutput()), MaxText)
		errText := ""
		if r.GetIsError() {
			errText = out
		}
		a.stop(ev, out, errText)
	case *pb.AgentEvent_TurnComplete:
		if ev.GetParentToolUseId() != "" {
			return
		}
		for _, a := range f.order {
			if a.open && !a.background {
				a.stop(ev, a.text.String(), ErrTurnEnded)
			}
		}
	case *pb.AgentEvent_SessionInfo:
		if !e.SessionInfo.GetIsResumed() || ev.GetParentToolUseId() != "" {
			return
		}
		for _, a := range f.order {
			switch {
			case !a.open:
			case a.guessedEnd():
				a.stop(&pb.AgentEvent{Timestamp: a.lastAt}, a.text.String(), "")
			default:
				a.stop(ev, a.text.String(), ErrProcessEnded)
			}
		}
	}
}

// start makes a teammate of an Agent/Task tool call.
func (f *taskToolFold) start(ev *pb.AgentEvent, cs *pb.ToolCallStart) {
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
}

// task follows an update of a's subagent.
func (a *taskToolAgent) task(ev *pb.AgentEvent, u *pb.SubagentTaskUpdate) {
	a.tracked = true
	if u.GetStatus() == pb.SubagentTaskStatus_SUBAGENT_TASK_STATUS_STARTED && !a.open {
		// Continued after it ended (Claude Code starts it again).
		a.open = true
		a.t.Status, a.t.Error, a.t.FinishedAt = pb.TeammateStatus_TEAMMATE_STATUS_WORKING, "", nil
	}
	if !a.open {
		return
	}
	a.background = a.background || u.GetIsBackgrounded()
	switch u.GetStatus() {
	case pb.SubagentTaskStatus_SUBAGENT_TASK_STATUS_COMPLETED:
		out := u.GetSummary()
		if out == "" {
			out = a.text.String()
		}
		a.stop(ev, head(out, MaxText), "")
	case pb.SubagentTaskStatus_SUBAGENT_TASK_STATUS_FAILED:
		errText := cmp.Or(u.GetError(), u.GetSummary(), ErrFailed)
		a.stop(ev, a.text.String(), head(errText, MaxText))
	case pb.SubagentTaskStatus_SUBAGENT_TASK_STATUS_STOPPED:
		a.stop(ev, a.text.String(), ErrStopped)
	}
}

// stop ends a at ev with its output and, if it did not finish, an error.
func (a *taskToolAgent) stop(ev *pb.AgentEvent, output, errText string) {
	a.open = false
	a.t.Status = pb.TeammateStatus_TEAMMATE_STATUS_STOPPED
	a.t.Output, a.t.Error, a.t.FinishedAt = output, errText, ev.GetTimestamp()
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

// guessedEnd reports whether an untracked background call counts as ended
// by the fallback for old logs.
func (a *taskToolAgent) guessedEnd() bool {
	return a.background && !a.tracked && a.endsWithText
}

// teammates returns the teammates, oldest first. A working one whose
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
			case a.guessedEnd():
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
