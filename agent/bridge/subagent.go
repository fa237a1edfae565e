package bridge

import (
	"encoding/json"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// Task types of task_started whose tasks are subagents. Claude Code runs
// other work as tasks too (background shell commands are "local_bash",
// workflows, MCP tasks); those are not reported.
const taskTypeAgent = "local_agent"

// subtask is a subagent Claude Code runs as a task, as far as its task_*
// lines told.
type subtask struct {
	toolUseID    string // the Agent call that started it
	parent       string // the thread that made the call: "" or an outer Agent call
	description  string
	subagentType string
	background   bool
	status       pb.SubagentTaskStatus // the last one announced
	lastTool     string                // last_tool_name of the last progress announced
	progress     string                // summary of the last progress announced
	err          string                // patch.error of a task_updated
}

// taskLine is the union of the task_* lines' fields the translator reads.
type taskLine struct {
	TaskID         string     `json:"task_id"`
	ToolUseID      string     `json:"tool_use_id"`
	ParentTaskID   string     `json:"parent_task_id"`
	TaskType       string     `json:"task_type"`
	Description    string     `json:"description"`
	SubagentType   string     `json:"subagent_type"`
	IsBackgrounded bool       `json:"is_backgrounded"`
	Status         string     `json:"status"`
	Summary        string     `json:"summary"`
	LastToolName   string     `json:"last_tool_name"`
	Usage          *taskUsage `json:"usage"`
	Patch          struct {
		Status         string `json:"status"`
		Error          string `json:"error"`
		IsBackgrounded *bool  `json:"is_backgrounded"`
	} `json:"patch"`
}

type taskUsage struct {
	TotalTokens uint64 `json:"total_tokens"`
	ToolUses    uint32 `json:"tool_uses"`
	DurationMS  uint64 `json:"duration_ms"`
}

// taskStatuses maps the statuses of task_updated patches; the final ones
// come from task_notification instead (see taskUpdated).
var taskStatuses = map[string]pb.SubagentTaskStatus{
	"pending": pb.SubagentTaskStatus_SUBAGENT_TASK_STATUS_PENDING,
	"running": pb.SubagentTaskStatus_SUBAGENT_TASK_STATUS_RUNNING,
	"paused":  pb.SubagentTaskStatus_SUBAGENT_TASK_STATUS_PAUSED,
}

// taskEnds maps the statuses of task_notification, the line that ends a
// task. One Claude Code does not list is an end all the same: stopped.
var taskEnds = map[string]pb.SubagentTaskStatus{
	"completed": pb.SubagentTaskStatus_SUBAGENT_TASK_STATUS_COMPLETED,
	"failed":    pb.SubagentTaskStatus_SUBAGENT_TASK_STATUS_FAILED,
	"stopped":   pb.SubagentTaskStatus_SUBAGENT_TASK_STATUS_STOPPED,
}

// taskEvent handles a task_started, task_progress, task_updated or
// task_notification line.
func (t *Translator) taskEvent(subtype string, raw []byte, out []*pb.AgentEvent) []*pb.AgentEvent {
	var l taskLine
	if json.Unmarshal(raw, &l) != nil || l.TaskID == "" {
		return out
	}
	if subtype == "task_started" {
		// Every task: a subagent's permission requests name it by task id.
		t.agents[l.TaskID] = l.ToolUseID
		return t.taskStarted(&l, out)
	}
	tk := t.tasks[l.TaskID]
	if tk == nil {
		return out // not a subagent, or started before this translator
	}
	switch subtype {
	case "task_progress":
		return t.taskProgress(tk, &l, out)
	case "task_updated":
		return t.taskUpdated(tk, &l, out)
	case "task_notification":
		return t.taskNotification(tk, &l, out)
	}
	return out
}

func (t *Translator) taskStarted(l *taskLine, out []*pb.AgentEvent) []*pb.AgentEvent {
	agent := l.TaskType == taskTypeAgent || (l.TaskType == "" && l.SubagentType != "")
	if !agent || l.ToolUseID == "" {
		return out
	}
	// A subagent continued later (SendMessage) starts again under its id.
	tk := &subtask{
		toolUseID: l.ToolUseID, description: l.Description, subagentType: l.SubagentType,
		background: l.IsBackgrounded, status: pb.SubagentTaskStatus_SUBAGENT_TASK_STATUS_STARTED,
	}
	if l.ParentTaskID != "" {
		tk.parent = t.agents[l.ParentTaskID]
	}
	t.tasks[l.TaskID] = tk
	return append(out, tk.event(l.TaskID, &pb.SubagentTaskUpdate{}))
}

// taskProgress announces a progress line only when the subagent turned to
// another tool (or Claude Code's one-line summary of it changed). The CLI
// writes one per tool call of the subagent, whose ToolCallStart is in the
// log already, and every event is stored and sent to every client; the
// totals that matter come with the end.
func (t *Translator) taskProgress(tk *subtask, l *taskLine, out []*pb.AgentEvent) []*pb.AgentEvent {
	if tk.ended() {
		return out
	}
	if tk.status == pb.SubagentTaskStatus_SUBAGENT_TASK_STATUS_RUNNING && l.LastToolName == tk.lastTool && l.Summary == tk.progress {
		return out
	}
	tk.status, tk.lastTool, tk.progress = pb.SubagentTaskStatus_SUBAGENT_TASK_STATUS_RUNNING, l.LastToolName, l.Summary
	activity := l.Summary
	if activity == "" {
		activity = l.Description // e.g. "Running Create a file"
	}
	u := &pb.SubagentTaskUpdate{Activity: activity, LastToolName: l.LastToolName}
	l.Usage.set(u)
	return append(out, tk.event(l.TaskID, u))
}

// taskUpdated announces a move to the background and the non-final
// statuses. A final status is not: Claude Code writes the task_notification
// with the summary and totals right after it (both come from one state
// change, and neither without the other), so only that one ends the task.
func (t *Translator) taskUpdated(tk *subtask, l *taskLine, out []*pb.AgentEvent) []*pb.AgentEvent {
	if tk.ended() {
		return out
	}
	if l.Patch.Error != "" {
		tk.err = l.Patch.Error
	}
	changed := false
	if b := l.Patch.IsBackgrounded; b != nil && *b != tk.background {
		tk.background, changed = *b, true
	}
	if s, ok := taskStatuses[l.Patch.Status]; ok && s != tk.status {
		tk.status, changed = s, true
	}
	if !changed {
		return out
	}
	return append(out, tk.event(l.TaskID, &pb.SubagentTaskUpdate{}))
}

func (t *Translator) taskNotification(tk *subtask, l *taskLine, out []*pb.AgentEvent) []*pb.AgentEvent {
	if tk.ended() {
		return out
	}
	s, ok := taskEnds[l.Status]
	if !ok {
		s = pb.SubagentTaskStatus_SUBAGENT_TASK_STATUS_STOPPED
	}
	tk.status = s
	u := &pb.SubagentTaskUpdate{Summary: l.Summary}
	if s == pb.SubagentTaskStatus_SUBAGENT_TASK_STATUS_FAILED {
		u.Error = tk.err
		if u.Error == "" {
			u.Error = l.Summary // a failed task's summary is its error
		}
	}
	l.Usage.set(u)
	return append(out, tk.event(l.TaskID, u))
}

func (tk *subtask) ended() bool { return SubagentTaskEnded(tk.status) }

// SubagentTaskEnded reports whether s is a final status of a subagent's
// task: COMPLETED, FAILED or STOPPED.
func SubagentTaskEnded(s pb.SubagentTaskStatus) bool {
	switch s {
	case pb.SubagentTaskStatus_SUBAGENT_TASK_STATUS_COMPLETED, pb.SubagentTaskStatus_SUBAGENT_TASK_STATUS_FAILED,
		pb.SubagentTaskStatus_SUBAGENT_TASK_STATUS_STOPPED:
		return true
	}
	return false
}

// event completes u with what is known of the task and wraps it.
func (tk *subtask) event(taskID string, u *pb.SubagentTaskUpdate) *pb.AgentEvent {
	u.ToolUseId, u.TaskId, u.Status = tk.toolUseID, taskID, tk.status
	u.Description, u.SubagentType, u.IsBackgrounded = tk.description, tk.subagentType, tk.background
	return &pb.AgentEvent{ParentToolUseId: tk.parent, Event: &pb.AgentEvent_SubagentTask{SubagentTask: u}}
}

func (us *taskUsage) set(u *pb.SubagentTaskUpdate) {
	if us != nil {
		u.TotalTokens, u.ToolUses, u.DurationMs = us.TotalTokens, us.ToolUses, us.DurationMS
	}
}
