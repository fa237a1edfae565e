package provider

import (
	"encoding/json"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// Stream is the output side of a provider that maps its agent's output to
// AgentEvents itself (an ACP agent, the OpenAI API). The session manager
// reads every Stream with one provider-agnostic loop: it sequences, logs
// and fans out the events, decides the permission requests with its engine
// and settles turns a crash left open. Claude Code and Codex predate it and
// have output paths of their own.
type Stream interface {
	Conversation
	// Next blocks until the provider has more output. ok is false once the
	// conversation has ended for good (its process exited, its loop
	// returned); Wait then returns why.
	Next() (out Output, ok bool)
	// ResumeID is the provider's own id of the conversation, which the
	// session saves and passes back as Options.ResumeID to continue it
	// after a restart; "" when it cannot be resumed.
	ResumeID() string
}

// Output is one step of a Stream's output.
type Output struct {
	// Events are AgentEvents in order, without sequence, session id or
	// timestamp (the session sets them): status changes, text deltas,
	// tool calls and results, usage, TurnComplete, errors.
	Events []*pb.AgentEvent
	// Permission, when set, asks whether a tool may run. Events then hold
	// what announces it (its PermissionRequest event and the status
	// change): the session decides the request by its rules and answers
	// it with Conversation.Answer(Permission.ID, …) — dropping Events,
	// which nobody needs to see — or records it and publishes Events to
	// ask a client. A tool named "AskUserQuestion" is a question for the
	// user and is never decided by a rule.
	Permission *PermissionAsk
	// Withdrawn names a request (PermissionAsk.ID) the provider no longer
	// waits for, e.g. after an interrupt.
	Withdrawn string
	// TurnEnded marks the end of a turn: Events end with its TurnComplete
	// (after its UsageReport).
	TurnEnded bool
}

// PermissionAsk is a provider's request to run a tool.
type PermissionAsk struct {
	// ID identifies the request in Conversation.Answer; it is the
	// PermissionRequest event's request_id.
	ID string
	// Tool is the tool's name in BetCode's rule syntax where one applies
	// ("Bash" for shell commands, "Write"/"Edit" for file changes), so
	// that permission rules written for Claude Code apply alike.
	Tool string
	// ToolUseID is the tool call's id (ToolCallStart.tool_id), if any.
	ToolUseID string
	// Input is the tool's input as a JSON object.
	Input json.RawMessage
	// ReadOnly marks a tool that only reads inside the session's working
	// directory (reading, listing, searching files). Like Claude Code's
	// own reads, it runs without asking unless a rule or the session's mode
	// says otherwise; deny and ask rules still apply.
	ReadOnly bool
}

// StatusEvent is a StatusChange AgentEvent.
func StatusEvent(s pb.AgentStatus, msg string) *pb.AgentEvent {
	return &pb.AgentEvent{Event: &pb.AgentEvent_StatusChange{StatusChange: &pb.StatusChange{Status: s, Message: msg}}}
}

// TextEvent is a TextDelta AgentEvent.
func TextEvent(text string, complete bool) *pb.AgentEvent {
	return &pb.AgentEvent{Event: &pb.AgentEvent_TextDelta{TextDelta: &pb.TextDelta{Text: text, IsComplete: complete}}}
}

// ErrorEvent is an ErrorEvent AgentEvent.
func ErrorEvent(code, msg string, fatal bool) *pb.AgentEvent {
	return &pb.AgentEvent{Event: &pb.AgentEvent_Error{Error: &pb.ErrorEvent{Code: code, Message: msg, IsFatal: fatal}}}
}

// TurnCompleteEvent is a TurnComplete AgentEvent with its stop reason
// ("end_turn", "cancelled", "error", "max_tokens", …).
func TurnCompleteEvent(stopReason string) *pb.AgentEvent {
	return &pb.AgentEvent{Event: &pb.AgentEvent_TurnComplete{TurnComplete: &pb.TurnComplete{StopReason: stopReason}}}
}
