// Package bridge translates the Claude Code CLI's stream-json lines into
// BetCode AgentEvents, as the translation table of the protocol-bridge spec
// describes. It is pure: no I/O, no clock of its own (one is injected), and
// it never sets sequence numbers or timestamps; the session does that when it
// persists an event.
//
// Choices where the spec is loose:
//   - ToolCallStart is emitted once per tool id, when its input is known: from
//     the assistant line of the block (which the CLI writes before the block's
//     content_block_stop) or, failing that, from the stream's accumulated
//     input_json_delta at content_block_stop.
//   - Subagent activity (lines with parent_tool_use_id) has no stream events;
//     its text arrives as whole TextDeltas with is_complete set.
//   - A result with is_error is a failed turn whatever its subtype; it gives
//     an ErrorEvent (RATE_LIMITED for HTTP 429, AGENT_ERROR otherwise) before
//     UsageReport and TurnComplete.
//
// Tools rendered specially. Their ToolCallStart and ToolCallResult are
// emitted as for any tool (a client that shows the richer events below can
// hide those by tool name); the richer events come on top:
//   - can_use_tool gives a PermissionRequest with the CLI's
//     permission_suggestions (as Structs, in order) and tool_use_id, then
//     StatusChange WAITING_FOR_USER, except for AskUserQuestion.
//   - can_use_tool for AskUserQuestion gives one UserQuestion per entry of
//     input.questions, all with question_id = the control request_id, then
//     WAITING_FOR_USER. Options map to QuestionOption{value: label, label:
//     label, description}; multiSelect to multi_select; header and preview
//     have no field and are dropped. A client answers every question of one
//     request_id with a single UserQuestionResponse whose answers map each
//     question text to its answer (labels joined with ", " for several, or
//     free text), for the daemon to send back as updatedInput.answers. If the
//     input holds no question, a PermissionRequest is sent instead, so the
//     request can still be answered.
//   - Plan mode is tracked from the permissionMode of system/init and of
//     system/status lines (see PlanMode). Entering it gives
//     PlanModeChange{active: true}; leaving it PlanModeChange{active: false,
//     plan}. ExitPlanMode's own can_use_tool stays a PermissionRequest: the
//     user approves leaving plan mode, and the mode change that follows is
//     what ends it. The plan is the latest "plan" an ExitPlanMode input
//     carried (assistant tool_use or can_use_tool), else the result's
//     tool_use_result.plan, else "". As the CLI switches the mode while
//     ExitPlanMode runs, before its result, the exit is held back until that
//     result (or, if it never comes, the turn's result line). Subagents'
//     ExitPlanMode calls are ignored: they do not change the session's mode.
//   - TodoWrite gives a TodoUpdate with its whole input.todos list, once per
//     tool_use id, as soon as the input is known (like ToolCallStart). Item
//     ids are the 1-based positions ("1", "2", …), subject the content,
//     active_form the activeForm; an unknown status is TODO_STATUS_UNSPECIFIED.
//   - TaskCreate and TaskUpdate edit one list the translator keeps; each
//     successful result that changes it gives a TodoUpdate with the whole
//     list. A task's id is the result's tool_use_result.task.id
//     (TaskCreateOutput), else the next number after the highest seen, which
//     is how Claude Code numbers tasks ("1", "2", …, never reused).
//     TaskUpdate sets the fields it names; status "deleted" removes the task;
//     a failed call (is_error, or success false) or one for a task the
//     translator never saw created changes nothing.
//   - Events a subagent's line produces carry its Agent call's id in
//     parent_tool_use_id, TodoUpdates included: a TodoWrite list from a
//     subagent is that subagent's own, while the translator keeps one Task*
//     list per session.
//
// Subagents' lifecycle (subagent.go). Claude Code reports each subagent
// its Agent tool starts, in the foreground or the background, with system
// lines task_started, task_progress, task_updated and task_notification;
// they become SubagentTaskUpdates:
//   - task_started gives STARTED, with the call's id, description,
//     subagent_type and is_backgrounded. Only subagents count (task_type
//     "local_agent"); the other tasks' lines (background shell commands,
//     workflows) are dropped, as are lines of a task whose task_started
//     this translator did not see.
//   - task_progress gives RUNNING with the activity ("Running Create a
//     file"), last_tool_name and the totals so far, but only when
//     last_tool_name (or the progress summary) differs from the last one
//     announced: the CLI writes one per tool call of the subagent, whose
//     ToolCallStart is in the log already, and every event is stored and
//     sent to every client.
//   - task_updated gives an update when its patch moves the subagent to
//     the background or to a non-final status (pending, running, paused).
//     Its final statuses (completed, failed, killed) are not announced:
//     the task_notification that Claude Code writes right after it, with
//     the summary and the totals, is.
//   - task_notification ends the subagent: COMPLETED (summary = its
//     report), FAILED (error = the patch's error, else the summary) or
//     STOPPED ("stopped": an interrupt, stop_task or TaskStop killed it;
//     also any status Claude Code may add). Later lines of the task are
//     dropped until it starts again.
//   - The events' parent_tool_use_id is the thread that made the Agent
//     call, like its ToolCallStart's: empty for the session's own calls,
//     the outer call's id for a subagent's (task_started's parent_task_id).
package bridge

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/betcode-dev/betcode/agent/claude"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// Error codes set on ErrorEvents produced from CLI output.
const (
	CodeAgentError  = "AGENT_ERROR"
	CodeRateLimited = "RATE_LIMITED"
)

