package fakeapi

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"
)

// tWriter sends log output to t.Log.
type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func startServer(t *testing.T, cfg Config) *Server {
	t.Helper()
	cfg.Logger = slog.New(slog.NewTextHandler(tWriter{t}, nil))
	srv, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return srv
}

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// body returns a request body with the Bash tool (a main-loop request) and
// one user prompt.
func body(prompt string, stream bool) string {
	p, _ := json.Marshal(prompt)
	s := "false"
	if stream {
		s = "true"
	}
	return `{"model":"claude-test","stream":` + s + `,"tools":[{"name":"Bash"}],"messages":[{"role":"user","content":` + string(p) + `}]}`
}

func post(ctx context.Context, t *testing.T, url, path, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

type frame struct {
	name string
	data map[string]any
}

// readFrame reads one SSE frame; io.EOF at a clean end of the body.
func readFrame(r *bufio.Reader) (frame, error) {
	var f frame
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			if err == io.EOF && line == "" && f.name == "" {
				return f, io.EOF
			}
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return f, err
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "":
			return f, nil
		case strings.HasPrefix(line, "event: "):
			f.name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &f.data); err != nil {
				return f, err
			}
		default:
			return f, errors.New("unexpected SSE line " + line)
		}
	}
}

// readFrames reads the whole stream; err is the error that ended it, if any.
func readFrames(resp *http.Response) (frames []frame, err error) {
	r := bufio.NewReader(resp.Body)
	for {
		f, err := readFrame(r)
		if err == io.EOF {
			return frames, nil
		}
		if err != nil {
			return frames, err
		}
		if f.data["type"] != f.name {
			return frames, errors.New("event name " + f.name + " does not match data type")
		}
		frames = append(frames, f)
	}
}

func names(frames []frame) string {
	var out []string
	for _, f := range frames {
		out = append(out, f.name)
	}
	return strings.Join(out, " ")
}

func textOf(frames []frame) string {
	var b strings.Builder
	for _, f := range frames {
		if d, ok := f.data["delta"].(map[string]any); ok && d["type"] == "text_delta" {
			b.WriteString(d["text"].(string))
		}
	}
	return b.String()
}

func TestStreamingReply(t *testing.T) {
	srv := startServer(t, Config{})
	ctx := testContext(t)
	resp := post(ctx, t, srv.URL(), "/v1/messages?beta=true", body("hello", true))
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if got := resp.Header.Get("request-id"); got != "req_fake_001" {
		t.Errorf("request-id = %q", got)
	}
	frames, err := readFrames(resp)
	if err != nil {
		t.Fatal(err)
	}
	want := "message_start content_block_start" + strings.Repeat(" content_block_delta", 5) + " content_block_stop message_delta message_stop"
	if got := names(frames); got != want {
		t.Errorf("events %q\nwant   %q", got, want)
	}
	if got := textOf(frames); got != HelloText {
		t.Errorf("text = %q", got)
	}
	msg := frames[0].data["message"].(map[string]any)
	if msg["id"] != "msg_fake_001" || msg["model"] != "claude-test" {
		t.Errorf("message_start message = %v", msg)
	}
	reqs := srv.Requests()
	if len(reqs) != 1 || reqs[0].Prompt() != "hello" || !reqs[0].Stream || reqs[0].Seq != 1 {
		t.Errorf("Requests() = %+v", reqs)
	}
}

