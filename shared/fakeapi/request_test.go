package fakeapi

import (
	"strings"
	"testing"
)

// cliLikeBody mirrors the shape of a request the CLI sends on a tool turn:
// reminders in user text, a role "system" message, a tool_result with a
// reminder appended.
const cliLikeBody = `{
 "model": "claude-opus-5-5", "stream": true, "max_tokens": 128000,
 "system": [{"type":"text","text":"You are a Claude agent."},{"type":"text","text":"Be good."}],
 "tools": [{"name":"Bash","input_schema":{}},{"name":"Read","input_schema":{}}],
 "messages": [
  {"role":"user","content":[{"type":"text","text":"<system-reminder>\nnotes\n</system-reminder>"},{"type":"text","text":"first message alpha"}]},
  {"role":"system","content":"# Environment"},
  {"role":"assistant","content":[{"type":"text","text":"Hello from the fake model."}]},
  {"role":"user","content":"RUNTOOL please"},
  {"role":"assistant","content":[{"type":"tool_use","id":"toolu_fake_002_0","name":"Bash","input":{"command":"x"}}]},
  {"role":"user","content":[{"tool_use_id":"toolu_fake_002_0","type":"tool_result","content":"done\n\n<system-reminder>\nleft\n</system-reminder>","is_error":false}]}
 ]}`

func TestParseRequest(t *testing.T) {
	req, err := ParseRequest([]byte(cliLikeBody))
	if err != nil {
		t.Fatal(err)
	}
	if req.Model != "claude-opus-5-5" || !req.Stream || req.MaxTokens != 128000 {
		t.Errorf("model/stream/max_tokens = %q %v %d", req.Model, req.Stream, req.MaxTokens)
	}
	if req.System != "You are a Claude agent.\nBe good." {
		t.Errorf("System = %q", req.System)
	}
	if strings.Join(req.Tools, ",") != "Bash,Read" || !req.MainLoop() {
		t.Errorf("Tools = %v, MainLoop = %v", req.Tools, req.MainLoop())
	}
	if len(req.Messages) != 6 || len(req.Conversation()) != 5 {
		t.Fatalf("%d messages, %d in conversation", len(req.Messages), len(req.Conversation()))
	}
	var got []string
	for _, m := range req.Conversation() {
		got = append(got, m.Role+": "+m.Text)
	}
	want := []string{"user: first message alpha", "assistant: Hello from the fake model.", "user: RUNTOOL please", "assistant: ", "user: "}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("conversation = %q, want %q", got, want)
	}
	tu := req.Messages[4].Blocks[0]
	if tu.Type != "tool_use" || tu.ID != "toolu_fake_002_0" || tu.Name != "Bash" || string(tu.Input) != `{"command":"x"}` {
		t.Errorf("tool_use block = %+v", tu)
	}
	tr := req.LastToolResult()
	if tr == nil || tr.ToolUseID != "toolu_fake_002_0" || tr.Content != "done" {
		t.Fatalf("LastToolResult = %+v", tr)
	}
	if req.Prompt() != "" {
		t.Errorf("Prompt = %q on a tool result turn", req.Prompt())
	}
}

func TestRequestPrompt(t *testing.T) {
	tests := []struct {
		name       string
		body       string
		prompt     string
		compaction bool
	}{
		{
			name:   "string content",
			body:   `{"messages":[{"role":"user","content":"hello"}]}`,
			prompt: "hello",
		},
		{
			name:   "merged prompts take the newest",
			body:   `{"messages":[{"role":"user","content":[{"type":"text","text":"ERR429"},{"type":"text","text":"<system-reminder>x</system-reminder>\n"},{"type":"text","text":"TODO"}]},{"role":"system","content":"env"}]}`,
			prompt: "TODO",
		},
		{
			name:   "ends with assistant",
			body:   `{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"yo"}]}`,
			prompt: "",
		},
		{
			name:       "compaction",
			body:       `{"tools":[{"name":"Bash"}],"messages":[{"role":"user","content":[{"type":"text","text":"RUNTOOL"},{"type":"text","text":"CRITICAL: Respond with TEXT ONLY.\nYour task is to create a detailed summary of the conversation so far, ..."}]}]}`,
			prompt:     "CRITICAL: Respond with TEXT ONLY.\nYour task is to create a detailed summary of the conversation so far, ...",
			compaction: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, err := ParseRequest([]byte(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			if got := req.Prompt(); got != tc.prompt {
				t.Errorf("Prompt() = %q, want %q", got, tc.prompt)
			}
			if got := req.Compaction(); got != tc.compaction {
				t.Errorf("Compaction() = %v, want %v", got, tc.compaction)
			}
			if tc.compaction && req.MainLoop() {
				t.Error("a compaction counts as main loop")
			}
		})
	}
}

func TestParseRequestErrors(t *testing.T) {
	for _, body := range []string{`not json`, `{"messages":[{"role":"user","content":42}]}`, `{"system":7}`} {
		if _, err := ParseRequest([]byte(body)); err == nil {
			t.Errorf("ParseRequest(%s) succeeded", body)
		}
	}
}

func TestStripReminders(t *testing.T) {
	tests := []struct{ in, want string }{
		{"plain", "plain"},
		{"<system-reminder>\nx\n</system-reminder>", ""},
		{"done\n\n<system-reminder>\nx\n</system-reminder>", "done"},
		{"a <system-reminder>x</system-reminder> b", "a\nb"},
	}
	for _, tc := range tests {
		if got := StripReminders(tc.in); got != tc.want {
			t.Errorf("StripReminders(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func FuzzParseRequest(f *testing.F) {
	f.Add([]byte(cliLikeBody))
	f.Add([]byte(`{"messages":[{"role":"user","content":"hi"}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := ParseRequest(body)
		if err != nil {
			return
		}
		_ = req.Prompt()
		_ = req.LastToolResult()
		_ = req.MainLoop()
	})
}
