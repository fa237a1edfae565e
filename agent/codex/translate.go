package codex

import (
	"fmt"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// Tool names the translator gives Codex's tool calls. A command is "Bash"
// with input {"command", "cwd"}, so that BetCode's permission rules for
// Bash (Bash(git status), Bash(npm run:*)) apply to Codex's commands as
// they do to Claude's; a patch is "apply_patch" with input {"changes":
// [{"path","kind","diff"}]} plus "file_path" when it touches one file.
const (
	ToolShell = "Bash"
	ToolPatch = "apply_patch"
)

// Error codes of the ErrorEvents the translator produces.
const (
	CodeAgentError        = "AGENT_ERROR"
	CodeRateLimited       = "RATE_LIMITED"
	CodeSubprocessCrashed = "SUBPROCESS_CRASHED"
)

// Stop reasons of TurnComplete, by Codex turn status.
const (
	StopEndTurn   = "end_turn"
	StopCancelled = "cancelled"
	StopError     = "error"
)

// Translator maps the Events of one thread to AgentEvents, as
// agent/bridge does for Claude's stream-json. It is pure and not safe for
// concurrent use; it never sets sequences or timestamps.
//
// The mapping:
//
//	TurnStarted              StatusChange THINKING
//	AgentMessageDelta        TextDelta (streamed)
//	ItemCompleted message    TextDelta{is_complete} (with the text when nothing streamed)
//	ItemCompleted reasoning  StatusChange THINKING with the summary as message
//	ItemStarted command      ToolCallStart Bash {command, cwd}, EXECUTING_TOOL
//	ItemStarted fileChange   ToolCallStart apply_patch {changes}, EXECUTING_TOOL
//	ItemCompleted tool       ToolCallResult (output; is_error unless completed)
//	Approval                 PermissionRequest (request_id = Approval.ID), WAITING_FOR_USER
//	RequestResolved          EXECUTING_TOOL
//	TokenUsage               summed per turn (last), reported at the turn's end
//	Error, will retry        StatusChange THINKING "retrying: ..."
//	Error                    ErrorEvent (RATE_LIMITED for 429s, else AGENT_ERROR)
//	TurnEnded                [ErrorEvent], UsageReport, TurnComplete, IDLE
//	Exited with an error     ErrorEvent SUBPROCESS_CRASHED (fatal), and
//	                         TurnComplete "error" and IDLE if a turn ran
//
// Usage follows the Claude bridge's meaning: input_tokens excludes cached
// input (OpenAI counts it in), cache_read_tokens is the cached input,
// cache_creation_tokens the cache writes, output_tokens includes reasoning.
// Cost is left 0: Codex reports none.
type Translator struct {
	now      func() time.Time
	model    string
	status   pb.AgentStatus
	streamed map[string]bool             // agentMessage ids that had deltas
	tools    map[string]time.Time        // running tool item id -> start
	inputs   map[string]*structpb.Struct // tool item id -> input, for approvals
	turn     string                      // the running turn, "" when idle
	usage    TokenUsageBreakdown         // summed `last` of the running turn
	errored  bool                        // the running turn had an ErrorEvent
}

// NewTranslator returns a Translator for a thread of model; now is the
// clock for tool durations (time.Now when nil).
func NewTranslator(model string, now func() time.Time) *Translator {
	if now == nil {
		now = time.Now
	}
	return &Translator{now: now, model: model, streamed: map[string]bool{}, tools: map[string]time.Time{}, inputs: map[string]*structpb.Struct{}}
}

// Status returns the last status announced.
func (t *Translator) Status() pb.AgentStatus { return t.status }

// SetStatus records a status announced by someone else (the session
// manager, after an answer), so that the next change is not repeated.
func (t *Translator) SetStatus(s pb.AgentStatus) { t.status = s }

// TurnID returns the running turn's id, "" when none runs.
func (t *Translator) TurnID() string { return t.turn }

func (t *Translator) setStatus(out []*pb.AgentEvent, s pb.AgentStatus, msg string) []*pb.AgentEvent {
	if t.status == s && msg == "" {
		return out
	}
	t.status = s
	return append(out, &pb.AgentEvent{Event: &pb.AgentEvent_StatusChange{StatusChange: &pb.StatusChange{Status: s, Message: msg}}})
}

// Translate maps one event to zero or more AgentEvents.
func (t *Translator) Translate(ev Event) []*pb.AgentEvent {
	var out []*pb.AgentEvent
	switch e := ev.(type) {
	case *TurnStarted:
		t.turn, t.usage, t.errored = e.Turn.ID, TokenUsageBreakdown{}, false
		out = t.setStatus(out, pb.AgentStatus_THINKING, "")
	case *AgentMessageDelta:
		if e.Delta == "" {
			return nil
		}
		t.streamed[e.ItemID] = true
		out = t.setStatus(out, pb.AgentStatus_THINKING, "")
		out = append(out, textEvent(e.Delta, false))
	case *ItemStarted:
		out = t.itemStarted(out, e.Item)
	case *ItemCompleted:
		out = t.itemCompleted(out, e.Item)
	case *Approval:
		out = t.approval(out, e)
	case *RequestResolved:
		if t.status == pb.AgentStatus_WAITING_FOR_USER {
			out = t.setStatus(out, pb.AgentStatus_EXECUTING_TOOL, "")
		}
	case *TokenUsage:
		l := e.TokenUsage.Last
		t.usage.InputTokens += l.InputTokens
		t.usage.CachedInputTokens += l.CachedInputTokens
		t.usage.CacheWriteInputTokens += l.CacheWriteInputTokens
		t.usage.OutputTokens += l.OutputTokens
		t.usage.ReasoningOutputTokens += l.ReasoningOutputTokens
		t.usage.TotalTokens += l.TotalTokens
	case *Error:
		if e.WillRetry {
			return t.setStatus(out, pb.AgentStatus_THINKING, "retrying: "+e.Error.Message)
		}
		t.errored = true
		out = append(out, errorEvent(&e.Error, false))
	case *TurnEnded:
		out = t.turnEnded(out, e)
	case *Exited:
		out = t.exited(out, e)
	}
	return out
}

func (t *Translator) itemStarted(out []*pb.AgentEvent, it Item) []*pb.AgentEvent {
	var name, desc string
	var input *structpb.Struct
	switch it.Type {
	case ItemCommandExecution:
		name, desc, input = ToolShell, UnwrapShell(it.Command), commandInput(it.Command, it.Cwd)
	case ItemFileChange:
		name, desc, input = ToolPatch, changesSummary(it.Changes), patchInput(it.Changes)
	default:
		return out
	}
	if _, seen := t.tools[it.ID]; seen {
		return out
	}
	t.tools[it.ID] = t.now()
	t.inputs[it.ID] = input
	out = append(out, &pb.AgentEvent{Event: &pb.AgentEvent_ToolCallStart{ToolCallStart: &pb.ToolCallStart{
		ToolId: it.ID, ToolName: name, Input: input, Description: desc,
	}}})
	return t.setStatus(out, pb.AgentStatus_EXECUTING_TOOL, "")
}

func (t *Translator) itemCompleted(out []*pb.AgentEvent, it Item) []*pb.AgentEvent {
	switch it.Type {
	case ItemAgentMessage:
		text := ""
		if !t.streamed[it.ID] {
			text = it.Text
		}
		delete(t.streamed, it.ID)
		return append(out, textEvent(text, true))
	case ItemReasoning:
		if s := strings.Join(it.Summary, "\n"); s != "" {
			return t.setStatus(out, pb.AgentStatus_THINKING, s)
		}
		return out
	case ItemCommandExecution, ItemFileChange:
	default:
		return out
	}
	// A sandbox-denied command has no item/started: announce it now.
	out = t.itemStarted(out, it)
	start := t.tools[it.ID]
	delete(t.tools, it.ID)
	delete(t.inputs, it.ID)
	var dur uint32
	if it.DurationMs != nil && *it.DurationMs >= 0 {
		dur = uint32(*it.DurationMs)
	} else if d := t.now().Sub(start); d > 0 {
		dur = uint32(d.Milliseconds())
	}
	output := toolOutput(it)
	out = append(out, &pb.AgentEvent{Event: &pb.AgentEvent_ToolCallResult{ToolCallResult: &pb.ToolCallResult{
		ToolId: it.ID, Output: output, IsError: it.Status != ItemStatusCompleted, DurationMs: dur,
	}}})
	return t.setStatus(out, pb.AgentStatus_THINKING, "")
}

// toolOutput is a finished tool item's result text.
func toolOutput(it Item) string {
	var out string
	switch it.Type {
	case ItemCommandExecution:
		if it.AggregatedOutput != nil {
			out = *it.AggregatedOutput
		}
		if it.ExitCode != nil && *it.ExitCode != 0 {
			out += fmt.Sprintf("\n(exit code %d)", *it.ExitCode)
		}
	case ItemFileChange:
		out = changesSummary(it.Changes)
	}
	switch it.Status {
	case ItemStatusDeclined:
		return strings.TrimSpace("declined by user\n" + out)
	case ItemStatusFailed:
		if out == "" {
			return "failed"
		}
	}
	return out
}

func (t *Translator) approval(out []*pb.AgentEvent, a *Approval) []*pb.AgentEvent {
	var name, desc string
	input := t.inputs[a.ItemID]
	switch a.Kind {
	case ApprovalCommand:
		name, desc = ToolShell, UnwrapShell(a.Command)
		if input == nil || a.Command != "" {
			input = commandInput(a.Command, a.Cwd)
		}
	default:
		name = ToolPatch
		if input != nil {
			if v, ok := input.Fields["summary"]; ok {
				desc = v.GetStringValue()
			}
		}
	}
	if a.Reason != "" {
		desc = a.Reason
	}
	out = append(out, &pb.AgentEvent{Event: &pb.AgentEvent_PermissionRequest{PermissionRequest: &pb.PermissionRequest{
		RequestId: a.ID(), ToolName: name, Description: desc, Input: input, ToolUseId: a.ItemID,
	}}})
	return t.setStatus(out, pb.AgentStatus_WAITING_FOR_USER, name)
}

func (t *Translator) turnEnded(out []*pb.AgentEvent, e *TurnEnded) []*pb.AgentEvent {
	if e.Turn.Status == TurnStatusFailed && !t.errored {
		te := e.Turn.Error
		if te == nil {
			te = &TurnError{Message: "turn failed"}
		}
		out = append(out, errorEvent(te, false))
	}
	u := t.usage
	var dur uint32
	if e.Turn.DurationMs != nil && *e.Turn.DurationMs > 0 {
		dur = uint32(*e.Turn.DurationMs)
	}
	out = append(out, &pb.AgentEvent{Event: &pb.AgentEvent_Usage{Usage: &pb.UsageReport{
		InputTokens:         clampU32(u.InputTokens - u.CachedInputTokens),
		OutputTokens:        clampU32(u.OutputTokens),
		CacheReadTokens:     clampU32(u.CachedInputTokens),
		CacheCreationTokens: clampU32(u.CacheWriteInputTokens),
		Model:               t.model,
		DurationMs:          dur,
	}}})
	out = append(out, turnComplete(StopReason(e.Turn.Status)))
	t.turn, t.usage, t.errored = "", TokenUsageBreakdown{}, false
	clear(t.tools)
	clear(t.inputs)
	clear(t.streamed)
	return t.setStatus(out, pb.AgentStatus_IDLE, "")
}

func (t *Translator) exited(out []*pb.AgentEvent, e *Exited) []*pb.AgentEvent {
	if e.Err == nil {
		return out
	}
	out = append(out, &pb.AgentEvent{Event: &pb.AgentEvent_Error{Error: &pb.ErrorEvent{
		Code: CodeSubprocessCrashed, Message: e.Err.Error(), IsFatal: true,
	}}})
	if t.turn != "" {
		out = append(out, turnComplete(StopError))
		t.turn = ""
	}
	return t.setStatus(out, pb.AgentStatus_IDLE, "")
}

// StopReason maps a Codex turn status to a TurnComplete stop reason:
// completed to end_turn, interrupted to cancelled, anything else to error.
func StopReason(status string) string {
	switch status {
	case TurnStatusCompleted:
		return StopEndTurn
	case TurnStatusInterrupted:
		return StopCancelled
	}
	return StopError
}

// errorEvent maps a Codex error to an ErrorEvent with the codexErrorInfo in
// details.
func errorEvent(e *TurnError, fatal bool) *pb.AgentEvent {
	code := CodeAgentError
	info := string(e.CodexErrorInfo)
	if strings.Contains(info, "429") || strings.Contains(info, "rateLimitExceeded") || strings.Contains(info, "usageLimitExceeded") {
		code = CodeRateLimited
	}
	details := map[string]string{}
	if info != "" && info != "null" {
		details["codex_error_info"] = info
	}
	if e.AdditionalDetails != nil && *e.AdditionalDetails != "" {
		details["additional_details"] = *e.AdditionalDetails
	}
	return &pb.AgentEvent{Event: &pb.AgentEvent_Error{Error: &pb.ErrorEvent{Code: code, Message: e.Message, IsFatal: fatal, Details: details}}}
}

func textEvent(text string, complete bool) *pb.AgentEvent {
	return &pb.AgentEvent{Event: &pb.AgentEvent_TextDelta{TextDelta: &pb.TextDelta{Text: text, IsComplete: complete}}}
}

func turnComplete(reason string) *pb.AgentEvent {
	return &pb.AgentEvent{Event: &pb.AgentEvent_TurnComplete{TurnComplete: &pb.TurnComplete{StopReason: reason}}}
}

// commandInput is the Bash tool input of a command: the command with
// Codex's shell wrapper removed, the cwd, and the command as Codex runs it.
func commandInput(command, cwd string) *structpb.Struct {
	m := map[string]any{"command": UnwrapShell(command), "codex_command": command}
	if cwd != "" {
		m["cwd"] = cwd
	}
	s, err := structpb.NewStruct(m)
	if err != nil {
		return nil // strings always convert
	}
	return s
}

// patchInput is the apply_patch tool input of a fileChange.
func patchInput(changes []FileUpdateChange) *structpb.Struct {
	list := make([]any, 0, len(changes))
	for _, ch := range changes {
		c := map[string]any{"path": ch.Path, "kind": ch.Kind.Type, "diff": ch.Diff}
		if ch.Kind.MovePath != nil {
			c["move_path"] = *ch.Kind.MovePath
		}
		list = append(list, c)
	}
	m := map[string]any{"changes": list, "summary": changesSummary(changes)}
	if len(changes) == 1 {
		m["file_path"] = changes[0].Path
	}
	s, err := structpb.NewStruct(m)
	if err != nil {
		return nil
	}
	return s
}

// changesSummary lists a patch's files as "A path", "M path", "D path",
// like Codex's own apply_patch output.
func changesSummary(changes []FileUpdateChange) string {
	lines := make([]string, 0, len(changes))
	for _, ch := range changes {
		letter := "M"
		switch ch.Kind.Type {
		case "add":
			letter = "A"
		case "delete":
			letter = "D"
		}
		lines = append(lines, letter+" "+ch.Path)
	}
	return strings.Join(lines, "\n")
}

// shellWrappers are the prefixes Codex puts before a model's command.
var shellWrappers = []string{"/bin/bash -lc ", "/bin/bash -c ", "bash -lc ", "bash -c ", "/bin/sh -c ", "/bin/zsh -lc "}

// UnwrapShell returns the script of a "/bin/bash -lc '<script>'" command
// line as Codex reports it, or the command unchanged when it has another
// shape.
func UnwrapShell(command string) string {
	for _, w := range shellWrappers {
		rest, ok := strings.CutPrefix(command, w)
		if !ok {
			continue
		}
		if s, ok := unquoteSingle(rest); ok {
			return s
		}
		return rest
	}
	return command
}

// unquoteSingle undoes POSIX single quoting of a whole word, where each
// quote inside is written as quote, backslash, quote, quote.
func unquoteSingle(s string) (string, bool) {
	if len(s) < 2 || s[0] != '\'' || s[len(s)-1] != '\'' {
		return "", false
	}
	inner := s[1 : len(s)-1]
	if strings.Contains(strings.ReplaceAll(inner, `'\''`, ""), "'") {
		return "", false
	}
	return strings.ReplaceAll(inner, `'\''`, "'"), true
}

func clampU32(n int64) uint32 {
	switch {
	case n < 0:
		return 0
	case n > 1<<32-1:
		return 1<<32 - 1
	}
	return uint32(n)
}
