package acp

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	acpsdk "github.com/coder/acp-go-sdk"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/betcode-dev/betcode/agent/provider"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// Stop reasons of TurnComplete besides the agent's own (end_turn,
// max_tokens, max_turn_requests, refusal, cancelled).
const (
	StopError = "error"
)

// Error codes of ErrorEvents.
const (
	CodeAgentError = "AGENT_ERROR"
)

// translator maps one ACP session's updates to AgentEvents. It is pure
// (the clock is injected) and not safe for concurrent use.
type translator struct {
	now      func() time.Time
	dir      string // the session's working directory, for relative paths
	status   pb.AgentStatus
	streamed bool // text was streamed in this turn
	tools    map[acpsdk.ToolCallId]*toolState
	usage    *pb.UsageReport // the latest usage_update of the turn
	// thought gathers streamed thought chunks, published as one THINKING
	// status when something else comes.
	thought strings.Builder
}

// maxThought bounds a gathered thought.
const maxThought = 64 << 10

// toolState is what is known of one tool call.
type toolState struct {
	kind      acpsdk.ToolKind
	title     string
	rawInput  any
	locs      []acpsdk.ToolCallLocation
	started   time.Time
	announced bool // its ToolCallStart was emitted
	done      bool
}

func newTranslator(dir string, now func() time.Time) *translator {
	return &translator{now: now, dir: dir, tools: map[acpsdk.ToolCallId]*toolState{}}
}

// setStatus appends a StatusChange unless the status is already s (and
// msg is empty).
func (t *translator) setStatus(out []*pb.AgentEvent, s pb.AgentStatus, msg string) []*pb.AgentEvent {
	if t.status == s && msg == "" {
		return out
	}
	t.status = s
	return append(out, provider.StatusEvent(s, msg))
}

// flushThought publishes the gathered thought.
func (t *translator) flushThought(out []*pb.AgentEvent) []*pb.AgentEvent {
	if t.thought.Len() == 0 {
		return out
	}
	t.status = pb.AgentStatus_THINKING
	out = append(out, provider.StatusEvent(pb.AgentStatus_THINKING, t.thought.String()))
	t.thought.Reset()
	return out
}

// update translates one session/update.
func (t *translator) update(u acpsdk.SessionUpdate) []*pb.AgentEvent {
	if u.AgentThoughtChunk != nil {
		if text := blockText(u.AgentThoughtChunk.Content); t.thought.Len()+len(text) <= maxThought {
			t.thought.WriteString(text)
		}
		return nil
	}
	out := t.flushThought(nil)
	switch {
	case u.AgentMessageChunk != nil:
		text := blockText(u.AgentMessageChunk.Content)
		if text == "" {
			return out
		}
		out = t.setStatus(out, pb.AgentStatus_THINKING, "")
		t.streamed = true
		return append(out, provider.TextEvent(text, false))
	case u.ToolCall != nil:
		c := u.ToolCall
		ts := t.tool(c.ToolCallId)
		ts.kind, ts.title, ts.locs = c.Kind, c.Title, c.Locations
		if known(c.RawInput) {
			ts.rawInput = c.RawInput
		}
		if ts.rawInput != nil || (c.Status != "" && c.Status != acpsdk.ToolCallStatusPending) {
			out = t.announce(out, c.ToolCallId, ts)
		}
		return t.finish(out, c.ToolCallId, ts, c.Status, c.Content, c.RawOutput)
	case u.ToolCallUpdate != nil:
		c := u.ToolCallUpdate
		ts := t.tool(c.ToolCallId)
		t.merge(ts, c.Kind, c.Title, c.RawInput, c.Locations)
		var st acpsdk.ToolCallStatus
		if c.Status != nil {
			st = *c.Status
		}
		if ts.rawInput != nil || (st != "" && st != acpsdk.ToolCallStatusPending) {
			out = t.announce(out, c.ToolCallId, ts)
		}
		return t.finish(out, c.ToolCallId, ts, st, c.Content, c.RawOutput)
	case u.Plan != nil:
		items := make([]*pb.TodoItem, 0, len(u.Plan.Entries))
		for i, e := range u.Plan.Entries {
			items = append(items, &pb.TodoItem{Id: fmt.Sprint(i + 1), Subject: e.Content, Status: todoStatus(e.Status)})
		}
		return append(out, &pb.AgentEvent{Event: &pb.AgentEvent_TodoUpdate{TodoUpdate: &pb.TodoUpdate{Items: items}}})
	case u.UsageUpdate != nil:
		// Context window use: Used is what the next request sends.
		r := &pb.UsageReport{InputTokens: clampU32(u.UsageUpdate.Used)}
		if c := u.UsageUpdate.Cost; c != nil && strings.EqualFold(c.Currency, "USD") {
			r.CostUsd = c.Amount
		}
		t.usage = r
	}
	return out
}

