package fakeapi

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"
)

func TestKeywordReply(t *testing.T) {
	const tools = `"tools":[{"name":"Bash"}],`
	prompt := func(p string) string {
		return `{` + tools + `"messages":[{"role":"user","content":` + quote(p) + `}]}`
	}
	tests := []struct {
		name string
		body string
		want Reply
	}{
		{name: "plain", body: prompt("hello"), want: Reply{Text: HelloText}},
		{name: "keyword must be a word", body: prompt("RUNTOOLS"), want: Reply{Text: HelloText}},
		{name: "runtool", body: prompt("please RUNTOOL now"), want: Reply{ToolUse: &ToolUse{Name: "Bash", Input: map[string]any{"command": ToolCommand, "description": "Create a file"}}}},
		{name: "ask", body: prompt("ASK me"), want: Reply{ToolUse: &ToolUse{Name: "AskUserQuestion", Input: AskInput}}},
		{name: "todo", body: prompt("TODO"), want: Reply{ToolUse: &ToolUse{Name: "TodoWrite", Input: TodoInput}}},
		{name: "think", body: prompt("THINK"), want: Reply{Thinking: ThinkingText, Text: ThoughtText}},
		{name: "stream n", body: prompt("STREAM 3"), want: Reply{Deltas: []string{"w0 ", "w1 ", "w2 "}}},
		{name: "long", body: prompt("LONG"), want: Reply{Deltas: NumberedDeltas(longDeltas)}},
		{name: "slow", body: prompt("SLOW"), want: Reply{Deltas: NumberedDeltas(slowDeltas), Delay: 200 * time.Millisecond}},
		{name: "stall", body: prompt("STALL"), want: Reply{Text: "This stream stalls.", Fault: Stall}},
		{name: "break", body: prompt("BREAK"), want: Reply{Text: BrokenText, Fault: ErrorEvent}},
		{name: "cut", body: prompt("CUT"), want: Reply{Text: BrokenText, Fault: Cut}},
		{name: "err500", body: prompt("ERR500"), want: Reply{Status: 500}},
		{name: "err529", body: prompt("ERR529"), want: Reply{Status: 529}},
		{name: "err429", body: prompt("ERR429"), want: Reply{Status: 429}},
		{name: "error wins over other keywords", body: prompt("RUNTOOL ERR500"), want: Reply{Status: 500}},
		{
			name: "tool result wins over keywords",
			body: `{` + tools + `"messages":[{"role":"user","content":"RUNTOOL"},{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"Bash","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"done"}]}]}]}`,
			want: Reply{Text: ToolResultPrefix + "done"},
		},
		{name: "side request", body: `{"max_tokens":1,"messages":[{"role":"user","content":"RUNTOOL"}]}`, want: Reply{Text: SideText}},
		{
			name: "compaction",
			body: `{` + tools + `"messages":[{"role":"user","content":"Your task is to create a detailed summary of the conversation so far."}]}`,
			want: Reply{Text: SummaryText},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, err := ParseRequest([]byte(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			if got := KeywordReply(req); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("KeywordReply = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