// Translator holds the per-session state a translation needs: open content
// blocks, tool ids already announced and tool start times.
type Translator struct {
	now      func() time.Time
	blocks   map[int]*block
	tools    map[string]time.Time // announced tool id -> start time
	status   pb.AgentStatus
	streamed bool // a text delta was streamed for the current API message
	model    string
	agents   map[string]string   // subagent id -> the Agent tool_use id that spawned it
	tasks    map[string]*subtask // subagent id -> what its task_* lines said

	calls     map[string]call // tool id -> ExitPlanMode or Task* call awaiting its result
	todoWrite map[string]bool // TodoWrite tool ids already turned into a TodoUpdate
	checklist checklist       // the Task* tools' list
	plan      bool            // the CLI is in plan mode
	planExit  bool            // plan mode was left; its PlanModeChange waits for the plan
	planText  string          // the latest plan ExitPlanMode carried
}

// call is a tool call whose result changes translator state.
type call struct {
	name  string
	input json.RawMessage
}

type block struct {
	kind    string // text, tool_use, thinking
	toolID  string
	name    string
	partial strings.Builder
}

// New returns a Translator; now is the clock used for tool durations.
func New(now func() time.Time) *Translator {
	if now == nil {
		now = time.Now
	}
	return &Translator{
		now: now, blocks: map[int]*block{}, tools: map[string]time.Time{}, agents: map[string]string{}, tasks: map[string]*subtask{},
		calls: map[string]call{}, todoWrite: map[string]bool{},
	}
}

// Status returns the last status the translator announced.
func (t *Translator) Status() pb.AgentStatus { return t.status }

// Model returns the model the CLI last reported.
func (t *Translator) Model() string { return t.model }

// SetStatus records a status the caller emitted itself, so that the
// translator doesn't announce it again.
func (t *Translator) SetStatus(s pb.AgentStatus) { t.status = s }

// Translate maps one CLI line to zero or more events.
func (t *Translator) Translate(env *claude.Envelope) []*pb.AgentEvent {
	var out []*pb.AgentEvent
	switch env.Type {
	case claude.TypeSystem:
		out = t.system(env, out)
	case claude.TypeStreamEvent:
		out = t.streamEvent(env, out)
	case claude.TypeAssistant:
		out = t.assistant(env, out)
	case claude.TypeUser:
		out = t.user(env, out)
	case claude.TypeResult:
		out = t.result(env, out)
	case claude.TypeControlRequest:
		out = t.controlRequest(env, out)
	}
	if p := env.Parent(); p != "" {
		for _, e := range out {
			e.ParentToolUseId = p
		}
	}
	return out
}