// tool returns the state of tool call id, creating it.
func (t *translator) tool(id acpsdk.ToolCallId) *toolState {
	ts := t.tools[id]
	if ts == nil {
		ts = &toolState{started: t.now()}
		t.tools[id] = ts
	}
	return ts
}

// merge records what a tool call update or a permission request says of a
// tool call.
func (t *translator) merge(ts *toolState, kind *acpsdk.ToolKind, title *string, raw any, locs []acpsdk.ToolCallLocation) {
	if kind != nil {
		ts.kind = *kind
	}
	if title != nil {
		ts.title = *title
	}
	if known(raw) {
		ts.rawInput = raw
	}
	if len(locs) > 0 {
		ts.locs = locs
	}
}

// known reports whether a tool call's raw input says something: agents
// that stream a tool's input announce it with {} first.
func known(raw any) bool {
	switch r := raw.(type) {
	case nil:
		return false
	case map[string]any:
		return len(r) > 0
	}
	return true
}

// announce emits a tool call's ToolCallStart and EXECUTING_TOOL, once: when
// its input is known, it has started, or it asks permission.
func (t *translator) announce(out []*pb.AgentEvent, id acpsdk.ToolCallId, ts *toolState) []*pb.AgentEvent {
	if ts.announced {
		return out
	}
	ts.announced = true
	name, input, _ := t.toolRequest(ts)
	out = append(out, &pb.AgentEvent{Event: &pb.AgentEvent_ToolCallStart{ToolCallStart: &pb.ToolCallStart{
		ToolId: string(id), ToolName: name, Input: toStruct(input), Description: ts.title,
	}}})
	return t.setStatus(out, pb.AgentStatus_EXECUTING_TOOL, "")
}

// finish emits a tool call's ToolCallResult once it completed or failed.
func (t *translator) finish(out []*pb.AgentEvent, id acpsdk.ToolCallId, ts *toolState, st acpsdk.ToolCallStatus, content []acpsdk.ToolCallContent, rawOut any) []*pb.AgentEvent {
	if ts.done || (st != acpsdk.ToolCallStatusCompleted && st != acpsdk.ToolCallStatusFailed) {
		return out
	}
	ts.done = true
	out = append(out, &pb.AgentEvent{Event: &pb.AgentEvent_ToolCallResult{ToolCallResult: &pb.ToolCallResult{
		ToolId: string(id), Output: toolOutput(content, rawOut), IsError: st == acpsdk.ToolCallStatusFailed,
		DurationMs: clampU32(int(t.now().Sub(ts.started).Milliseconds())),
	}}})
	return t.setStatus(out, pb.AgentStatus_THINKING, "")
}

// turnEnded ends a turn: the streamed text completed, usage, TurnComplete
// and IDLE.
func (t *translator) turnEnded(stop string, u *acpsdk.Usage) []*pb.AgentEvent {
	out := t.flushThought(nil)
	if t.streamed {
		out = append(out, provider.TextEvent("", true))
	}
	switch {
	case u != nil:
		r := &pb.UsageReport{
			InputTokens:  clampU32(u.InputTokens),
			OutputTokens: clampU32(u.OutputTokens),
		}
		if u.CachedReadTokens != nil {
			r.CacheReadTokens = clampU32(*u.CachedReadTokens)
		}
		if u.CachedWriteTokens != nil {
			r.CacheCreationTokens = clampU32(*u.CachedWriteTokens)
		}
		if t.usage != nil {
			r.CostUsd = t.usage.CostUsd
		}
		out = append(out, &pb.AgentEvent{Event: &pb.AgentEvent_Usage{Usage: r}})
	case t.usage != nil:
		out = append(out, &pb.AgentEvent{Event: &pb.AgentEvent_Usage{Usage: t.usage}})
	}
	out = append(out, provider.TurnCompleteEvent(stop))
	t.streamed, t.usage = false, nil
	clear(t.tools)
	t.status = pb.AgentStatus_IDLE
	return append(out, provider.StatusEvent(pb.AgentStatus_IDLE, ""))
}

// turnFailed ends a turn the agent answered with an error.
func (t *translator) turnFailed(err error) []*pb.AgentEvent {
	out := t.flushThought(nil)
	out = append(out, provider.ErrorEvent(CodeAgentError, err.Error(), false))
	return append(out, t.turnEnded(StopError, nil)...)
}

