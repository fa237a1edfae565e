package fakeopenai

import (
	"encoding/json"
	"strings"
	"testing"
)

func promptRequest(p string) *Request {
	return &Request{Input: []Item{{Type: "message", Role: "user", Text: p}}}
}

func TestKeywordReply(t *testing.T) {
	tests := []struct {
		prompt string
		check  func(Reply) bool
	}{
		{"hello", func(r Reply) bool { return r.Text == HelloText && r.Call == nil }},
		{"THINK now", func(r Reply) bool { return r.Reasoning == ReasoningText && r.Text == ThoughtText }},
		{"SHELL now", func(r Reply) bool {
			return r.Call != nil && r.Call.Kind == "function_call" && r.Call.Name == "exec_command" && strings.Contains(r.Call.Arguments, "shell.txt")
		}},
		{"ESCALATE", func(r Reply) bool {
			return r.Call != nil && strings.Contains(r.Call.Arguments, `"sandbox_permissions":"require_escalated"`) && strings.Contains(r.Call.Arguments, EscalateReason)
		}},
		{"PATCH", func(r Reply) bool {
			return r.Call != nil && r.Call.Kind == "custom_tool_call" && r.Call.Name == "apply_patch" &&
				r.Call.Input == "*** Begin Patch\n*** Add File: hello.txt\n+hello from patch\n*** End Patch\n"
		}},
		{"STREAM 3", func(r Reply) bool { return r.FullText() == "w0 w1 w2 " }},
		{"SLOW", func(r Reply) bool { return len(r.Deltas) == slowDeltas && r.Delay == slowDelay }},
		{"STALL", func(r Reply) bool { return r.Fault == Stall }},
		{"MALFORMED", func(r Reply) bool { return r.Fault == Malformed && r.Text == BrokenText }},
		{"CUT", func(r Reply) bool { return r.Fault == Cut }},
		{"ERR500 then THINK", func(r Reply) bool { return r.Status == 500 }},
		{"ERR429", func(r Reply) bool { return r.Status == 429 }},
		{"shell lower case", func(r Reply) bool { return r.Text == HelloText }},
	}
	for _, tt := range tests {
		t.Run(tt.prompt, func(t *testing.T) {
			if r := KeywordReply(promptRequest(tt.prompt)); !tt.check(r) {
				t.Errorf("KeywordReply(%q) = %+v", tt.prompt, r)
			}
		})
	}
	out := &Request{Input: []Item{{Type: "message", Role: "user", Text: "SHELL"}, {Type: "function_call_output", Output: "done"}}}
	if r := KeywordReply(out); r.Text != ToolResultPrefix+"done" {
		t.Errorf("reply to a tool output: %+v", r)
	}
}

func TestShellCallArguments(t *testing.T) {
	var args map[string]any
	if err := json.Unmarshal([]byte(ShellCall("ls", false, "").Arguments), &args); err != nil {
		t.Fatal(err)
	}
	if args["cmd"] != "ls" || args["login"] != false || args["sandbox_permissions"] != nil {
		t.Errorf("arguments %v", args)
	}
}
