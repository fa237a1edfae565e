package fakeopenai

import (
	"slices"
	"testing"
)

// codexLikeBody mirrors the shape of a request Codex sends after a shell
// call: developer messages, the environment context, history, a call and
// its output.
const codexLikeBody = `{
 "model": "gpt-5.5", "stream": true, "store": false, "tool_choice": "auto",
 "tools": [{"type":"function","name":"exec_command"},{"type":"custom","name":"apply_patch"},{"type":"web_search"}],
 "input": [
  {"type":"message","role":"developer","content":[{"type":"input_text","text":"You are Codex."}]},
  {"type":"message","role":"user","content":[{"type":"input_text","text":"<environment_context>\n<cwd>/w</cwd>\n</environment_context>"}]},
  {"type":"message","role":"user","content":[{"type":"input_text","text":"say hello"}]},
  {"type":"message","role":"assistant","content":[{"type":"output_text","text":"Hello from the fake model."}]},
  {"type":"message","role":"user","content":[{"type":"input_text","text":"SHELL please"}]},
  {"type":"reasoning","summary":[]},
  {"type":"function_call","name":"exec_command","arguments":"{\"cmd\":\"ls\"}","call_id":"call_1"},
  {"type":"function_call_output","call_id":"call_1","output":"Process exited with code 0\nOutput:\nhi\n"}
 ]}`

func TestParseRequest(t *testing.T) {
	req, err := ParseRequest([]byte(codexLikeBody))
	if err != nil {
		t.Fatal(err)
	}
	if req.Model != "gpt-5.5" || !req.Stream || !slices.Equal(req.Tools, []string{"exec_command", "apply_patch", "web_search"}) {
		t.Errorf("model %q stream %v tools %v", req.Model, req.Stream, req.Tools)
	}
	if len(req.Input) != 8 {
		t.Fatalf("%d input items", len(req.Input))
	}
	if got := req.Prompts(); !slices.Equal(got, []string{"say hello", "SHELL please"}) {
		t.Errorf("Prompts() = %q", got)
	}
	if req.Prompt() != "" {
		t.Errorf("Prompt() = %q on a tool output turn", req.Prompt())
	}
	out := req.LastToolOutput()
	if out == nil || out.CallID != "call_1" || out.Output != "Process exited with code 0\nOutput:\nhi\n" {
		t.Fatalf("LastToolOutput() = %+v", out)
	}
	call := req.Input[6]
	if call.Type != "function_call" || call.Name != "exec_command" || call.Arguments != `{"cmd":"ls"}` {
		t.Errorf("call item %+v", call)
	}
}

func TestPrompt(t *testing.T) {
	tests := []struct {
		name, body, want string
	}{
		{name: "string content", body: `{"input":[{"role":"user","content":"hi THINK"}]}`, want: "hi THINK"},
		{name: "context only", body: `{"input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"<environment_context/>"}]}]}`, want: ""},
		{name: "prompt then context", body: `{"input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"PATCH"}]},{"type":"message","role":"user","content":[{"type":"input_text","text":"<env/>"}]}]}`, want: "PATCH"},
		{name: "ends with assistant", body: `{"input":[{"type":"message","role":"user","content":"a"},{"type":"message","role":"assistant","content":"b"}]}`, want: ""},
		{name: "array output", body: `{"input":[{"type":"custom_tool_call_output","call_id":"c","output":[{"type":"input_text","text":"ok"}]}]}`, want: ""},
		{name: "empty", body: `{}`, want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := ParseRequest([]byte(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			if got := req.Prompt(); got != tt.want {
				t.Errorf("Prompt() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestParseRequestErrors(t *testing.T) {
	for _, body := range []string{`not json`, `{"input":{}}`, `{"input":[{"content":{"x":1}}]}`, `{"input":[{"output":7}]}`} {
		if _, err := ParseRequest([]byte(body)); err == nil {
			t.Errorf("ParseRequest(%s) succeeded", body)
		}
	}
}

// FuzzParseRequest: arbitrary bodies never panic, and the reply chosen for
// a parsed one streams.
func FuzzParseRequest(f *testing.F) {
	f.Add([]byte(codexLikeBody))
	f.Add([]byte(`{"input":[{"role":"user","content":"STREAM 3 THINK"}]}`))
	f.Add([]byte(`{"input":[{"type":"custom_tool_call_output","output":[{"text":"x"}]}]}`))
	f.Add([]byte(`{"input":[{"role":"user","content":"ERR429"}]}`))
	f.Add([]byte(`{`))
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := ParseRequest(body)
		if err != nil {
			return
		}
		req.Prompt()
		req.Prompts()
		reply := KeywordReply(req)
		if len(reply.Deltas) > 1000 {
			return // STREAM with a huge count: valid, just slow
		}
		reply.Delay = 0
		evs, faultAt := reply.events(1, req.Model)
		if faultAt < 0 || faultAt > len(evs) {
			t.Fatalf("fault index %d of %d events", faultAt, len(evs))
		}
	})
}

func TestImages(t *testing.T) {
	tests := []struct {
		name, body string
		want       []string
	}{
		{name: "none", body: `{"input":[{"type":"message","role":"user","content":"hi"}]}`},
		{name: "data URL", body: `{"input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"look"},{"type":"input_image","image_url":"data:image/png;base64,iVBO"}]}]}`, want: []string{"data:image/png;base64,iVBO"}},
		{name: "two messages", body: `{"input":[{"type":"message","role":"user","content":[{"type":"input_image","image_url":"https://x/a.png"}]},{"type":"message","role":"assistant","content":[{"type":"output_text","text":"ok"}]},{"type":"message","role":"user","content":[{"type":"input_image","image_url":"https://x/b.png"}]}]}`, want: []string{"https://x/a.png", "https://x/b.png"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := ParseRequest([]byte(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			if got := req.Images(); !slices.Equal(got, tt.want) {
				t.Errorf("Images() = %q, want %q", got, tt.want)
			}
		})
	}
}