func (t *Translator) setStatus(out []*pb.AgentEvent, s pb.AgentStatus, msg string) []*pb.AgentEvent {
	if t.status == s && msg == "" {
		return out
	}
	t.status = s
	return append(out, StatusEvent(s, msg))
}

// StatusEvent builds a StatusChange event.
func StatusEvent(s pb.AgentStatus, msg string) *pb.AgentEvent {
	return &pb.AgentEvent{Event: &pb.AgentEvent_StatusChange{StatusChange: &pb.StatusChange{Status: s, Message: msg}}}
}

// textEvent builds a TextDelta event.
func textEvent(text string, complete bool) *pb.AgentEvent {
	return &pb.AgentEvent{Event: &pb.AgentEvent_TextDelta{TextDelta: &pb.TextDelta{Text: text, IsComplete: complete}}}
}

// ErrorEvent builds an ErrorEvent.
func ErrorEvent(code, msg string, fatal bool) *pb.AgentEvent {
	return &pb.AgentEvent{Event: &pb.AgentEvent_Error{Error: &pb.ErrorEvent{Code: code, Message: msg, IsFatal: fatal}}}
}

// TurnCompleteEvent builds a TurnComplete event.
func TurnCompleteEvent(stopReason string) *pb.AgentEvent {
	return &pb.AgentEvent{Event: &pb.AgentEvent_TurnComplete{TurnComplete: &pb.TurnComplete{StopReason: stopReason}}}
}

func (t *Translator) system(env *claude.Envelope, out []*pb.AgentEvent) []*pb.AgentEvent {
	switch env.Subtype {
	case "init":
		var init struct {
			Model          string `json:"model"`
			PermissionMode string `json:"permissionMode"`
		}
		if json.Unmarshal(env.Raw, &init) != nil {
			return t.setStatus(out, pb.AgentStatus_THINKING, "")
		}
		if init.Model != "" {
			t.model = init.Model
		}
		out = t.setStatus(out, pb.AgentStatus_THINKING, "")
		return t.setMode(out, init.PermissionMode)
	case "status":
		var st struct {
			Status         *string `json:"status"`
			PermissionMode string  `json:"permissionMode"`
		}
		if json.Unmarshal(env.Raw, &st) != nil {
			return out
		}
		out = t.setMode(out, st.PermissionMode)
		if st.Status != nil && *st.Status == "compacting" {
			return t.setStatus(out, pb.AgentStatus_COMPACTING, "")
		}
	case "task_started", "task_progress", "task_updated", "task_notification":
		return t.taskEvent(env.Subtype, env.Raw, out)
	case "api_retry":
		var r struct {
			Attempt     int    `json:"attempt"`
			MaxRetries  int    `json:"max_retries"`
			ErrorStatus *int   `json:"error_status"`
			Error       string `json:"error"`
		}
		if json.Unmarshal(env.Raw, &r) == nil {
			msg := fmt.Sprintf("model API call failed (%s), retry %d of %d", r.Error, r.Attempt, r.MaxRetries)
			return t.setStatus(out, pb.AgentStatus_THINKING, msg)
		}
	}
	return out
}

func (t *Translator) streamEvent(env *claude.Envelope, out []*pb.AgentEvent) []*pb.AgentEvent {
	var ev claude.StreamEvent
	if err := json.Unmarshal(env.Event, &ev); err != nil {
		return out
	}
	switch ev.Type {
	case "message_start":
		t.streamed = false
		clear(t.blocks)
		if ev.Message != nil && ev.Message.Model != "" {
			t.model = ev.Message.Model
		}
		return t.setStatus(out, pb.AgentStatus_THINKING, "")
	case "content_block_start":
		if ev.ContentBlock == nil {
			return out
		}
		t.blocks[ev.Index] = &block{kind: ev.ContentBlock.Type, toolID: ev.ContentBlock.ID, name: ev.ContentBlock.Name}
	case "content_block_delta":
		if ev.Delta == nil {
			return out
		}
		switch ev.Delta.Type {
		case "text_delta":
			if ev.Delta.Text == "" {
				return out
			}
			t.streamed = true
			out = t.setStatus(out, pb.AgentStatus_THINKING, "")
			return append(out, textEvent(ev.Delta.Text, false))
		case "input_json_delta":
			if b := t.blocks[ev.Index]; b != nil {
				b.partial.WriteString(ev.Delta.PartialJSON)
			}
		}
	case "message_stop":
		// After an interrupt the CLI ends the message without the open
		// blocks' content_block_stop; finish their text all the same.
		return t.closeBlocks(out)
	case "content_block_stop":
		b := t.blocks[ev.Index]
		if b == nil {
			return out
		}
		delete(t.blocks, ev.Index)
		switch b.kind {
		case "text":
			return append(out, textEvent("", true))
		case "tool_use":
			input := json.RawMessage(b.partial.String())
			out = t.toolStart(out, b.toolID, b.name, input)
			return t.toolInput(out, b.toolID, b.name, input, env.Parent() != "")
		}
	}
	return out
}

