package fakeopenai

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"
)

func startServer(t *testing.T, cfg Config) *Server {
	t.Helper()
	s, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return s
}

func post(t *testing.T, ctx context.Context, s *Server, prompt string) *http.Response {
	t.Helper()
	body, err := json.Marshal(map[string]any{"model": "gpt-5.5", "stream": true, "input": []any{
		map[string]any{"type": "message", "role": "user", "content": []any{map[string]any{"type": "input_text", "text": prompt}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.BaseURL()+"/responses", strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer k")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = resp.Body.Close() })
	return resp
}

type frame struct {
	name string
	data map[string]any
	raw  string
}

// readFrames reads SSE frames until the body ends or fails.
func readFrames(r io.Reader) ([]frame, error) {
	var out []frame
	sc := bufio.NewScanner(r)
	var cur frame
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			cur.name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			cur.raw = strings.TrimPrefix(line, "data: ")
			_ = json.Unmarshal([]byte(cur.raw), &cur.data)
		case line == "":
			out = append(out, cur)
			cur = frame{}
		}
	}
	return out, sc.Err()
}

func names(fs []frame) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.name)
	}
	return out
}

func TestStream(t *testing.T) {
	tests := []struct {
		prompt string
		want   []string
		check  func(t *testing.T, fs []frame)
	}{
		{
			prompt: "hello",
			want: []string{"response.created", "response.output_item.added", "response.output_text.delta", "response.output_text.delta",
				"response.output_text.delta", "response.output_text.delta", "response.output_text.delta", "response.output_item.done", "response.completed"},
			check: func(t *testing.T, fs []frame) {
				done := fs[len(fs)-2].data["item"].(map[string]any)
				if done["content"].([]any)[0].(map[string]any)["text"] != HelloText {
					t.Errorf("message item %v", done)
				}
				usage := fs[len(fs)-1].data["response"].(map[string]any)["usage"].(map[string]any)
				if usage["input_tokens"] != float64(DefaultUsage.InputTokens) || usage["total_tokens"] != float64(DefaultUsage.Total()) {
					t.Errorf("usage %v", usage)
				}
			},
		},
		{
			prompt: "THINK",
			want: []string{"response.created", "response.output_item.added", "response.reasoning_summary_part.added",
				"response.reasoning_summary_text.delta", "response.reasoning_summary_text.delta", "response.reasoning_summary_text.delta",
				"response.reasoning_summary_text.delta", "response.reasoning_summary_text.delta", "response.reasoning_summary_text.delta",
				"response.output_item.done", "response.output_item.added", "response.output_text.delta", "response.output_text.delta",
				"response.output_text.delta", "response.output_text.delta", "response.output_item.done", "response.completed"},
		},
		{
			prompt: "PATCH",
			want:   []string{"response.created", "response.output_item.added", "response.output_item.done", "response.completed"},
			check: func(t *testing.T, fs []frame) {
				item := fs[2].data["item"].(map[string]any)
				if item["type"] != "custom_tool_call" || item["name"] != "apply_patch" || item["call_id"] != "call_fake_003" ||
					!strings.Contains(item["input"].(string), "*** Add File: hello.txt") {
					t.Errorf("call item %v", item)
				}
			},
		},
		{
			prompt: "MALFORMED",
			want:   []string{"response.created", "response.output_item.added", "response.output_text.delta", "response.output_text.delta"},
			check: func(t *testing.T, fs []frame) {
				if fs[3].raw != "{not json" {
					t.Errorf("last data %q", fs[3].raw)
				}
			},
		},
	}
	s := startServer(t, Config{})
	for _, tt := range tests {
		t.Run(tt.prompt, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			resp := post(t, ctx, s, tt.prompt)
			if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
				t.Fatalf("status %d type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
			}
			fs, err := readFrames(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(names(fs), tt.want) {
				t.Fatalf("events %v, want %v", names(fs), tt.want)
			}
			if tt.check != nil {
				tt.check(t, fs)
			}
		})
	}
	if o := s.OtherRequests(); len(o) != 0 {
		t.Errorf("other requests %v", o)
	}
}

func TestErrorReplies(t *testing.T) {
	s := startServer(t, Config{})
	tests := []struct {
		prompt     string
		status     int
		retryAfter string
		code       string
	}{
		{"ERR500", 500, "", "server_error"},
		{"ERR429", 429, "1", "rate_limit_exceeded"},
		{"ERR400", 400, "", "bad_request"},
	}
	for _, tt := range tests {
		t.Run(tt.prompt, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			resp := post(t, ctx, s, tt.prompt)
			var body wireError
			if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tt.status || resp.Header.Get("Retry-After") != tt.retryAfter || body.Error.Code != tt.code {
				t.Errorf("status %d retry-after %q body %+v", resp.StatusCode, resp.Header.Get("Retry-After"), body)
			}
		})
	}
}

