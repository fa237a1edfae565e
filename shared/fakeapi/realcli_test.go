package fakeapi_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/betcode-dev/betcode/shared/claudecli"
	"github.com/betcode-dev/betcode/shared/fakeapi"
)

// These tests run the real, pinned Claude Code CLI against the fake API, the
// way the agent does: stream-json on stdin and stdout, permission prompts
// answered by the host on stdio.

// syncBuffer is a bytes.Buffer safe for the exec copy goroutine and the test.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// cli is one running CLI process.
type cli struct {
	t      *testing.T
	cmd    *exec.Cmd
	dir    string // working directory
	stdin  io.WriteCloser
	stdout *bufio.Reader
	stderr *syncBuffer
}

// message is one stdout line, decoded.
type message map[string]any

func (m message) str(key string) string { s, _ := m[key].(string); return s }

func (m message) obj(key string) message { o, _ := m[key].(map[string]any); return o }

func startCLI(ctx context.Context, t *testing.T, srv *fakeapi.Server, extra ...string) *cli {
	t.Helper()
	bin := claudecli.Require(t)
	c := &cli{t: t, dir: t.TempDir(), stderr: &syncBuffer{}}
	c.cmd = exec.CommandContext(ctx, bin, claudecli.Args(extra...)...)
	c.cmd.Dir = c.dir
	c.cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, claudecli.Env(t.TempDir(), srv.URL())...)
	c.cmd.Stderr = c.stderr
	c.cmd.WaitDelay = 5 * time.Second
	var err error
	if c.stdin, err = c.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := c.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	c.stdout = bufio.NewReaderSize(stdout, 1<<20)
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Normally the test already closed stdin and waited; this only
		// reaps a process left behind by a failed test.
		c.stdin.Close()
		if c.cmd.ProcessState == nil {
			c.cmd.Process.Kill()
			c.cmd.Wait()
		}
	})
	return c
}

func (c *cli) send(v any) {
	c.t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		c.t.Fatal(err)
	}
	if _, err := c.stdin.Write(append(b, '\n')); err != nil {
		c.t.Fatalf("write to cli: %v", err)
	}
}

func (c *cli) prompt(text string) {
	c.t.Helper()
	c.send(map[string]any{
		"type":               "user",
		"message":            map[string]any{"role": "user", "content": text},
		"parent_tool_use_id": nil,
		"session_id":         "",
	})
}

// next returns the next stdout line. The context of startCLI bounds it: at
// the deadline the process is killed and stdout ends.
func (c *cli) next() message {
	c.t.Helper()
	for {
		line, err := c.stdout.ReadBytes('\n')
		if err != nil {
			c.t.Fatalf("read cli stdout: %v\nstderr:\n%s", err, c.stderr.String())
		}
		if !bytes.HasPrefix(line, []byte("{")) {
			continue
		}
		var m message
		if err := json.Unmarshal(line, &m); err != nil {
			c.t.Fatalf("decode cli line %q: %v", line, err)
		}
		return m
	}
}

// turn reads lines until the turn's result, answering can_use_tool requests
// with allow. It returns the streamed text and the result line.
func (c *cli) turn() (text string, result message, toolsAllowed []string) {
	c.t.Helper()
	var b strings.Builder
	for {
		m := c.next()
		switch m.str("type") {
		case "stream_event":
			ev := m.obj("event")
			if ev.str("type") == "content_block_delta" && ev.obj("delta").str("type") == "text_delta" {
				b.WriteString(ev.obj("delta").str("text"))
			}
		case "control_request":
			req := m.obj("request")
			if req.str("subtype") != "can_use_tool" {
				c.t.Fatalf("unexpected control request %v", m)
			}
			toolsAllowed = append(toolsAllowed, req.str("tool_name"))
			c.send(map[string]any{"type": "control_response", "response": map[string]any{
				"subtype": "success", "request_id": m.str("request_id"),
				"response": map[string]any{"behavior": "allow", "updatedInput": req["input"]},
			}})
		case "result":
			return b.String(), m, toolsAllowed
		}
	}
}

