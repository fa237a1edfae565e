package client

import (
	"fmt"
	"io"
	"sort"
	"strings"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// Renderer prints events for a terminal: text as it streams, tool calls on
// one line each, usage at the end of a turn.
type Renderer struct {
	Out, Err io.Writer
	midLine  bool
}

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
			r.newline()
		}
	case *pb.AgentEvent_ToolCallStart:
		r.newline()
		fmt.Fprintf(r.Out, "%s⏺ %s(%s)\n", indent, e.ToolCallStart.ToolName, ToolSummary(e.ToolCallStart))
	case *pb.AgentEvent_ToolCallResult:
		r.newline()
		mark := "⎿"
		if e.ToolCallResult.IsError {
			mark = "⎿ error:"
		}
		fmt.Fprintf(r.Out, "%s  %s %s (%d ms)\n", indent, mark, firstLine(e.ToolCallResult.Output, 100), e.ToolCallResult.DurationMs)
	case *pb.AgentEvent_PermissionRequest:
		r.newline()
		p := e.PermissionRequest
		fmt.Fprintf(r.Out, "%s? Claude wants to use %s: %s\n", indent, p.ToolName, describeInput(p.Input.AsMap(), p.Description))
	case *pb.AgentEvent_Error:
		r.newline()
		fmt.Fprintf(r.Err, "error [%s]: %s\n", e.Error.Code, e.Error.Message)
	case *pb.AgentEvent_Usage:
		r.newline()
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
		r.newline()
	}
}

func (r *Renderer) newline() {
	if r.midLine {
		fmt.Fprintln(r.Out)
		r.midLine = false
	}
}

// ToolSummary is the compact argument shown next to a tool name.
func ToolSummary(t *pb.ToolCallStart) string {
	if t.Input == nil {
		return ""
	}
	m := t.Input.AsMap()
	for _, k := range []string{"command", "file_path", "path", "pattern", "url", "prompt", "description"} {
		if v, ok := m[k].(string); ok && v != "" {
			return firstLine(v, 80)
		}
	}
	return firstLine(describeInput(m, ""), 80)
}

func describeInput(m map[string]any, desc string) string {
	if c, ok := m["command"].(string); ok {
		return c
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%v", k, m[k]))
	}
	s := strings.Join(parts, " ")
	if s == "" {
		return desc
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
