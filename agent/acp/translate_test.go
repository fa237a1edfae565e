package acp

import (
	"bytes"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	acpsdk "github.com/coder/acp-go-sdk"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/betcode-dev/betcode/agent/provider"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// fixedClock returns now, then now+step, ...
func fixedClock(step time.Duration) func() time.Time {
	t := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	return func() time.Time {
		t = t.Add(step)
		return t
	}
}

// compact renders events for comparison.
func compact(evs []*pb.AgentEvent) string {
	var parts []string
	for _, e := range evs {
		b, _ := protojson.Marshal(e)
		var c bytes.Buffer
		_ = json.Compact(&c, b) // protojson varies its spacing on purpose
		parts = append(parts, c.String())
	}
	return strings.Join(parts, "\n")
}

func TestTranslateUpdates(t *testing.T) {
	tests := []struct {
		name    string
		updates []string // session/update "update" objects
		want    []string // protojson of the events, in order
	}{
		{"text streams", []string{
			`{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"Hel"}}`,
			`{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"lo"}}`,
			`{"sessionUpdate":"agent_message_chunk","content":{"type":"image","data":"AA==","mimeType":"image/png"}}`,
		}, []string{
			`{"statusChange":{"status":"THINKING"}}`,
			`{"textDelta":{"text":"Hel"}}`,
			`{"textDelta":{"text":"lo"}}`,
		}},
		{"thought gathered until something else comes", []string{
			`{"sessionUpdate":"agent_thought_chunk","content":{"type":"text","text":"hm"}}`,
			`{"sessionUpdate":"agent_thought_chunk","content":{"type":"text","text":"m, "}}`,
			`{"sessionUpdate":"agent_thought_chunk","content":{"type":"text","text":"yes"}}`,
			`{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"Hi"}}`,
		}, []string{
			`{"statusChange":{"status":"THINKING","message":"hmm, yes"}}`,
			`{"textDelta":{"text":"Hi"}}`,
		}},
		{"streamed tool input", []string{
			`{"sessionUpdate":"tool_call","toolCallId":"c0","title":"Terminal","kind":"execute","status":"pending","rawInput":{}}`,
			`{"sessionUpdate":"tool_call_update","toolCallId":"c0","rawInput":{"command":"make"}}`,
			`{"sessionUpdate":"tool_call_update","toolCallId":"c0","status":"in_progress","rawInput":{"command":"make"}}`,
		}, []string{
			`{"toolCallStart":{"toolId":"c0","toolName":"Bash","input":{"command":"make"},"description":"Terminal"}}`,
			`{"statusChange":{"status":"EXECUTING_TOOL"}}`,
		}},
		{"execute tool call", []string{
			`{"sessionUpdate":"tool_call","toolCallId":"c1","title":"Run ls","kind":"execute","status":"pending","rawInput":{"command":"ls -l"}}`,
			`{"sessionUpdate":"tool_call_update","toolCallId":"c1","status":"in_progress"}`,
			`{"sessionUpdate":"tool_call_update","toolCallId":"c1","status":"completed","content":[{"type":"content","content":{"type":"text","text":"a.txt"}}]}`,
		}, []string{
			`{"toolCallStart":{"toolId":"c1","toolName":"Bash","input":{"command":"ls -l"},"description":"Run ls"}}`,
			`{"statusChange":{"status":"EXECUTING_TOOL"}}`,
			`{"toolCallResult":{"toolId":"c1","output":"a.txt","durationMs":1000}}`,
			`{"statusChange":{"status":"THINKING"}}`,
		}},
		{"tool call announced once its input is known", []string{
			`{"sessionUpdate":"tool_call","toolCallId":"c2","title":"Edit","kind":"edit","locations":[{"path":"/p/a.go"}]}`,
			`{"sessionUpdate":"tool_call_update","toolCallId":"c2","status":"failed","rawOutput":{"error":"nope"}}`,
			`{"sessionUpdate":"tool_call_update","toolCallId":"c2","status":"failed"}`,
		}, []string{
			`{"toolCallStart":{"toolId":"c2","toolName":"Edit","input":{"file_path":"/p/a.go"},"description":"Edit"}}`,
			`{"statusChange":{"status":"EXECUTING_TOOL"}}`,
			`{"toolCallResult":{"toolId":"c2","output":"{\"error\":\"nope\"}","isError":true,"durationMs":1000}}`,
			`{"statusChange":{"status":"THINKING"}}`,
		}},
		{"diff output", []string{
			`{"sessionUpdate":"tool_call","toolCallId":"c3","title":"Write a","kind":"edit","status":"completed","rawInput":{"file_path":"a","content":"x"},"content":[{"type":"diff","path":"/p/a","newText":"x"}]}`,
		}, []string{
			`{"toolCallStart":{"toolId":"c3","toolName":"Write","input":{"content":"x","file_path":"/p/a"},"description":"Write a"}}`,
			`{"statusChange":{"status":"EXECUTING_TOOL"}}`,
			`{"toolCallResult":{"toolId":"c3","output":"edited /p/a","durationMs":1000}}`,
			`{"statusChange":{"status":"THINKING"}}`,
		}},
		{"plan", []string{
			`{"sessionUpdate":"plan","entries":[{"content":"a","priority":"high","status":"completed"},{"content":"b","priority":"low","status":"pending"}]}`,
		}, []string{
			`{"todoUpdate":{"items":[{"id":"1","subject":"a","status":"COMPLETED"},{"id":"2","subject":"b","status":"PENDING"}]}}`,
		}},
		{"ignored updates", []string{
			`{"sessionUpdate":"available_commands_update","availableCommands":[]}`,
			`{"sessionUpdate":"current_mode_update","currentModeId":"default"}`,
			`{"sessionUpdate":"user_message_chunk","content":{"type":"text","text":"me"}}`,
			`{"sessionUpdate":"usage_update","used":10,"size":100}`,
		}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := newTranslator("/p", fixedClock(time.Second))
			var got []*pb.AgentEvent
			for _, u := range tc.updates {
				var su acpsdk.SessionUpdate
				if err := json.Unmarshal([]byte(u), &su); err != nil {
					t.Fatalf("%s: %v", u, err)
				}
				got = append(got, tr.update(su)...)
			}
			if g, w := compact(got), strings.Join(tc.want, "\n"); g != w {
				t.Errorf("events:\n%s\nwant:\n%s", g, w)
			}
		})
	}
}