// closeBlocks drops the open content blocks, completing any text block.
func (t *Translator) closeBlocks(out []*pb.AgentEvent) []*pb.AgentEvent {
	for _, i := range slices.Sorted(maps.Keys(t.blocks)) {
		if t.blocks[i].kind == "text" {
			out = append(out, textEvent("", true))
		}
	}
	clear(t.blocks)
	return out
}

func (t *Translator) toolStart(out []*pb.AgentEvent, id, name string, input json.RawMessage) []*pb.AgentEvent {
	if id == "" {
		return out
	}
	if _, seen := t.tools[id]; seen {
		return out
	}
	t.tools[id] = t.now()
	st, desc := toStruct(input)
	out = append(out, &pb.AgentEvent{Event: &pb.AgentEvent_ToolCallStart{ToolCallStart: &pb.ToolCallStart{
		ToolId: id, ToolName: name, Input: st, Description: desc,
	}}})
	return t.setStatus(out, pb.AgentStatus_EXECUTING_TOOL, name)
}

// toStruct converts a tool input to a Struct and pulls out its
// "description" when it has one (Bash does).
func toStruct(raw json.RawMessage) (*structpb.Struct, string) {
	if len(raw) == 0 {
		return nil, ""
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, ""
	}
	st, err := structpb.NewStruct(m)
	if err != nil {
		return nil, ""
	}
	desc, _ := m["description"].(string)
	return st, desc
}

// ToStruct converts raw JSON object to a Struct (nil when it isn't one).
func ToStruct(raw json.RawMessage) *structpb.Struct {
	st, _ := toStruct(raw)
	return st
}

func (t *Translator) assistant(env *claude.Envelope, out []*pb.AgentEvent) []*pb.AgentEvent {
	var msg claude.APIMessage
	if err := json.Unmarshal(env.Message, &msg); err != nil {
		return out
	}
	blocks, err := msg.Blocks()
	if err != nil {
		return out
	}
	sub := env.Parent() != ""
	// A failed API call comes as a synthetic assistant message and again
	// in the result; the result's ErrorEvent reports it, not model text.
	var apiErr struct {
		IsAPIErrorMessage bool `json:"is_api_error_message"`
	}
	_ = json.Unmarshal(env.Raw, &apiErr)
	for _, b := range blocks {
		switch b.Type {
		case "tool_use":
			out = t.toolStart(out, b.ID, b.Name, b.Input)
			out = t.toolInput(out, b.ID, b.Name, b.Input, sub)
		case "text":
			// Main-thread text was streamed as deltas already, unless the CLI
			// fell back to a non-streaming call; subagent text never streams.
			if b.Text != "" && (sub || !t.streamed) && !apiErr.IsAPIErrorMessage {
				out = append(out, textEvent(b.Text, true))
			}
		}
	}
	return out
}

