package team

import (
	"slices"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/betcode-dev/betcode/agent/session"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// TaskTools are the tool names under which Claude Code starts a subagent
// inside a session: "Agent" on the wire since Claude Code 2.1 (its
// system/init still lists it as "Task"), "Task" before.
var TaskTools = []string{"Agent", "Task"}

// DefaultAgentType is Claude Code's subagent type when the call names none.
const DefaultAgentType = "general-purpose"

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
type taskToolFold struct {
	session string
	order   []*taskToolAgent
	byID    map[string]*taskToolAgent
}

type taskToolAgent struct {
	t    *pb.Teammate
	open bool // no result and no turn end yet
	text tail // the subagent's text so far
}

func newTaskToolFold(sessionID string) *taskToolFold {
	return &taskToolFold{session: sessionID, byID: map[string]*taskToolAgent{}}
}

// add takes the session's next event.
func (f *taskToolFold) add(ev *pb.AgentEvent) {
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
		a := f.byID[e.ToolCallResult.GetToolId()]
		if a == nil || !a.open {
			return
		}
		a.open = false
		a.t.Status = pb.TeammateStatus_TEAMMATE_STATUS_STOPPED
		a.t.Output = head(e.ToolCallResult.GetOutput(), MaxText)
		if e.ToolCallResult.GetIsError() {
			a.t.Error = a.t.Output
		}
		a.t.FinishedAt = ev.GetTimestamp()
	case *pb.AgentEvent_TextDelta:
		if a := f.byID[ev.GetParentToolUseId()]; a != nil && a.open {
			a.text.write(e.TextDelta.GetText())
		}
	case *pb.AgentEvent_TurnComplete:
		if ev.GetParentToolUseId() != "" {
			return
		}
		for _, a := range f.order {
			if a.open {
				a.open = false
				a.t.Status = pb.TeammateStatus_TEAMMATE_STATUS_STOPPED
				a.t.Output = a.text.String()
				a.t.Error = ErrTurnEnded
				a.t.FinishedAt = ev.GetTimestamp()
			}
		}
	}
}

// teammates returns the teammates, oldest first. A running one whose
// subagent has a permission request or question open (in pending) is idle.
func (f *taskToolFold) teammates(pending []*pb.AgentEvent) []*pb.Teammate {
	out := make([]*pb.Teammate, 0, len(f.order))
	for _, a := range f.order {
		if a.open {
			a.t.Output = a.text.String()
			waiting := slices.ContainsFunc(pending, func(p *pb.AgentEvent) bool { return p.GetParentToolUseId() == a.t.GetAgentId() })
			if waiting {
				a.t.Status = pb.TeammateStatus_TEAMMATE_STATUS_IDLE
			}
		}
		out = append(out, a.t)
	}
	return out
}

func str(fields map[string]*structpb.Value, key string) string {
	return fields[key].GetStringValue()
}