func TestCutAndStall(t *testing.T) {
	s := startServer(t, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	fs, err := readFrames(post(t, ctx, s, "CUT").Body)
	if err == nil || len(fs) != 3 {
		t.Errorf("CUT: %d frames, err %v; want 3 and an unexpected end", len(fs), err)
	}

	sctx, scancel := context.WithCancel(ctx)
	resp := post(t, sctx, s, "STALL")
	r := bufio.NewReader(resp.Body)
	var lines int
	for lines < 9 { // three frames of event, data and blank lines
		if _, err := r.ReadString('\n'); err != nil {
			t.Fatal(err)
		}
		lines++
	}
	scancel() // the stalled handler returns once the client leaves
	if _, err := io.ReadAll(r); err == nil {
		t.Error("STALL body ended normally")
	}
}

func TestEnqueueAndWait(t *testing.T) {
	s := startServer(t, Config{Responder: func(*Request) Reply { return Reply{Text: "from responder"} }})
	s.Enqueue(Reply{Status: 503}, Reply{Deltas: []string{"a", "b"}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if resp := post(t, ctx, s, "x"); resp.StatusCode != 503 {
		t.Errorf("first status %d", resp.StatusCode)
	}
	fs, err := readFrames(post(t, ctx, s, "x").Body)
	if err != nil || fs[len(fs)-2].data["item"].(map[string]any)["content"].([]any)[0].(map[string]any)["text"] != "ab" {
		t.Errorf("second reply %v %v", names(fs), err)
	}
	fs, _ = readFrames(post(t, ctx, s, "x").Body)
	if !strings.Contains(fs[len(fs)-2].raw, "from responder") {
		t.Errorf("third reply %v", fs[len(fs)-2].raw)
	}
	reqs, err := s.WaitRequests(ctx, 3)
	if err != nil || len(reqs) != 3 || reqs[2].Seq != 3 || reqs[0].Header.Get("Authorization") != "Bearer k" || s.Pending() != 0 {
		t.Errorf("requests %d, err %v, pending %d", len(reqs), err, s.Pending())
	}
	resp, err := http.Get(s.URL() + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != 404 || !slices.Equal(s.OtherRequests(), []string{"GET /v1/models"}) {
		t.Errorf("GET /v1/models: %d, others %v", resp.StatusCode, s.OtherRequests())
	}
}

func TestFunctionCall(t *testing.T) {
	for _, tc := range []struct {
		name string
		args any
		want string
	}{
		{"object", map[string]any{"command": "ls"}, `{"command":"ls"}`},
		{"raw string", `{not json`, `{not json`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := FunctionCall("Bash", tc.args)
			if c.Kind != "function_call" || c.Name != "Bash" || c.Arguments != tc.want {
				t.Errorf("FunctionCall = %+v, want Bash with %s", c, tc.want)
			}
		})
	}
}

func TestParallelCalls(t *testing.T) {
	srv := New(Config{Responder: func(*Request) Reply {
		return Reply{Call: FunctionCall("Read", map[string]any{"file_path": "a"}),
			Calls: []*Call{FunctionCall("LS", map[string]any{}), {Kind: "function_call", ID: "mine", Name: "Grep", Arguments: "{}"}}}
	}})
	ts := httptest.NewServer(srv)
	defer ts.Close()
	res, err := http.Post(ts.URL+"/v1/responses", "application/json", strings.NewReader(`{"model":"m","stream":true,"input":[{"role":"user","content":"go"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	var done []string
	for _, frame := range strings.Split(string(body), "\n\n") {
		name, data, _ := strings.Cut(frame, "\ndata: ")
		if name != "event: response.output_item.done" {
			continue
		}
		var ev struct {
			Item struct {
				CallID string `json:"call_id"`
				Name   string `json:"name"`
			} `json:"item"`
		}
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			t.Fatal(err)
		}
		done = append(done, ev.Item.Name+"/"+ev.Item.CallID)
	}
	if got, want := strings.Join(done, ","), "Read/call_fake_001,LS/call_fake_001_1,Grep/mine"; got != want {
		t.Errorf("calls %s, want %s", got, want)
	}
}