func (t *Translator) user(env *claude.Envelope, out []*pb.AgentEvent) []*pb.AgentEvent {
	var msg claude.APIMessage
	if err := json.Unmarshal(env.Message, &msg); err != nil {
		return out
	}
	if len(msg.Content) == 0 || msg.Content[0] != '[' {
		return out
	}
	blocks, err := msg.Blocks()
	if err != nil {
		return out
	}
	results := 0
	for _, b := range blocks {
		if b.Type == "tool_result" {
			results++
		}
	}
	for _, b := range blocks {
		if b.Type != "tool_result" {
			continue
		}
		var dur uint32
		if start, ok := t.tools[b.ToolUseID]; ok {
			dur = uint32(t.now().Sub(start).Milliseconds())
		}
		out = append(out, &pb.AgentEvent{Event: &pb.AgentEvent_ToolCallResult{ToolCallResult: &pb.ToolCallResult{
			ToolId: b.ToolUseID, Output: claude.ToolResultText(b.Content), IsError: b.IsError, DurationMs: dur,
		}}})
		if c, ok := t.calls[b.ToolUseID]; ok {
			delete(t.calls, b.ToolUseID)
			// tool_use_result is per line: it belongs to this block only
			// when the line holds no other result (the CLI writes one).
			var res json.RawMessage
			if results == 1 {
				var r struct {
					ToolUseResult json.RawMessage `json:"tool_use_result"`
				}
				_ = json.Unmarshal(env.Raw, &r)
				res = r.ToolUseResult
			}
			out = t.callResult(out, c, b.IsError, res)
		}
		if env.Parent() == "" {
			out = t.setStatus(out, pb.AgentStatus_THINKING, "")
		} else {
			// A subagent's tool finished (maybe after a permission prompt):
			// the Agent call that runs it is still executing.
			out = t.setStatus(out, pb.AgentStatus_EXECUTING_TOOL, "")
		}
	}
	return out
}

func (t *Translator) result(env *claude.Envelope, out []*pb.AgentEvent) []*pb.AgentEvent {
	out = t.closeBlocks(out)
	t.streamed = false
	// No tool result comes after the turn's end: stop waiting for one.
	out = t.flushPlanExit(out)
	clear(t.calls)
	var r claude.Result
	if err := json.Unmarshal(env.Raw, &r); err != nil {
		out = append(out, ErrorEvent(CodeAgentError, "undecodable result line: "+err.Error(), false), TurnCompleteEvent("error"))
		return t.setStatus(out, pb.AgentStatus_IDLE, "")
	}
	if r.IsError {
		code := CodeAgentError
		if r.APIErrorStatus != nil && *r.APIErrorStatus == 429 {
			code = CodeRateLimited
		}
		out = append(out, ErrorEvent(code, ResultErrorText(&r), false))
	}
	var cost float64
	for _, m := range r.SinceLast {
		cost += m.CostUSD
	}
	// The main thread's model, unless this turn's usage doesn't list it;
	// subagents may add other models, so never pick one at random.
	model := t.model
	if _, ok := r.SinceLast[model]; !ok && len(r.SinceLast) > 0 {
		model = slices.Sorted(maps.Keys(r.SinceLast))[0]
	}
	out = append(out, &pb.AgentEvent{Event: &pb.AgentEvent_Usage{Usage: &pb.UsageReport{
		InputTokens:         r.Usage.InputTokens,
		OutputTokens:        r.Usage.OutputTokens,
		CacheReadTokens:     r.Usage.CacheReadInputTokens,
		CacheCreationTokens: r.Usage.CacheCreationInputTokens,
		Model:               model,
		CostUsd:             cost,
		DurationMs:          r.DurationMS,
	}}})
	out = append(out, TurnCompleteEvent(StopReason(&r)))
	return t.setStatus(out, pb.AgentStatus_IDLE, "")
}

// StopReason is the TurnComplete stop reason for a result line.
func StopReason(r *claude.Result) string {
	// An aborted turn is cancelled whatever is_error says: a prompt sent
	// with priority "now" preempts the running turn with is_error false.
	if r.TerminalReason == "aborted_streaming" || r.TerminalReason == "aborted_tools" {
		return "cancelled"
	}
	if !r.IsError {
		if r.StopReason != nil && *r.StopReason != "" {
			return *r.StopReason
		}
		return "end_turn"
	}
	switch {
	case r.TerminalReason != "":
		return r.TerminalReason
	case r.Subtype != "":
		return r.Subtype
	}
	return "error"
}