// finish closes stdin and waits for a clean exit.
func (c *cli) finish() {
	c.t.Helper()
	c.stdin.Close()
	if err := c.cmd.Wait(); err != nil {
		c.t.Fatalf("cli exit: %v\nstderr:\n%s", err, c.stderr.String())
	}
}

func startFake(t *testing.T) *fakeapi.Server {
	t.Helper()
	srv, err := fakeapi.Start(fakeapi.Config{Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv
}

func TestRealCLIText(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	srv := startFake(t)
	c := startCLI(ctx, t, srv)

	c.prompt("hello there")
	text, result, _ := c.turn()
	if text != fakeapi.HelloText {
		t.Errorf("streamed text %q, want %q", text, fakeapi.HelloText)
	}
	if result.str("result") != fakeapi.HelloText || result["is_error"] != false {
		t.Errorf("result line %v", result)
	}

	// The second turn takes an exact, enqueued reply.
	srv.Enqueue(fakeapi.Reply{Deltas: []string{"Queued ", "reply ", "here."}})
	c.prompt("and now?")
	if text, _, _ := c.turn(); text != "Queued reply here." {
		t.Errorf("second turn streamed %q", text)
	}
	c.finish()

	reqs := srv.Requests()
	last := reqs[len(reqs)-1]
	var conv []string
	for _, m := range last.Conversation() {
		conv = append(conv, m.Role+": "+m.Text)
	}
	want := []string{"user: hello there", "assistant: " + fakeapi.HelloText, "user: and now?"}
	if strings.Join(conv, "|") != strings.Join(want, "|") {
		t.Errorf("second request carried %q, want %q", conv, want)
	}
	if !last.Stream || !last.MainLoop() {
		t.Errorf("last request stream=%v tools=%v", last.Stream, last.Tools)
	}
	if srv.Pending() != 0 {
		t.Errorf("%d enqueued replies unused", srv.Pending())
	}
}

func TestRealCLIRunTool(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	srv := startFake(t)
	c := startCLI(ctx, t, srv)

	c.prompt("please RUNTOOL now")
	text, result, allowed := c.turn()
	c.finish()

	if strings.Join(allowed, ",") != "Bash" {
		t.Errorf("permission asked for %v, want [Bash]", allowed)
	}
	want := fakeapi.ToolResultPrefix + "done"
	if text != want || result.str("result") != want {
		t.Errorf("streamed %q, result %q; want %q", text, result.str("result"), want)
	}
	if _, err := os.Stat(filepath.Join(c.dir, fakeapi.ToolFile)); err != nil {
		t.Errorf("tool did not run in the working directory: %v", err)
	}

	reqs, err := srv.Wait(ctx, func(reqs []fakeapi.Request) bool {
		for i := range reqs {
			if tr := reqs[i].LastToolResult(); tr != nil && tr.Content == "done" {
				return true
			}
		}
		return false
	})
	if err != nil {
		t.Fatalf("no request carried the tool result: %v (%d requests)", err, len(reqs))
	}
	for i := range reqs {
		if tr := reqs[i].LastToolResult(); tr != nil {
			if !strings.HasPrefix(tr.ToolUseID, "toolu_fake_") || tr.IsError {
				t.Errorf("tool result %+v", tr)
			}
		}
	}
}

// TestRealCLIServerError checks that error scripts end fast with the
// retry count of claudecli.Env.
func TestRealCLIServerError(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	srv := startFake(t)
	c := startCLI(ctx, t, srv)

	c.prompt("ERR500")
	_, result, _ := c.turn()
	c.stdin.Close()
	err := c.cmd.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Errorf("exit after an error turn: %v, want exit status 1", err)
	}
	if result["is_error"] != true || result["api_error_status"] != float64(500) {
		t.Errorf("result line %v", result)
	}
	if n := len(srv.Requests()); n != 3 {
		t.Errorf("%d requests, want 3 (1 + CLAUDE_CODE_MAX_RETRIES=2)", n)
	}
}
