package team

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

var t0 = time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)

func at(sec int) *timestamppb.Timestamp {
	return timestamppb.New(t0.Add(time.Duration(sec) * time.Second))
}

func toolStart(sec int, id, tool string, input map[string]any) *pb.AgentEvent {
	in, err := structpb.NewStruct(input)
	if err != nil {
		panic(err)
	}
	return &pb.AgentEvent{Timestamp: at(sec), Event: &pb.AgentEvent_ToolCallStart{ToolCallStart: &pb.ToolCallStart{ToolId: id, ToolName: tool, Input: in}}}
}

func toolResult(sec int, id, output string, isErr bool) *pb.AgentEvent {
	return &pb.AgentEvent{Timestamp: at(sec), Event: &pb.AgentEvent_ToolCallResult{ToolCallResult: &pb.ToolCallResult{ToolId: id, Output: output, IsError: isErr}}}
}

func textOf(parent, s string) *pb.AgentEvent {
	return &pb.AgentEvent{ParentToolUseId: parent, Event: &pb.AgentEvent_TextDelta{TextDelta: &pb.TextDelta{Text: s, IsComplete: parent != ""}}}
}

// Results of the Agent tool as Claude Code 2.1 writes them.
const (
	launched = "Async agent launched successfully. (This tool result is internal metadata.)\nagentId: a55e (internal ID)\nThe agent is working in the background."
	handBack = "[Subagent hand-back] The text below is the final report of a subagent. The report follows:\n  The report.\n  Second line.\nagentId: a9e4 (use SendMessage with to: 'a9e4' to continue this agent.)"
)

func subText(sec int, parent, s string) *pb.AgentEvent {
	return &pb.AgentEvent{Timestamp: at(sec), ParentToolUseId: parent, Event: &pb.AgentEvent_TextDelta{TextDelta: &pb.TextDelta{Text: s, IsComplete: true}}}
}

func subTool(sec int, parent, id string) *pb.AgentEvent {
	ev := toolStart(sec, id, "Bash", map[string]any{"command": "ls"})
	ev.ParentToolUseId = parent
	return ev
}

func turnEnd(sec int) *pb.AgentEvent {
	return &pb.AgentEvent{Timestamp: at(sec), Event: &pb.AgentEvent_TurnComplete{TurnComplete: &pb.TurnComplete{StopReason: "end_turn"}}}
}

// taskUpdate is a SubagentTaskUpdate of the Agent call id, as agent/bridge
// makes them.
func taskUpdate(sec int, id string, status pb.SubagentTaskStatus, bg bool, summary, errText string) *pb.AgentEvent {
	return &pb.AgentEvent{Timestamp: at(sec), Event: &pb.AgentEvent_SubagentTask{SubagentTask: &pb.SubagentTaskUpdate{
		ToolUseId: id, TaskId: "task-" + id, Status: status, Description: "Research OAuth", SubagentType: "researcher",
		IsBackgrounded: bg, Summary: summary, Error: errText,
	}}}
}

func resumed(sec int) *pb.AgentEvent {
	return &pb.AgentEvent{Timestamp: at(sec), Event: &pb.AgentEvent_SessionInfo{SessionInfo: &pb.SessionInfo{SessionId: "s1", IsResumed: true}}}
}

func permissionOf(parent string) *pb.AgentEvent {
	return &pb.AgentEvent{ParentToolUseId: parent, Event: &pb.AgentEvent_PermissionRequest{PermissionRequest: &pb.PermissionRequest{RequestId: "r1", ToolName: "Bash"}}}
}

var researchInput = map[string]any{"description": "Research OAuth", "prompt": "Find the OAuth pitfalls", "subagent_type": "researcher"}

func taskTool(id string, status pb.TeammateStatus, created int) *pb.Teammate {
	return &pb.Teammate{
		AgentId: id, SessionId: "s1", Name: "Research OAuth", AgentType: "researcher", Status: status,
		Kind: pb.TeammateKind_TEAMMATE_KIND_TASK_TOOL, Prompt: "Find the OAuth pitfalls", CreatedAt: at(created),
	}
}

func with(t *pb.Teammate, f func(*pb.Teammate)) *pb.Teammate { f(t); return t }