// ResultErrorText is the human-readable failure of a result line: its
// errors, else its result text.
func ResultErrorText(r *claude.Result) string {
	if len(r.Errors) > 0 {
		return strings.Join(r.Errors, "; ")
	}
	if r.Result != nil && *r.Result != "" {
		return *r.Result
	}
	return "turn failed (" + r.Subtype + ")"
}

func (t *Translator) controlRequest(env *claude.Envelope, out []*pb.AgentEvent) []*pb.AgentEvent {
	var req claude.ControlRequest
	if err := json.Unmarshal(env.Request, &req); err != nil || req.Subtype != "can_use_tool" {
		return out
	}
	first := len(out)
	if req.ToolName == ToolAskUserQuestion {
		out = append(out, questionEvents(env.RequestID, req.Input)...)
	}
	if len(out) == first {
		desc := req.Description
		if desc == "" {
			desc = req.DecisionReason
		}
		out = append(out, &pb.AgentEvent{Event: &pb.AgentEvent_PermissionRequest{PermissionRequest: &pb.PermissionRequest{
			RequestId: env.RequestID, ToolName: req.ToolName, Description: desc, Input: ToStruct(req.Input),
			Suggestions: suggestions(req.PermissionSuggestions), ToolUseId: req.ToolUseID,
		}}})
	}
	out = t.toolInput(out, req.ToolUseID, req.ToolName, req.Input, req.AgentID != "")
	if req.AgentID != "" {
		// A subagent asks: attribute it to the Agent tool call that started it.
		for _, ev := range out[first:] {
			ev.ParentToolUseId = t.agents[req.AgentID]
		}
	}
	return t.setStatus(out, pb.AgentStatus_WAITING_FOR_USER, req.ToolName)
}

// suggestions converts permission_suggestions (PermissionUpdate objects)
// to Structs, dropping any element that is not an object.
func suggestions(raw json.RawMessage) []*structpb.Struct {
	var list []json.RawMessage
	if json.Unmarshal(raw, &list) != nil {
		return nil
	}
	var out []*structpb.Struct
	for _, s := range list {
		if st := ToStruct(s); st != nil {
			out = append(out, st)
		}
	}
	return out
}

// toolInput handles the tools whose input means more than a tool call:
// TodoWrite's list becomes a TodoUpdate at once (once per tool id); Task*
// calls and main-thread ExitPlanMode calls are kept until their results;
// ExitPlanMode's plan, if its input has one, is remembered.
func (t *Translator) toolInput(out []*pb.AgentEvent, id, name string, input json.RawMessage, sub bool) []*pb.AgentEvent {
	if id == "" {
		return out
	}
	switch name {
	case ToolTodoWrite:
		if t.todoWrite[id] {
			return out
		}
		if ev, ok := todoWrite(input); ok {
			t.todoWrite[id] = true
			out = append(out, ev)
		}
	case ToolTaskCreate, ToolTaskUpdate:
		if _, ok := t.calls[id]; !ok && len(input) > 0 && json.Valid(input) {
			t.calls[id] = call{name: name, input: input}
		}
	case ToolExitPlanMode:
		// A subagent's ExitPlanMode does not change the session's mode.
		if sub {
			return out
		}
		if _, ok := t.calls[id]; !ok {
			t.calls[id] = call{name: name}
		}
		t.notePlan(input)
	}
	return out
}

// callResult applies the result of a call toolInput kept.
func (t *Translator) callResult(out []*pb.AgentEvent, c call, isError bool, result json.RawMessage) []*pb.AgentEvent {
	switch c.name {
	case ToolExitPlanMode:
		return t.exitPlanResult(out, isError, result)
	case ToolTaskCreate:
		if !isError && t.checklist.create(c.input, result) {
			out = append(out, t.checklist.event())
		}
	case ToolTaskUpdate:
		if !isError && t.checklist.update(c.input, result) {
			out = append(out, t.checklist.event())
		}
	}
	return out
}
