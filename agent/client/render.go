package client

import (
	"cmp"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// Renderer prints events for a terminal: text as it streams, tool calls on
// one line each, usage at the end of a turn, permission requests with the
// tool's input, questions with numbered options, the todo list whenever it
// changes and plan mode switches.
type Renderer struct {
	Out, Err io.Writer
	// QuestionsByCaller leaves UserQuestion events unprinted: the caller
	// asks them one at a time (Question formats one).
	QuestionsByCaller bool

	midLine bool
	hidden  map[string]bool // tool ids whose start and result are not shown
	warned  map[string]bool // deprecated features already warned about
}

// Tools whose calls are shown through richer events (TodoUpdate,
// UserQuestion), so their ToolCallStart is not printed.
var richTools = map[string]bool{"TodoWrite": true, "AskUserQuestion": true}

// Event prints one event.
func (r *Renderer) Event(ev *pb.AgentEvent) {
	indent := ""
	if ev.ParentToolUseId != "" {
		indent = "    │ "
	}
	switch e := ev.Event.(type) {
	case *pb.AgentEvent_TextDelta:
		if e.TextDelta.Text != "" {
			t := e.TextDelta.Text
			if indent != "" {
				t = indent + strings.ReplaceAll(t, "\n", "\n"+indent)
			}
			fmt.Fprint(r.Out, t)
			r.midLine = !strings.HasSuffix(t, "\n")
		}
		if e.TextDelta.IsComplete {
			r.EndLine()
		}
	case *pb.AgentEvent_ToolCallStart:
		if richTools[e.ToolCallStart.ToolName] {
			if e.ToolCallStart.ToolName == "TodoWrite" {
				if r.hidden == nil {
					r.hidden = map[string]bool{}
				}
				r.hidden[e.ToolCallStart.ToolId] = true
			}
			return
		}
		r.EndLine()
		fmt.Fprintf(r.Out, "%s⏺ %s(%s)\n", indent, e.ToolCallStart.ToolName, ToolSummary(e.ToolCallStart))
	case *pb.AgentEvent_ToolCallResult:
		if r.hidden[e.ToolCallResult.ToolId] && !e.ToolCallResult.IsError {
			delete(r.hidden, e.ToolCallResult.ToolId)
			return
		}
		r.EndLine()
		mark := "⎿"
		if e.ToolCallResult.IsError {
			mark = "⎿ error:"
		}
		fmt.Fprintf(r.Out, "%s  %s %s (%d ms)\n", indent, mark, firstLine(e.ToolCallResult.Output, 100), e.ToolCallResult.DurationMs)
	case *pb.AgentEvent_PermissionRequest:
		r.EndLine()
		p := e.PermissionRequest
		summary := PermissionSummary(p)
		fmt.Fprintf(r.Out, "%s? Claude wants to use %s: %s\n", indent, p.ToolName, summary)
		d := strings.TrimSpace(p.Description)
		if d == "" && p.Input != nil {
			d, _ = p.Input.AsMap()["description"].(string)
		}
		if d = firstLine(d, 200); d != "" && d != summary {
			fmt.Fprintf(r.Out, "%s  %s\n", indent, d)
		}
	case *pb.AgentEvent_UserQuestion:
		if r.QuestionsByCaller {
			return
		}
		r.EndLine()
		fmt.Fprint(r.Out, indentLines(Question(e.UserQuestion), indent))
	case *pb.AgentEvent_TodoUpdate:
		r.EndLine()
		fmt.Fprint(r.Out, indentLines(TodoList(e.TodoUpdate.Items), indent))
	case *pb.AgentEvent_PlanMode:
		r.EndLine()
		fmt.Fprint(r.Out, indentLines(PlanMode(e.PlanMode), indent))
	case *pb.AgentEvent_Error:
		r.EndLine()
		fmt.Fprintf(r.Err, "error [%s]: %s\n", e.Error.Code, e.Error.Message)
	case *pb.AgentEvent_Usage:
		r.EndLine()
		u := e.Usage
		fmt.Fprintf(r.Err, "── %d in / %d out tokens", u.InputTokens, u.OutputTokens)
		if u.CacheReadTokens > 0 || u.CacheCreationTokens > 0 {
			fmt.Fprintf(r.Err, " (cache %d read, %d written)", u.CacheReadTokens, u.CacheCreationTokens)
		}
		fmt.Fprintf(r.Err, " · $%.4f · %.1fs", u.CostUsd, float64(u.DurationMs)/1000)
		if u.Model != "" {
			fmt.Fprintf(r.Err, " · %s", u.Model)
		}
		fmt.Fprintln(r.Err)
	case *pb.AgentEvent_TurnComplete:
		r.EndLine()
	case *pb.AgentEvent_UserInput:
		r.EndLine()
		fmt.Fprint(r.Out, UserInput(e.UserInput))
	case *pb.AgentEvent_SubagentTask:
		if line := SubagentTask(e.SubagentTask); line != "" {
			r.EndLine()
			fmt.Fprint(r.Out, indent+line)
		}
	case *pb.AgentEvent_DeprecationWarning:
		if r.warned[e.DeprecationWarning.Feature] {
			return
		}
		if r.warned == nil {
			r.warned = map[string]bool{}
		}
		r.warned[e.DeprecationWarning.Feature] = true
		r.EndLine()
		fmt.Fprintln(r.Err, Deprecation(e.DeprecationWarning))
	}
}

// SubagentTask formats an update of an Agent-tool subagent on one line, or
// returns "" for the updates not shown: its start in the foreground (the
// Agent call's line says as much) and its progress (its tool calls show it).
// A background subagent's start and every subagent's end are shown, as they
// come apart from the call.
func SubagentTask(u *pb.SubagentTaskUpdate) string {
	name := cmp.Or(firstLine(u.Description, 80), u.SubagentType, "subagent")
	s := "◆ subagent " + strconv.Quote(name) + " "
	switch u.Status {
	case pb.SubagentTaskStatus_SUBAGENT_TASK_STATUS_STARTED:
		if !u.IsBackgrounded {
			return ""
		}
		s += "started in the background"
	case pb.SubagentTaskStatus_SUBAGENT_TASK_STATUS_COMPLETED:
		s += "completed"
		if u.DurationMs > 0 {
			uses := "tool uses"
			if u.ToolUses == 1 {
				uses = "tool use"
			}
			s += fmt.Sprintf(" (%d tokens, %d %s, %.1fs)", u.TotalTokens, u.ToolUses, uses, float64(u.DurationMs)/1000)
		}
	case pb.SubagentTaskStatus_SUBAGENT_TASK_STATUS_FAILED:
		s += "failed"
		if e := firstLine(cmp.Or(u.Error, u.Summary), 200); e != "" {
			s += ": " + e
		}
	case pb.SubagentTaskStatus_SUBAGENT_TASK_STATUS_STOPPED:
		s += "stopped"
	default:
		return ""
	}
	return s + "\n"
}

// UserInput formats a user's message as it is replayed: each line of the
// prompt after "> ", then one line per attachment (name, type and size; the
// log keeps no content).
func UserInput(in *pb.UserInputEvent) string {
	var b strings.Builder
	for _, l := range strings.Split(strings.TrimRight(in.Content, "\n"), "\n") {
		b.WriteString(strings.TrimRight("> "+l, " ") + "\n")
	}
	for _, a := range in.Attachments {
		fmt.Fprintf(&b, ">   [attached %s (%s, %d bytes)]\n", a.Filename, a.MimeType, a.Size)
	}
	return b.String()
}

// Deprecation formats a DeprecationWarning on one line.
func Deprecation(w *pb.DeprecationWarning) string {
	s := "warning: " + w.Feature + " is deprecated"
	if w.RemovalVersion != "" {
		s += " and goes in " + w.RemovalVersion
	}
	if w.Replacement != "" {
		s += "; use " + w.Replacement
	}
	if w.MigrationUrl != "" {
		s += " (" + w.MigrationUrl + ")"
	}
	return s
}

// EndLine ends a line of streamed text, if one is open, so that what the
// caller prints next starts on its own line; it reports whether it did.
func (r *Renderer) EndLine() bool {
	if r.midLine {
		fmt.Fprintln(r.Out)
		r.midLine = false
		return true
	}
	return false
}

func indentLines(s, indent string) string {
	if indent == "" {
		return s
	}
	return indent + strings.ReplaceAll(strings.TrimSuffix(s, "\n"), "\n", "\n"+indent) + "\n"
}

// ToolSummary is the compact argument shown next to a tool name.
func ToolSummary(t *pb.ToolCallStart) string {
	if t.Input == nil {
		return ""
	}
	m := t.Input.AsMap()
	for _, k := range []string{"command", "file_path", "notebook_path", "path", "pattern", "url", "query", "prompt", "description"} {
		if v, ok := m[k].(string); ok && v != "" {
			return firstLine(v, 80)
		}
	}
	return firstLine(KeyValues(m), 80)
}

// PermissionSummary is what a permission prompt shows of the tool call: the
// command for Bash, the file for the file tools, the pattern (and where) for
// the search tools, the URL for WebFetch, the plan for ExitPlanMode, and
// key=value pairs for anything else; the description when there is no input.
func PermissionSummary(p *pb.PermissionRequest) string {
	var m map[string]any
	if p.Input != nil {
		m = p.Input.AsMap()
	}
	return InputSummary(p.ToolName, m, p.Description)
}

// InputSummary is PermissionSummary for a tool name and its JSON input.
func InputSummary(tool string, m map[string]any, desc string) string {
	str := func(k string) string { s, _ := m[k].(string); return s }
	switch tool {
	case "Bash":
		if c := str("command"); c != "" {
			return firstLine(c, 300)
		}
	case "Read", "Write", "Edit", "MultiEdit", "NotebookEdit", "NotebookRead":
		for _, k := range []string{"file_path", "notebook_path", "path"} {
			if p := str(k); p != "" {
				return p
			}
		}
	case "Glob", "Grep":
		if pat := str("pattern"); pat != "" {
			if p := str("path"); p != "" {
				return pat + " in " + p
			}
			return pat
		}
	case "LS":
		if p := str("path"); p != "" {
			return p
		}
	case "WebFetch":
		if u := str("url"); u != "" {
			return u
		}
	case "WebSearch":
		if q := str("query"); q != "" {
			return q
		}
	case "ExitPlanMode":
		if p := str("plan"); p != "" {
			return firstLine(p, 200)
		}
	}
	if s := KeyValues(m); s != "" {
		return firstLine(s, 300)
	}
	return desc
}

// KeyValues renders an input as "k=v" pairs sorted by key, strings as they
// are (quoted when they hold spaces), other values in Go syntax.
func KeyValues(m map[string]any) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		v := m[k]
		if s, ok := v.(string); ok {
			if strings.ContainsAny(s, " \t\n\"") {
				v = fmt.Sprintf("%q", s)
			}
		}
		parts = append(parts, fmt.Sprintf("%s=%v", k, v))
	}
	return strings.Join(parts, " ")
}