func TestTurnEnded(t *testing.T) {
	cached := 3
	tests := []struct {
		name   string
		text   bool
		update *acpsdk.SessionUsageUpdate
		usage  *acpsdk.Usage
		stop   string
		want   []string
	}{
		{"plain", false, nil, nil, "end_turn", []string{
			`{"turnComplete":{"stopReason":"end_turn"}}`, `{"statusChange":{"status":"IDLE"}}`}},
		{"streamed text completes", true, nil, nil, "max_tokens", []string{
			`{"textDelta":{"isComplete":true}}`, `{"turnComplete":{"stopReason":"max_tokens"}}`, `{"statusChange":{"status":"IDLE"}}`}},
		{"prompt usage with the cost of usage_update", false, &acpsdk.SessionUsageUpdate{Used: 99, Cost: &acpsdk.Cost{Amount: 0.5, Currency: "usd"}},
			&acpsdk.Usage{InputTokens: 10, OutputTokens: 4, CachedReadTokens: &cached}, "end_turn", []string{
				`{"usage":{"inputTokens":10,"outputTokens":4,"cacheReadTokens":3,"costUsd":0.5}}`,
				`{"turnComplete":{"stopReason":"end_turn"}}`, `{"statusChange":{"status":"IDLE"}}`}},
		{"usage_update alone", false, &acpsdk.SessionUsageUpdate{Used: 99, Cost: &acpsdk.Cost{Amount: 2, Currency: "EUR"}}, nil, "cancelled", []string{
			`{"usage":{"inputTokens":99}}`, `{"turnComplete":{"stopReason":"cancelled"}}`, `{"statusChange":{"status":"IDLE"}}`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := newTranslator("/p", fixedClock(time.Second))
			if tc.text {
				tr.update(acpsdk.UpdateAgentMessageText("x"))
			}
			if tc.update != nil {
				tr.update(acpsdk.SessionUpdate{UsageUpdate: tc.update})
			}
			if g, w := compact(tr.turnEnded(tc.stop, tc.usage)), strings.Join(tc.want, "\n"); g != w {
				t.Errorf("events:\n%s\nwant:\n%s", g, w)
			}
			// The next turn starts afresh.
			if g := compact(tr.turnEnded("end_turn", nil)); strings.Contains(g, "usage") || strings.Contains(g, "textDelta") {
				t.Errorf("state left over into the next turn: %s", g)
			}
		})
	}
	tr := newTranslator("/p", fixedClock(time.Second))
	got := compact(tr.turnFailed(errors.New("boom")))
	if !strings.HasPrefix(got, `{"error":{"code":"AGENT_ERROR","message":"boom"}}`) || !strings.Contains(got, `"stopReason":"error"`) {
		t.Errorf("turnFailed events %s", got)
	}
}

