package codex

import (
	"bufio"
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// TestReplayExchange decodes testdata/exchange.jsonl, the stdout of the
// real pinned app-server for four turns against shared/fakeopenai (say
// hello; THINK; SHELL, accepted; PATCH, accepted), and compares the mapped
// AgentEvents with testdata/exchange.golden (-update rewrites it). It pins
// the decoding and the mapping without the binary; the tests in
// codex_test.go check the same against a live process.
func TestReplayExchange(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "exchange.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	c := &Client{log: slog.New(slog.DiscardHandler), pending: map[int64]chan callResult{}, approvals: map[string]string{}, wake: make(chan struct{}, 1)}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		c.handle(sc.Bytes())
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	clock := time.Unix(0, 0)
	tr := NewTranslator(DefaultModel, func() time.Time { clock = clock.Add(time.Millisecond); return clock })
	var b strings.Builder
	for _, ev := range c.queue {
		for _, out := range tr.Translate(ev) {
			b.WriteString(summarize(out))
			b.WriteByte('\n')
		}
	}
	golden := filepath.Join("testdata", "exchange.golden")
	if *update {
		if err := os.WriteFile(golden, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if b.String() != string(want) {
		t.Errorf("mapped events differ from %s (run with -update to accept):\n%s", golden, b.String())
	}
}

// summarize prints an AgentEvent's kind and the fields the mapping sets,
// deterministically (protojson's output is not stable).
func summarize(ev *pb.AgentEvent) string {
	switch e := ev.Event.(type) {
	case *pb.AgentEvent_StatusChange:
		return fmt.Sprintf("status %s %q", e.StatusChange.GetStatus(), e.StatusChange.GetMessage())
	case *pb.AgentEvent_TextDelta:
		return fmt.Sprintf("text %q complete=%v", e.TextDelta.GetText(), e.TextDelta.GetIsComplete())
	case *pb.AgentEvent_ToolCallStart:
		f := e.ToolCallStart.GetInput().GetFields()
		return fmt.Sprintf("tool_start %s %s command=%q file_path=%q", e.ToolCallStart.GetToolId(), e.ToolCallStart.GetToolName(),
			f["command"].GetStringValue(), f["file_path"].GetStringValue())
	case *pb.AgentEvent_ToolCallResult:
		r := e.ToolCallResult
		return fmt.Sprintf("tool_result %s error=%v output=%q", r.GetToolId(), r.GetIsError(), r.GetOutput())
	case *pb.AgentEvent_PermissionRequest:
		p := e.PermissionRequest
		return fmt.Sprintf("permission %s %s tool_use=%s desc=%q", p.GetRequestId(), p.GetToolName(), p.GetToolUseId(), p.GetDescription())
	case *pb.AgentEvent_Usage:
		u := e.Usage
		return fmt.Sprintf("usage in=%d out=%d cache_read=%d cache_write=%d model=%s", u.GetInputTokens(), u.GetOutputTokens(),
			u.GetCacheReadTokens(), u.GetCacheCreationTokens(), u.GetModel())
	case *pb.AgentEvent_TurnComplete:
		return "turn_complete " + e.TurnComplete.GetStopReason()
	case *pb.AgentEvent_Error:
		return fmt.Sprintf("error %s fatal=%v %q", e.Error.GetCode(), e.Error.GetIsFatal(), e.Error.GetMessage())
	}
	return fmt.Sprintf("other %T", ev.Event)
}