func TestTaskToolFold(t *testing.T) {
	working := pb.TeammateStatus_TEAMMATE_STATUS_WORKING
	stopped := pb.TeammateStatus_TEAMMATE_STATUS_STOPPED
	started := pb.SubagentTaskStatus_SUBAGENT_TASK_STATUS_STARTED
	running := pb.SubagentTaskStatus_SUBAGENT_TASK_STATUS_RUNNING
	completed := pb.SubagentTaskStatus_SUBAGENT_TASK_STATUS_COMPLETED
	failed := pb.SubagentTaskStatus_SUBAGENT_TASK_STATUS_FAILED
	stoppedTask := pb.SubagentTaskStatus_SUBAGENT_TASK_STATUS_STOPPED
	tests := []struct {
		name    string
		events  []*pb.AgentEvent
		pending []*pb.AgentEvent
		want    []*pb.Teammate
	}{
		{name: "no calls", events: []*pb.AgentEvent{textOf("", "hello"), turnEnd(1)}, want: []*pb.Teammate{}},
		{name: "other tools are not teammates", events: []*pb.AgentEvent{
			toolStart(1, "t1", "Bash", map[string]any{"command": "ls"}), toolResult(2, "t1", "x", false),
		}, want: []*pb.Teammate{}},
		{name: "Agent call working, with its text so far", events: []*pb.AgentEvent{
			toolStart(1, "a1", "Agent", researchInput), textOf("a1", "Reading RFC 6749. "), textOf("", "lead text"), textOf("a1", "Found three."),
		}, want: []*pb.Teammate{with(taskTool("a1", working, 1), func(t *pb.Teammate) { t.Output = "Reading RFC 6749. Found three." })}},
		{name: "Task (before 2.1) call stopped with its result", events: []*pb.AgentEvent{
			toolStart(1, "a1", "Task", researchInput), textOf("a1", "working"), toolResult(5, "a1", "The report.", false), turnEnd(6),
		}, want: []*pb.Teammate{with(taskTool("a1", stopped, 1), func(t *pb.Teammate) { t.Output, t.FinishedAt = "The report.", at(5) })}},
		{name: "failed call", events: []*pb.AgentEvent{
			toolStart(1, "a1", "Agent", researchInput), toolResult(2, "a1", "Agent type 'x' not found", true),
		}, want: []*pb.Teammate{with(taskTool("a1", stopped, 1), func(t *pb.Teammate) {
			t.Output, t.Error, t.FinishedAt = "Agent type 'x' not found", "Agent type 'x' not found", at(2)
		})}},
		{name: "turn ended without a result", events: []*pb.AgentEvent{
			toolStart(1, "a1", "Agent", researchInput), textOf("a1", "half"), turnEnd(3),
		}, want: []*pb.Teammate{with(taskTool("a1", stopped, 1), func(t *pb.Teammate) { t.Output, t.Error, t.FinishedAt = "half", ErrTurnEnded, at(3) })}},
		{name: "idle while its subagent asks", events: []*pb.AgentEvent{toolStart(1, "a1", "Agent", researchInput)},
			pending: []*pb.AgentEvent{permissionOf("a1")},
			want:    []*pb.Teammate{taskTool("a1", pb.TeammateStatus_TEAMMATE_STATUS_IDLE, 1)}},
		{name: "a prompt of the lead does not make it idle", events: []*pb.AgentEvent{toolStart(1, "a1", "Agent", researchInput)},
			pending: []*pb.AgentEvent{permissionOf("")},
			want:    []*pb.Teammate{taskTool("a1", working, 1)}},
		{name: "defaults: no description, no type", events: []*pb.AgentEvent{toolStart(1, "a1", "Agent", map[string]any{"prompt": "p"})},
			want: []*pb.Teammate{{AgentId: "a1", SessionId: "s1", Name: DefaultAgentType, AgentType: DefaultAgentType, Status: working,
				Kind: pb.TeammateKind_TEAMMATE_KIND_TASK_TOOL, Prompt: "p", CreatedAt: at(1)}}},
		{name: "long prompt truncated", events: []*pb.AgentEvent{toolStart(1, "a1", "Agent", map[string]any{"prompt": strings.Repeat("p", MaxText+10), "description": "d", "subagent_type": "x"})},
			want: []*pb.Teammate{{AgentId: "a1", SessionId: "s1", Name: "d", AgentType: "x", Status: working,
				Kind: pb.TeammateKind_TEAMMATE_KIND_TASK_TOOL, Prompt: strings.Repeat("p", MaxText), CreatedAt: at(1)}}},
		{name: "two in parallel, in call order; a repeated start is ignored", events: []*pb.AgentEvent{
			toolStart(1, "a1", "Agent", researchInput), toolStart(2, "a2", "Agent", researchInput), toolStart(3, "a1", "Agent", researchInput),
			toolResult(4, "a2", "two", false),
		}, want: []*pb.Teammate{
			taskTool("a1", working, 1),
			with(taskTool("a2", stopped, 2), func(t *pb.Teammate) { t.Output, t.FinishedAt = "two", at(4) }),
		}},
		{name: "foreground report without the harness's frame", events: []*pb.AgentEvent{
			toolStart(1, "a1", "Agent", researchInput), toolResult(2, "a1", handBack, false),
		}, want: []*pb.Teammate{with(taskTool("a1", stopped, 1), func(t *pb.Teammate) { t.Output, t.FinishedAt = "The report.\nSecond line.", at(2) })}},
		{name: "background: working once launched, through its parent's turn end", events: []*pb.AgentEvent{
			toolStart(1, "a1", "Agent", researchInput), toolResult(2, "a1", launched, false), turnEnd(3),
		}, want: []*pb.Teammate{taskTool("a1", working, 1)}},
		{name: "old log, background: working while its latest event is a tool call, even after a text", events: []*pb.AgentEvent{
			toolStart(1, "a1", "Agent", researchInput), toolResult(2, "a1", launched, false), turnEnd(3),
			subText(4, "a1", "Let me look."), subTool(5, "a1", "t1"),
		}, want: []*pb.Teammate{with(taskTool("a1", working, 1), func(t *pb.Teammate) { t.Output = "Let me look." })}},
		{name: "old log, background: stopped when its last event is a whole text", events: []*pb.AgentEvent{
			toolStart(1, "a1", "Agent", researchInput), toolResult(2, "a1", launched, false), turnEnd(3),
			subText(4, "a1", "Let me look. "), subTool(5, "a1", "t1"), subText(6, "a1", "The report."), turnEnd(8),
		}, want: []*pb.Teammate{with(taskTool("a1", stopped, 1), func(t *pb.Teammate) { t.Output, t.FinishedAt = "Let me look. The report.", at(6) })}},
		{name: "tracked background: working after its parent's turn and after a whole text", events: []*pb.AgentEvent{
			toolStart(1, "a1", "Agent", researchInput), taskUpdate(1, "a1", started, true, "", ""), toolResult(2, "a1", launched, false), turnEnd(3),
			subText(4, "a1", "Let me look. "), subTool(5, "a1", "t1"), taskUpdate(5, "a1", running, true, "", ""), subText(6, "a1", "The report."),
		}, want: []*pb.Teammate{with(taskTool("a1", working, 1), func(t *pb.Teammate) { t.Output = "Let me look. The report." })}},
		{name: "tracked background: stopped by its completion, with the report", events: []*pb.AgentEvent{
			toolStart(1, "a1", "Agent", researchInput), taskUpdate(1, "a1", started, true, "", ""), toolResult(2, "a1", launched, false), turnEnd(3),
			subText(6, "a1", "The report."), taskUpdate(7, "a1", completed, true, "The report, in full.", ""), turnEnd(9),
		}, want: []*pb.Teammate{with(taskTool("a1", stopped, 1), func(t *pb.Teammate) { t.Output, t.FinishedAt = "The report, in full.", at(7) })}},
		{name: "tracked background: failed", events: []*pb.AgentEvent{
			toolStart(1, "a1", "Agent", researchInput), taskUpdate(1, "a1", started, true, "", ""), toolResult(2, "a1", launched, false),
			subText(3, "a1", "Half"), taskUpdate(4, "a1", failed, true, "API Error: 400", "Agent terminated early due to an API error: API Error: 400"),
		}, want: []*pb.Teammate{with(taskTool("a1", stopped, 1), func(t *pb.Teammate) {
			t.Output, t.Error, t.FinishedAt = "Half", "Agent terminated early due to an API error: API Error: 400", at(4)
		})}},
		{name: "tracked background: failed without an error says so", events: []*pb.AgentEvent{
			toolStart(1, "a1", "Agent", researchInput), taskUpdate(1, "a1", started, true, "", ""), taskUpdate(4, "a1", failed, true, "", ""),
		}, want: []*pb.Teammate{with(taskTool("a1", stopped, 1), func(t *pb.Teammate) { t.Error, t.FinishedAt = ErrFailed, at(4) })}},
		{name: "tracked background: stopped (killed) midway", events: []*pb.AgentEvent{
			toolStart(1, "a1", "Agent", researchInput), taskUpdate(1, "a1", started, true, "", ""), toolResult(2, "a1", launched, false), turnEnd(3),
			subText(4, "a1", "Let me look."), taskUpdate(5, "a1", stoppedTask, true, "Research OAuth", ""),
		}, want: []*pb.Teammate{with(taskTool("a1", stopped, 1), func(t *pb.Teammate) { t.Output, t.Error, t.FinishedAt = "Let me look.", ErrStopped, at(5) })}},
		{name: "tracked foreground: its end comes before its result, which changes nothing", events: []*pb.AgentEvent{
			toolStart(1, "a1", "Agent", researchInput), taskUpdate(1, "a1", started, false, "", ""), subText(2, "a1", "The report."),
			taskUpdate(3, "a1", completed, false, "The report.", ""), toolResult(4, "a1", handBack, false), turnEnd(5),
		}, want: []*pb.Teammate{with(taskTool("a1", stopped, 1), func(t *pb.Teammate) { t.Output, t.FinishedAt = "The report.", at(3) })}},
		{name: "tracked: idle while its subagent asks", events: []*pb.AgentEvent{
			toolStart(1, "a1", "Agent", researchInput), taskUpdate(1, "a1", started, true, "", ""), toolResult(2, "a1", launched, false),
		}, pending: []*pb.AgentEvent{permissionOf("a1")}, want: []*pb.Teammate{taskTool("a1", pb.TeammateStatus_TEAMMATE_STATUS_IDLE, 1)}},
		{name: "tracked: started again after its end", events: []*pb.AgentEvent{
			toolStart(1, "a1", "Agent", researchInput), taskUpdate(1, "a1", started, true, "", ""), taskUpdate(2, "a1", completed, true, "one", ""),
			taskUpdate(3, "a1", started, true, "", ""), subText(4, "a1", "again"),
		}, want: []*pb.Teammate{with(taskTool("a1", working, 1), func(t *pb.Teammate) { t.Output = "again" })}},
		{name: "an update of another call changes nothing", events: []*pb.AgentEvent{
			toolStart(1, "a1", "Agent", researchInput), taskUpdate(2, "a2", completed, true, "x", ""),
		}, want: []*pb.Teammate{taskTool("a1", working, 1)}},
		{name: "the process ended: background ones stop with it", events: []*pb.AgentEvent{
			toolStart(1, "a1", "Agent", researchInput), taskUpdate(1, "a1", started, true, "", ""), toolResult(2, "a1", launched, false), turnEnd(3),
			subText(4, "a1", "Let me look."), resumed(8),
		}, want: []*pb.Teammate{with(taskTool("a1", stopped, 1), func(t *pb.Teammate) { t.Output, t.Error, t.FinishedAt = "Let me look.", ErrProcessEnded, at(8) })}},
		{name: "the process ended: an old log's background one whose last event was a whole text finished then", events: []*pb.AgentEvent{
			toolStart(1, "a1", "Agent", researchInput), toolResult(2, "a1", launched, false), turnEnd(3), subText(4, "a1", "The report."), resumed(8),
			subText(9, "a1", "not its"),
		}, want: []*pb.Teammate{with(taskTool("a1", stopped, 1), func(t *pb.Teammate) { t.Output, t.FinishedAt = "The report.", at(4) })}},
		{name: "a SessionInfo that is not a restart changes nothing", events: []*pb.AgentEvent{
			toolStart(1, "a1", "Agent", researchInput), toolResult(2, "a1", launched, false),
			{Event: &pb.AgentEvent_SessionInfo{SessionInfo: &pb.SessionInfo{SessionId: "s1"}}},
		}, want: []*pb.Teammate{taskTool("a1", working, 1)}},
		{name: "a later turn's end does not change a stopped one", events: []*pb.AgentEvent{
			toolStart(1, "a1", "Agent", researchInput), toolResult(2, "a1", "done", false), turnEnd(3), turnEnd(9),
		}, want: []*pb.Teammate{with(taskTool("a1", stopped, 1), func(t *pb.Teammate) { t.Output, t.FinishedAt = "done", at(2) })}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newTaskToolFold("s1")
			for _, ev := range tt.events {
				f.add(ev)
			}
			checkProtos(t, "teammates", f.teammates(tt.pending), tt.want)
		})
	}
}

func TestReport(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"no frame", "plain output", "plain output"},
		{"frame", handBack, "The report.\nSecond line."},
		{"blank line inside the report", "x The report follows:\n  a\n\n  b\nagentId: z", "a\n\nb"},
		{"report to the end", "The report follows:\n  only", "only"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := report(tt.in); got != tt.want {
				t.Fatalf("report = %q, want %q", got, tt.want)
			}
		})
	}
}