func TestToolRequest(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name     string
		kind     acpsdk.ToolKind
		title    string
		raw      any
		locs     []acpsdk.ToolCallLocation
		tool     string
		input    string
		readOnly bool
	}{
		{"shell command", acpsdk.ToolKindExecute, "ls", map[string]any{"command": "ls", "description": "list"}, nil,
			"Bash", `{"command":"ls","description":"list"}`, false},
		{"argv command", acpsdk.ToolKindExecute, "ls", map[string]any{"command": []any{"bash", "-lc", "ls"}}, nil,
			"Bash", `{"command":"bash -lc ls"}`, false},
		{"execute without a command", acpsdk.ToolKindExecute, "Terminal", map[string]any{"x": 1.0}, nil,
			"Terminal", `{"x":1}`, false},
		{"edit", acpsdk.ToolKindEdit, "Edit a", map[string]any{"file_path": "a.go", "old_string": "x", "new_string": "y"}, nil,
			"Edit", `{"file_path":"` + filepath.Join(dir, "a.go") + `","new_string":"y","old_string":"x"}`, false},
		{"write", acpsdk.ToolKindEdit, "Write a", map[string]any{"path": "/abs/a.go", "content": "x"}, nil,
			"Write", `{"content":"x","file_path":"/abs/a.go","path":"/abs/a.go"}`, false},
		{"edit by location", acpsdk.ToolKindEdit, "Patch", nil, []acpsdk.ToolCallLocation{{Path: "/abs/b.go"}},
			"Edit", `{"file_path":"/abs/b.go"}`, false},
		{"read inside", acpsdk.ToolKindRead, "Read", map[string]any{"file_path": filepath.Join(dir, "a.go")}, nil,
			"Read", `{"file_path":"` + filepath.Join(dir, "a.go") + `"}`, true},
		{"read outside", acpsdk.ToolKindRead, "Read", map[string]any{"file_path": "/etc/passwd"}, nil,
			"Read", `{"file_path":"/etc/passwd"}`, false},
		{"read ../", acpsdk.ToolKindRead, "Read", map[string]any{"file_path": "../x"}, nil,
			"Read", `{"file_path":"` + filepath.Join(dir, "../x") + `"}`, false},
		{"fetch by title", acpsdk.ToolKindFetch, "Fetch https://x", map[string]any{"url": "https://x"}, nil,
			"Fetch https://x", `{"url":"https://x"}`, false},
		{"by kind", acpsdk.ToolKindDelete, "", "rm a", nil, "delete", `{"input":"rm a"}`, false},
		{"nothing known", "", "", nil, nil, "tool", `{}`, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := newTranslator(dir, time.Now)
			name, input, ro := tr.toolRequest(&toolState{kind: tc.kind, title: tc.title, rawInput: tc.raw, locs: tc.locs})
			b, _ := json.Marshal(input)
			if name != tc.tool || string(b) != tc.input || ro != tc.readOnly {
				t.Errorf("toolRequest = %q %s read-only %v; want %q %s %v", name, b, ro, tc.tool, tc.input, tc.readOnly)
			}
		})
	}
}