func TestNonStreamingReply(t *testing.T) {
	srv := startServer(t, Config{})
	srv.Enqueue(Reply{Thinking: "hm", Text: "answer", ToolUse: &ToolUse{ID: "toolu_x", Name: "Bash", Input: map[string]string{"command": "ls"}}})
	resp := post(testContext(t), t, srv.URL(), "/v1/messages", body("hello", false))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	var msg struct {
		ID         string `json:"id"`
		StopReason string `json:"stop_reason"`
		Content    []struct {
			Type, Text, Thinking, ID, Name string
			Input                          map[string]string
		} `json:"content"`
		Usage struct {
			InputTokens  int `json:"input_tokens"`
			OutputTokens int `json:"output_tokens"`
		} `json:"usage"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&msg); err != nil {
		t.Fatal(err)
	}
	if msg.ID != "msg_fake_001" || msg.StopReason != "tool_use" || msg.Usage.InputTokens != 12 || msg.Usage.OutputTokens != 20 {
		t.Errorf("message = %+v", msg)
	}
	if len(msg.Content) != 3 || msg.Content[0].Thinking != "hm" || msg.Content[1].Text != "answer" ||
		msg.Content[2].ID != "toolu_x" || msg.Content[2].Input["command"] != "ls" {
		t.Errorf("content = %+v", msg.Content)
	}
}

func TestErrorReplies(t *testing.T) {
	tests := []struct {
		prompt     string
		status     int
		errType    string
		retryAfter string
	}{
		{"ERR500", 500, "api_error", ""},
		{"ERR529", 529, "overloaded_error", ""},
		{"ERR429", 429, "rate_limit_error", "1"},
		{"ERR400", 400, "invalid_request_error", ""},
	}
	srv := startServer(t, Config{})
	for _, tc := range tests {
		t.Run(tc.prompt, func(t *testing.T) {
			resp := post(testContext(t), t, srv.URL(), "/v1/messages", body(tc.prompt, true))
			if resp.StatusCode != tc.status {
				t.Errorf("status = %d, want %d", resp.StatusCode, tc.status)
			}
			if got := resp.Header.Get("retry-after"); got != tc.retryAfter {
				t.Errorf("retry-after = %q, want %q", got, tc.retryAfter)
			}
			var e wireError
			if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
				t.Fatal(err)
			}
			if e.Type != "error" || e.Error.Type != tc.errType || e.Error.Message == "" {
				t.Errorf("body = %+v", e)
			}
		})
	}
}

func TestEnqueueSkipsSideRequests(t *testing.T) {
	srv := startServer(t, Config{})
	srv.Enqueue(Reply{Deltas: []string{"first"}}, Reply{Deltas: []string{"second"}})
	ctx := testContext(t)

	side := post(ctx, t, srv.URL(), "/v1/messages", `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"Hi"}]}`)
	var msg struct {
		Content []struct{ Text string } `json:"content"`
	}
	if err := json.NewDecoder(side.Body).Decode(&msg); err != nil {
		t.Fatal(err)
	}
	if len(msg.Content) != 1 || msg.Content[0].Text != SideText {
		t.Errorf("side request got %+v", msg)
	}
	if srv.Pending() != 2 {
		t.Fatalf("Pending() = %d after a side request, want 2", srv.Pending())
	}

	for _, want := range []string{"first", "second", HelloText} {
		frames, err := readFrames(post(ctx, t, srv.URL(), "/v1/messages", body("hello", true)))
		if err != nil {
			t.Fatal(err)
		}
		if got := textOf(frames); got != want {
			t.Errorf("text = %q, want %q", got, want)
		}
	}
}

func TestResponder(t *testing.T) {
	srv := startServer(t, Config{Responder: func(req *Request) Reply {
		return Reply{Text: "echo " + req.Prompt()}
	}})
	frames, err := readFrames(post(testContext(t), t, srv.URL(), "/v1/messages", body("RUNTOOL", true)))
	if err != nil {
		t.Fatal(err)
	}
	if got := textOf(frames); got != "echo RUNTOOL" {
		t.Errorf("text = %q", got)
	}
}

func TestWaitRequests(t *testing.T) {
	srv := startServer(t, Config{})

	short, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	if _, err := srv.WaitRequests(short, 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitRequests with no request: %v", err)
	}

	ctx := testContext(t)
	type result struct {
		reqs []Request
		err  error
	}
	done := make(chan result, 1)
	go func() {
		reqs, err := srv.WaitRequests(ctx, 2)
		done <- result{reqs, err}
	}()
	for _, p := range []string{"one", "two"} {
		if _, err := readFrames(post(ctx, t, srv.URL(), "/v1/messages", body(p, true))); err != nil {
			t.Fatal(err)
		}
	}
	r := <-done
	if r.err != nil || len(r.reqs) != 2 || r.reqs[1].Prompt() != "two" {
		t.Fatalf("WaitRequests = %+v, %v", r.reqs, r.err)
	}
}

func TestFaults(t *testing.T) {
	t.Run("error event", func(t *testing.T) {
		srv := startServer(t, Config{})
		frames, err := readFrames(post(testContext(t), t, srv.URL(), "/v1/messages", body("BREAK", true)))
		if err != nil {
			t.Fatal(err)
		}
		if got, want := names(frames), "message_start content_block_start content_block_delta error"; got != want {
			t.Errorf("events %q, want %q", got, want)
		}
	})
	t.Run("cut", func(t *testing.T) {
		srv := startServer(t, Config{})
		frames, err := readFrames(post(testContext(t), t, srv.URL(), "/v1/messages", body("CUT", true)))
		if err == nil {
			t.Fatalf("stream ended cleanly after %q", names(frames))
		}
		if got, want := names(frames), "message_start content_block_start content_block_delta"; got != want {
			t.Errorf("events before the cut %q, want %q", got, want)
		}
	})
	t.Run("stall until client cancels", func(t *testing.T) {
		srv := startServer(t, Config{})
		ctx, cancel := context.WithCancel(testContext(t))
		r := bufio.NewReader(post(ctx, t, srv.URL(), "/v1/messages", body("STALL", true)).Body)
		for _, want := range []string{"message_start", "content_block_start", "content_block_delta"} {
			f, err := readFrame(r)
			if err != nil || f.name != want {
				t.Fatalf("frame %q, %v; want %s", f.name, err, want)
			}
		}
		cancel()
		if _, err := readFrame(r); err == nil {
			t.Fatal("read a frame after the stall")
		}
	})
	t.Run("stall until server closes", func(t *testing.T) {
		srv := startServer(t, Config{})
		ctx := testContext(t)
		// A non-streaming stall sends no headers, so the client blocks in Do.
		done := make(chan error, 1)
		go func() {
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL()+"/v1/messages", strings.NewReader(body("STALL", false)))
			resp, err := http.DefaultClient.Do(req)
			if err == nil {
				_, err = io.ReadAll(resp.Body)
				resp.Body.Close()
			}
			done <- err
		}()
		if _, err := srv.WaitRequests(ctx, 1); err != nil {
			t.Fatal(err)
		}
		if err := srv.Close(); err != nil {
			t.Fatalf("Close with a stalled request: %v", err)
		}
		select {
		case err := <-done:
			t.Logf("client after Close: %v", err)
		case <-ctx.Done():
			t.Fatal("client still blocked after Close")
		}
	})
}

func TestOtherPaths(t *testing.T) {
	srv := startServer(t, Config{})
	ctx := testContext(t)
	tests := []struct {
		method, path string
		status       int
	}{
		{http.MethodGet, "/", 200},
		{http.MethodHead, "/v1/models", 200},
		{http.MethodPost, "/v1/messages/count_tokens", 200},
		{http.MethodPost, "/v1/elsewhere", 404},
	}
	for _, tc := range tests {
		req, err := http.NewRequestWithContext(ctx, tc.method, srv.URL()+tc.path, strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Errorf("%s %s: status %d, want %d", tc.method, tc.path, resp.StatusCode, tc.status)
		}
	}
	if got := len(srv.OtherRequests()); got != len(tests) {
		t.Errorf("OtherRequests() = %v", srv.OtherRequests())
	}
	if got := srv.Requests(); len(got) != 0 {
		t.Errorf("Requests() = %v, want none", got)
	}
}

func TestBadRequestBody(t *testing.T) {
	srv := startServer(t, Config{})
	resp := post(testContext(t), t, srv.URL(), "/v1/messages", "not json")
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("status = %d", resp.StatusCode)
	}
}
