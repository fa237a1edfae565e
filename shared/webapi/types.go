package webapi

import (
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// Machine is a machine as the web API shows it.
type Machine struct {
	ID       string `json:"id"`
	Name     string `json:"name"`
	Online   bool   `json:"online"`
	Current  bool   `json:"current"`
	LastSeen string `json:"lastSeen,omitempty"`
	Owner    string `json:"owner,omitempty"`
}

// Session is a session as the web API shows it.
type Session struct {
	ID             string  `json:"id"`
	Name           string  `json:"name"`
	Cwd            string  `json:"cwd"`
	Model          string  `json:"model"`
	Status         string  `json:"status"`
	AgentStatus    string  `json:"agentStatus"`
	CostUSD        float64 `json:"costUsd"`
	InputTokens    uint32  `json:"inputTokens"`
	OutputTokens   uint32  `json:"outputTokens"`
	MessageCount   uint32  `json:"messageCount"`
	LastMessage    string  `json:"lastMessage"`
	LastStopReason string  `json:"lastStopReason,omitempty"`
	PendingPrompts uint32  `json:"pendingPrompts"`
	Pending        []Event `json:"pending,omitempty"`
	CreatedAt      string  `json:"createdAt"`
	UpdatedAt      string  `json:"updatedAt"`
	CreatedBy      string  `json:"createdBy,omitempty"`
	// Provider runs the session: claude-code, codex, openai-api, openclaw.
	Provider string `json:"provider"`
}

// Event is one streamed item or message of the WebSocket (and of
// GET /api/sessions/{id}/events): a JSON object with "type".
type Event map[string]any

// FileAttachment is a file sent with a prompt.
type FileAttachment struct {
	Name       string `json:"name"`
	MimeType   string `json:"mimeType"`
	Base64Data string `json:"base64Data"`
}

// PermissionRule is one allow or deny rule of the machine.
type PermissionRule struct {
	ID          string `json:"id"`
	ToolName    string `json:"toolName"`
	PathPattern string `json:"pathPattern,omitempty"`
	Behavior    string `json:"behavior"`
	Rule        string `json:"rule"`
	Source      string `json:"source"`
	CreatedAt   string `json:"createdAt,omitempty"`
}

// Usage is token and cost usage.
type Usage struct {
	InputTokens  uint64  `json:"inputTokens"`
	OutputTokens uint64  `json:"outputTokens"`
	CostUSD      float64 `json:"costUsd"`
}

func rfc3339(ts *timestamppb.Timestamp) string {
	if ts == nil || (ts.Seconds == 0 && ts.Nanos == 0) {
		return ""
	}
	return ts.AsTime().UTC().Format(time.RFC3339Nano)
}

// agentStatus is the web name of an AgentStatus.
func agentStatus(s pb.AgentStatus) string {
	switch s {
	case pb.AgentStatus_THINKING:
		return "thinking"
	case pb.AgentStatus_EXECUTING_TOOL:
		return "executing_tool"
	case pb.AgentStatus_WAITING_FOR_USER:
		return "waiting_for_user"
	case pb.AgentStatus_COMPACTING:
		return "compacting"
	case pb.AgentStatus_ERROR:
		return "error"
	}
	return "idle"
}

// sessionStatus is the coarse status of a session: waiting (a prompt is
// open), running (a turn runs: the agent reports a starting turn as
// thinking), error (the last turn failed), else completed (idle, also
// before a first turn). SessionSummary.status ("active") only says that
// Claude's process is up, not that a turn runs, so it plays no part.
func sessionStatus(s *pb.SessionSummary) string {
	switch {
	case s.GetPendingPrompts() > 0 || s.GetAgentStatus() == pb.AgentStatus_WAITING_FOR_USER:
		return "waiting"
	case s.GetAgentStatus() == pb.AgentStatus_THINKING, s.GetAgentStatus() == pb.AgentStatus_EXECUTING_TOOL,
		s.GetAgentStatus() == pb.AgentStatus_COMPACTING:
		return "running"
	case s.GetAgentStatus() == pb.AgentStatus_ERROR, s.GetLastStopReason() == "error":
		return "error"
	}
	return "completed"
}

// sessionOf converts a summary and its open prompts.
func sessionOf(s *pb.SessionSummary, pending []*pb.AgentEvent) Session {
	out := Session{
		ID: s.GetId(), Name: s.GetName(), Cwd: s.GetWorkingDirectory(), Model: s.GetModel(),
		Status: sessionStatus(s), AgentStatus: agentStatus(s.GetAgentStatus()),
		CostUSD: s.GetTotalCostUsd(), InputTokens: s.GetTotalInputTokens(), OutputTokens: s.GetTotalOutputTokens(),
		MessageCount: s.GetMessageCount(), LastMessage: s.GetLastMessagePreview(), LastStopReason: s.GetLastStopReason(),
		PendingPrompts: s.GetPendingPrompts(), CreatedAt: rfc3339(s.GetCreatedAt()), UpdatedAt: rfc3339(s.GetUpdatedAt()),
		CreatedBy: s.GetCreatedBy(), Provider: providerName(s.GetProvider()),
	}
	for _, ev := range pending {
		if e := eventOf(s.GetId(), ev); e != nil {
			out.Pending = append(out.Pending, e)
		}
	}
	return out
}

// machineOf converts a relay machine.
func machineOf(m *pb.Machine, current string) Machine {
	return Machine{
		ID: m.GetId(), Name: m.GetName(), Online: m.GetStatus() == pb.MachineStatus_ONLINE,
		Current: current != "" && m.GetId() == current, LastSeen: rfc3339(m.GetLastSeen()),
	}
}

func structMap(s *structpb.Struct) map[string]any {
	if s == nil {
		return map[string]any{}
	}
	return s.AsMap()
}

// todoStatus is the web name of a TodoStatus.
func todoStatus(s pb.TodoStatus) string {
	switch s {
	case pb.TodoStatus_IN_PROGRESS:
		return "in_progress"
	case pb.TodoStatus_COMPLETED:
		return "completed"
	}
	return "pending"
}

// subagentTaskStatus is the web name of a SubagentTaskStatus: the enum
// name without its prefix, in lower case ("completed"), "" when unset.
func subagentTaskStatus(s pb.SubagentTaskStatus) string {
	if s == pb.SubagentTaskStatus_SUBAGENT_TASK_STATUS_UNSPECIFIED {
		return ""
	}
	return strings.ToLower(strings.TrimPrefix(s.String(), "SUBAGENT_TASK_STATUS_"))
}

// eventOf maps an AgentEvent to its web message, or nil for events the web
// API does not show (deprecation warnings, which address gRPC clients and
// are not stored).
func eventOf(sessionID string, ev *pb.AgentEvent) Event {
	e := Event{"sessionId": sessionID, "seq": ev.GetSequence(), "ts": rfc3339(ev.GetTimestamp())}
	if p := ev.GetParentToolUseId(); p != "" {
		e["parentToolUseId"] = p
	}
	switch x := ev.GetEvent().(type) {
	case *pb.AgentEvent_TextDelta:
		e["type"], e["text"], e["complete"] = "lead_output", x.TextDelta.GetText(), x.TextDelta.GetIsComplete()
	case *pb.AgentEvent_ToolCallStart:
		t := x.ToolCallStart
		e["type"], e["toolId"], e["toolName"], e["input"], e["description"] = "tool_call", t.GetToolId(), t.GetToolName(), structMap(t.GetInput()), t.GetDescription()
	case *pb.AgentEvent_ToolCallResult:
		t := x.ToolCallResult
		e["type"], e["toolId"], e["output"], e["isError"], e["durationMs"] = "tool_result", t.GetToolId(), t.GetOutput(), t.GetIsError(), t.GetDurationMs()
	case *pb.AgentEvent_PermissionRequest:
		p := x.PermissionRequest
		sugg := make([]any, 0, len(p.GetSuggestions()))
		for _, s := range p.GetSuggestions() {
			sugg = append(sugg, structMap(s))
		}
		e["type"], e["requestId"], e["toolName"], e["input"] = "permission_request", p.GetRequestId(), p.GetToolName(), structMap(p.GetInput())
		e["description"], e["suggestions"], e["toolUseId"] = p.GetDescription(), sugg, p.GetToolUseId()
	case *pb.AgentEvent_UserQuestion:
		q := x.UserQuestion
		opts := make([]map[string]string, 0, len(q.GetOptions()))
		for _, o := range q.GetOptions() {
			opts = append(opts, map[string]string{"value": o.GetValue(), "label": o.GetLabel(), "description": o.GetDescription()})
		}
		e["type"], e["questionId"], e["question"], e["options"], e["multiSelect"] = "question", q.GetQuestionId(), q.GetQuestion(), opts, q.GetMultiSelect()
	case *pb.AgentEvent_TodoUpdate:
		tasks := make([]map[string]string, 0, len(x.TodoUpdate.GetItems()))
		for _, it := range x.TodoUpdate.GetItems() {
			tasks = append(tasks, map[string]string{"id": it.GetId(), "subject": it.GetSubject(), "description": it.GetDescription(),
				"activeForm": it.GetActiveForm(), "status": todoStatus(it.GetStatus())})
		}
		e["type"], e["tasks"] = "task_sync", tasks
	case *pb.AgentEvent_StatusChange:
		e["type"], e["status"], e["message"] = "agent_status", agentStatus(x.StatusChange.GetStatus()), x.StatusChange.GetMessage()
	case *pb.AgentEvent_SessionInfo:
		s := x.SessionInfo
		e["type"], e["model"], e["cwd"], e["isResumed"] = "session_info", s.GetModel(), s.GetWorkingDirectory(), s.GetIsResumed()
		e["isCompacted"], e["contextUsagePercent"] = s.GetIsCompacted(), s.GetContextUsagePercent()
	case *pb.AgentEvent_Usage:
		u := x.Usage
		e["type"], e["inputTokens"], e["outputTokens"], e["cacheReadTokens"] = "usage", u.GetInputTokens(), u.GetOutputTokens(), u.GetCacheReadTokens()
		e["cacheCreationTokens"], e["costUsd"], e["model"], e["durationMs"] = u.GetCacheCreationTokens(), u.GetCostUsd(), u.GetModel(), u.GetDurationMs()
	case *pb.AgentEvent_PlanMode:
		e["type"], e["active"], e["plan"] = "plan_mode", x.PlanMode.GetActive(), x.PlanMode.GetPlan()
	case *pb.AgentEvent_TurnComplete:
		e["type"], e["stopReason"] = "turn_complete", x.TurnComplete.GetStopReason()
	case *pb.AgentEvent_UserInput:
		u := x.UserInput
		files := make([]map[string]any, 0, len(u.GetAttachments()))
		for _, a := range u.GetAttachments() {
			files = append(files, map[string]any{"name": a.GetFilename(), "mimeType": a.GetMimeType(), "size": a.GetSize()})
		}
		e["type"], e["text"], e["files"] = "user_message", u.GetContent(), files
		if u.GetSentBy() != "" {
			e["sentBy"] = u.GetSentBy()
		}
	case *pb.AgentEvent_Error:
		e["type"], e["code"], e["message"], e["fatal"] = "error", x.Error.GetCode(), x.Error.GetMessage(), x.Error.GetIsFatal()
	case *pb.AgentEvent_SubagentTask:
		u := x.SubagentTask
		e["type"], e["toolUseId"], e["taskId"], e["status"] = "subagent_task", u.GetToolUseId(), u.GetTaskId(), subagentTaskStatus(u.GetStatus())
		e["description"], e["subagentType"], e["background"] = u.GetDescription(), u.GetSubagentType(), u.GetIsBackgrounded()
		e["summary"], e["error"], e["activity"], e["lastToolName"] = u.GetSummary(), u.GetError(), u.GetActivity(), u.GetLastToolName()
		e["totalTokens"], e["toolUses"], e["durationMs"] = u.GetTotalTokens(), u.GetToolUses(), u.GetDurationMs()
	case *pb.AgentEvent_DeprecationWarning:
		return nil
	default:
		if ev.GetSequence() == 0 {
			return nil
		}
		// A kind this build does not know (a newer agent): still a place in
		// the sequence, so that clients see no gap.
		e["type"] = "unknown"
	}
	return e
}

// ruleString is a rule in Claude Code's syntax: Tool or Tool(pattern).
func ruleString(tool, pattern string) string {
	if pattern == "" {
		return tool
	}
	return tool + "(" + pattern + ")"
}

// parseRule splits a Claude Code rule into tool and pattern.
func parseRule(rule string) (tool, pattern string) {
	if i := strings.IndexByte(rule, '('); i > 0 && strings.HasSuffix(rule, ")") {
		return rule[:i], rule[i+1 : len(rule)-1]
	}
	return rule, ""
}