// toolRequest names a tool call in BetCode's rule syntax and gives its
// input: execute with a command is Bash {"command"}; edit is Write (a
// whole file's content) or Edit, with "file_path"; read is Read with
// "file_path", read-only when it reads inside the working directory; any
// other tool is named by its title (else its kind) with its raw input.
func (t *translator) toolRequest(ts *toolState) (name string, input map[string]any, readOnly bool) {
	input = map[string]any{}
	if m, ok := ts.rawInput.(map[string]any); ok {
		for k, v := range m {
			input[k] = v
		}
	} else if ts.rawInput != nil {
		input["input"] = ts.rawInput
	}
	switch ts.kind {
	case acpsdk.ToolKindExecute:
		if cmd := commandOf(input); cmd != "" {
			input["command"] = cmd
			return "Bash", input, false
		}
	case acpsdk.ToolKindEdit:
		if p := t.pathOf(input, ts.locs); p != "" {
			input["file_path"] = p
			_, hasContent := input["content"]
			_, hasOld := input["old_string"]
			if hasContent && !hasOld {
				return "Write", input, false
			}
			return "Edit", input, false
		}
	case acpsdk.ToolKindRead:
		if p := t.pathOf(input, ts.locs); p != "" {
			input["file_path"] = p
			return "Read", input, inside(t.dir, p)
		}
	}
	switch {
	case ts.title != "":
		return ts.title, input, false
	case ts.kind != "":
		return string(ts.kind), input, false
	}
	return "tool", input, false
}

// commandOf is the shell command of an execute tool's raw input: its
// "command" (a string, or words joined by spaces).
func commandOf(in map[string]any) string {
	switch c := in["command"].(type) {
	case string:
		return c
	case []any:
		words := make([]string, 0, len(c))
		for _, w := range c {
			s, ok := w.(string)
			if !ok {
				return ""
			}
			words = append(words, s)
		}
		return strings.Join(words, " ")
	}
	return ""
}

// pathOf is the absolute file path a tool call works on: file_path, path
// or filePath of its raw input, else its first location.
func (t *translator) pathOf(in map[string]any, locs []acpsdk.ToolCallLocation) string {
	p := ""
	for _, k := range []string{"file_path", "path", "filePath", "abs_path"} {
		if s, ok := in[k].(string); ok && s != "" {
			p = s
			break
		}
	}
	if p == "" && len(locs) > 0 {
		p = locs[0].Path
	}
	if p != "" && !filepath.IsAbs(p) && t.dir != "" {
		p = filepath.Join(t.dir, p)
	}
	return p
}

// blockText is the text of a content block ("" for non-text blocks).
func blockText(b acpsdk.ContentBlock) string {
	switch {
	case b.Text != nil:
		return b.Text.Text
	case b.ResourceLink != nil:
		return b.ResourceLink.Uri
	}
	return ""
}

// toolOutput is a tool call's output as text: its text content, diffs as
// "edited PATH", terminals by id, else its raw output as JSON.
func toolOutput(content []acpsdk.ToolCallContent, rawOut any) string {
	var parts []string
	for _, c := range content {
		switch {
		case c.Content != nil:
			if s := blockText(c.Content.Content); s != "" {
				parts = append(parts, s)
			}
		case c.Diff != nil:
			parts = append(parts, "edited "+c.Diff.Path)
		case c.Terminal != nil:
			parts = append(parts, "terminal "+c.Terminal.TerminalId)
		}
	}
	if len(parts) > 0 {
		return strings.Join(parts, "\n")
	}
	switch r := rawOut.(type) {
	case nil:
		return ""
	case string:
		return r
	}
	b, err := json.Marshal(rawOut)
	if err != nil {
		return ""
	}
	return string(b)
}

// todoStatus maps a plan entry's status.
func todoStatus(s acpsdk.PlanEntryStatus) pb.TodoStatus {
	switch s {
	case acpsdk.PlanEntryStatusPending:
		return pb.TodoStatus_PENDING
	case acpsdk.PlanEntryStatusInProgress:
		return pb.TodoStatus_IN_PROGRESS
	case acpsdk.PlanEntryStatusCompleted:
		return pb.TodoStatus_COMPLETED
	}
	return pb.TodoStatus_TODO_STATUS_UNSPECIFIED
}

// toStruct converts a JSON object; values Struct cannot hold are dropped.
func toStruct(m map[string]any) *structpb.Struct {
	if len(m) == 0 {
		return nil
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil
	}
	s := &structpb.Struct{}
	if err := s.UnmarshalJSON(b); err != nil {
		return nil
	}
	return s
}

func clampU32(n int) uint32 {
	switch {
	case n < 0:
		return 0
	case uint64(n) > 1<<32-1:
		return 1<<32 - 1
	}
	return uint32(n)
}