func TestOutcome(t *testing.T) {
	all := []acpsdk.PermissionOption{
		{Kind: acpsdk.PermissionOptionKindAllowOnce, OptionId: "once"},
		{Kind: acpsdk.PermissionOptionKindAllowAlways, OptionId: "always"},
		{Kind: acpsdk.PermissionOptionKindRejectOnce, OptionId: "reject"},
		{Kind: acpsdk.PermissionOptionKindRejectAlways, OptionId: "never"},
	}
	onlyAlways := []acpsdk.PermissionOption{
		{Kind: acpsdk.PermissionOptionKindAllowAlways, OptionId: "always"},
		{Kind: acpsdk.PermissionOptionKindRejectAlways, OptionId: "never"},
	}
	tests := []struct {
		name string
		opts []acpsdk.PermissionOption
		d    provider.Decision
		want string // option id, or "cancelled"
	}{
		{"allow", all, provider.Allow, "once"},
		{"allow for the session", all, provider.AllowForSession, "always"},
		{"deny", all, provider.Deny, "reject"},
		{"cancel", all, provider.Cancel, "cancelled"},
		{"allow falls back", onlyAlways, provider.Allow, "always"},
		{"deny falls back", onlyAlways, provider.Deny, "never"},
		{"no options", nil, provider.Allow, "cancelled"},
		{"no allow option", []acpsdk.PermissionOption{{Kind: acpsdk.PermissionOptionKindRejectOnce, OptionId: "r"}}, provider.AllowForSession, "cancelled"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := outcome(tc.opts, tc.d).Outcome
			got := "cancelled"
			if o.Selected != nil {
				got = string(o.Selected.OptionId)
			}
			if got != tc.want {
				t.Errorf("outcome = %s, want %s", got, tc.want)
			}
		})
	}
}

func outputWithdrawn(id string) provider.Output { return provider.Output{Withdrawn: id} }

// FuzzTranslate feeds arbitrary session/update objects (what an agent
// sends) and permission tool calls through the translator: it must never
// panic, and what it emits must be valid events.
func FuzzTranslate(f *testing.F) {
	for _, s := range []string{
		`{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi"}}`,
		`{"sessionUpdate":"tool_call","toolCallId":"c","title":"t","kind":"execute","rawInput":{"command":["a",1]}}`,
		`{"sessionUpdate":"tool_call_update","toolCallId":"c","status":"completed","rawOutput":[1,{"a":null}]}`,
		`{"sessionUpdate":"tool_call","toolCallId":"d","kind":"read","locations":[{"path":"../../etc/passwd"}]}`,
		`{"sessionUpdate":"plan","entries":[{"content":"x","priority":"high","status":"weird"}]}`,
		`{"sessionUpdate":"usage_update","used":-5,"size":1e12,"cost":{"amount":1,"currency":"USD"}}`,
		`{"sessionUpdate":"agent_thought_chunk","content":{"type":"resource_link","uri":"x","name":"y"}}`,
		`{"sessionUpdate":"tool_call","toolCallId":"e","kind":"edit","rawInput":"not an object"}`,
	} {
		f.Add([]byte(s))
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, b []byte) {
		tr := newTranslator(dir, time.Now)
		var su acpsdk.SessionUpdate
		if json.Unmarshal(b, &su) != nil {
			return
		}
		evs := tr.update(su)
		evs = append(evs, tr.turnEnded("end_turn", &acpsdk.Usage{InputTokens: -1, OutputTokens: 1 << 40})...)
		for _, e := range evs {
			if e.Event == nil {
				t.Fatalf("event without a kind from %s", b)
			}
			if _, err := protojson.Marshal(e); err != nil {
				t.Fatalf("unmarshalable event %v from %s: %v", e, b, err)
			}
		}
		var tc acpsdk.ToolCallUpdate
		if json.Unmarshal(b, &tc) == nil {
			ts := tr.tool(tc.ToolCallId)
			tr.merge(ts, tc.Kind, tc.Title, tc.RawInput, tc.Locations)
			name, input, _ := tr.toolRequest(ts)
			if name == "" {
				t.Fatalf("empty tool name from %s", b)
			}
			if _, err := json.Marshal(input); err != nil {
				t.Fatalf("tool input does not marshal: %v", err)
			}
		}
	})
}

// FuzzWithin: whatever path an agent names, within either refuses it or
// returns a path that, joined to the directory, stays inside it.
func FuzzWithin(f *testing.F) {
	for _, s := range []string{"a", "../a", "/etc/passwd", "a/../../b", "./", "", "a/./b/../..", "//x", "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		const dir = "/work/project"
		rel, err := within(dir, p)
		if err != nil {
			return
		}
		full := filepath.Join(dir, rel)
		if full != dir && !strings.HasPrefix(full, dir+"/") {
			t.Fatalf("within(%q) = %q: %s is outside %s", p, rel, full, dir)
		}
	})
}