// Question formats a question with its options numbered from 1.
func Question(q *pb.UserQuestion) string {
	var b strings.Builder
	fmt.Fprintf(&b, "? %s", q.Question)
	if q.MultiSelect {
		b.WriteString(" (several allowed)")
	}
	b.WriteByte('\n')
	for i, o := range q.Options {
		label := o.Label
		if label == "" {
			label = o.Value
		}
		fmt.Fprintf(&b, "  %d. %s", i+1, label)
		if o.Description != "" {
			fmt.Fprintf(&b, " — %s", o.Description)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// TodoList formats the whole todo list, one item a line: ☐ pending,
// ◐ in progress (its active form), ☑ completed.
func TodoList(items []*pb.TodoItem) string {
	done := 0
	for _, it := range items {
		if it.Status == pb.TodoStatus_COMPLETED {
			done++
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "☰ todos %d/%d done\n", done, len(items))
	for _, it := range items {
		mark, text := "☐", it.Subject
		switch it.Status {
		case pb.TodoStatus_IN_PROGRESS:
			mark = "◐"
			if it.ActiveForm != "" {
				text = it.ActiveForm
			}
		case pb.TodoStatus_COMPLETED:
			mark = "☑"
		}
		if text == "" {
			text = firstLine(it.Description, 100)
		}
		fmt.Fprintf(&b, "  %s %s\n", mark, firstLine(text, 100))
	}
	return b.String()
}

// PlanMode formats a plan mode switch: "plan mode on", or "plan mode off"
// and the plan that was approved.
func PlanMode(p *pb.PlanModeChange) string {
	if p.Active {
		return "◇ plan mode on\n"
	}
	s := "◇ plan mode off\n"
	if plan := strings.TrimSpace(p.Plan); plan != "" {
		s += "  " + strings.ReplaceAll(plan, "\n", "\n  ") + "\n"
	}
	return s
}

func firstLine(s string, max int) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i] + " …"
	}
	if r := []rune(s); len(r) > max {
		s = string(r[:max]) + "…"
	}
	return s
}
