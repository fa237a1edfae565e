package transcripts

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/claudecli"
	"github.com/betcode-dev/betcode/shared/fakeapi"
)

var update = flag.Bool("update", false, "copy the transcript the real CLI writes into testdata/real_two_turns.jsonl and rewrite golden files")

// realSession is one run of the real CLI against the fake API.
type realSession struct {
	home, cwd string
	texts     []string // streamed text of each turn
}

// runRealCLI runs the pinned CLI in a fresh HOME and cwd, sends prompts one
// turn at a time (allowing every tool), closes stdin and waits for a clean
// exit, as a user's terminal session would leave its transcript behind.
func runRealCLI(t *testing.T, prompts ...string) realSession {
	t.Helper()
	bin := claudecli.Require(t)
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()

	srv, err := fakeapi.Start(fakeapi.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })

	rs := realSession{home: t.TempDir(), cwd: t.TempDir()}
	cmd := exec.CommandContext(ctx, bin, claudecli.Args("--allowedTools", "Bash")...)
	cmd.Dir = rs.cwd
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, claudecli.Env(rs.home, srv.URL())...)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	cmd.WaitDelay = 5 * time.Second
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	stdout := bufio.NewReaderSize(out, 1<<20)
	send := func(v any) {
		t.Helper()
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := stdin.Write(append(b, '\n')); err != nil {
			t.Fatalf("write to cli: %v", err)
		}
	}
	for _, p := range prompts {
		send(map[string]any{
			"type":               "user",
			"message":            map[string]any{"role": "user", "content": p},
			"parent_tool_use_id": nil,
			"session_id":         "",
		})
		var text strings.Builder
	turn:
		for {
			line, err := stdout.ReadBytes('\n')
			if err != nil {
				t.Fatalf("read cli stdout: %v\nstderr:\n%s", err, stderr.String())
			}
			if !bytes.HasPrefix(line, []byte("{")) {
				continue
			}
			var m struct {
				Type      string          `json:"type"`
				RequestID string          `json:"request_id"`
				Event     json.RawMessage `json:"event"`
				Request   struct {
					Subtype string          `json:"subtype"`
					Input   json.RawMessage `json:"input"`
				} `json:"request"`
			}
			if err := json.Unmarshal(line, &m); err != nil {
				t.Fatalf("decode cli line %q: %v", line, err)
			}
			switch m.Type {
			case "stream_event":
				var ev struct {
					Type  string `json:"type"`
					Delta struct {
						Type string `json:"type"`
						Text string `json:"text"`
					} `json:"delta"`
				}
				if json.Unmarshal(m.Event, &ev) == nil && ev.Type == "content_block_delta" && ev.Delta.Type == "text_delta" {
					text.WriteString(ev.Delta.Text)
				}
			case "control_request":
				// --allowedTools Bash should make this unnecessary; answer
				// anyway so that a changed CLI doesn't hang the test.
				send(map[string]any{"type": "control_response", "response": map[string]any{
					"subtype": "success", "request_id": m.RequestID,
					"response": map[string]any{"behavior": "allow", "updatedInput": m.Request.Input},
				}})
			case "result":
				break turn
			}
		}
		rs.texts = append(rs.texts, text.String())
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("cli exit: %v\nstderr:\n%s", err, stderr.String())
	}
	return rs
}

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

func TestRealCLITranscript(t *testing.T) {
	prompts := []string{"hello there", "please RUNTOOL now"}
	rs := runRealCLI(t, prompts...)
	cwd, err := filepath.EvalSymlinks(rs.cwd)
	if err != nil {
		t.Fatal(err)
	}
	wantTexts := []string{fakeapi.HelloText, fakeapi.ToolResultPrefix + "done"}
	if !slices.Equal(rs.texts, wantTexts) {
		t.Fatalf("the CLI streamed %q, want %q", rs.texts, wantTexts)
	}

	l := &Lister{Home: rs.home, Log: testLogger(t)}
	infos, err := l.List("")
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 1 {
		t.Fatalf("List found %d sessions, want 1: %+v", len(infos), infos)
	}
	info := infos[0]
	if info.WorkingDirectory != cwd || info.FirstPrompt != prompts[0] || info.LastMessagePreview != wantTexts[1] {
		t.Errorf("info = %+v; want cwd %q, first prompt %q, last message %q", info, cwd, prompts[0], wantTexts[1])
	}
	// Two prompts; answers: text, tool call, text after the tool result.
	if info.MessageCount != 5 {
		t.Errorf("MessageCount = %d, want 5", info.MessageCount)
	}
	if want := filepath.Join(ProjectsDir(rs.home), ProjectKey(cwd), info.SessionID+".jsonl"); info.Path != want {
		t.Errorf("Path = %q, want %q", info.Path, want)
	}
	if got, err := List(rs.home, cwd); err != nil || len(got) != 1 || got[0] != info {
		t.Errorf("List(home, cwd) = %+v, %v; want the session", got, err)
	}
	if got, err := List(rs.home, filepath.Join(cwd, "elsewhere")); err != nil || len(got) != 0 {
		t.Errorf("List(home, other dir) = %+v, %v; want nothing", got, err)
	}
	if got, err := Find(rs.home, info.SessionID); err != nil || got != info {
		t.Errorf("Find = %+v, %v; want %+v", got, err, info)
	}

	imp, err := Import(info.Path)
	if err != nil {
		t.Fatal(err)
	}
	if imp.Info != info || imp.BadLines != 0 || imp.Model == "" {
		t.Errorf("Import: info %+v, bad lines %d, model %q", imp.Info, imp.BadLines, imp.Model)
	}
	si := imp.Events[0].GetSessionInfo()
	if si == nil || si.SessionId != info.SessionID || si.WorkingDirectory != cwd || si.Model != imp.Model || !si.IsResumed {
		t.Errorf("first event %v, want SessionInfo of the session", imp.Events[0])
	}
	var (
		turns     [][]string // text deltas of each exchange
		statuses  []string
		inputs    []string // UserInput contents
		completes int
		toolID    string
	)
	for _, ev := range imp.Events {
		if ev.Sequence != 0 || ev.Timestamp == nil {
			t.Errorf("event %v: want a timestamp and no sequence", ev)
		}
		switch {
		case ev.GetUserInput() != nil:
			inputs = append(inputs, ev.GetUserInput().Content)
		case ev.GetStatusChange() != nil:
			sc := ev.GetStatusChange()
			statuses = append(statuses, sc.Status.String()+" "+sc.Message)
			if sc.Status == pb.AgentStatus_THINKING {
				turns = append(turns, nil)
			}
		case ev.GetTextDelta() != nil:
			if len(turns) == 0 || !ev.GetTextDelta().IsComplete {
				t.Errorf("text delta %v outside a turn or incomplete", ev)
				continue
			}
			turns[len(turns)-1] = append(turns[len(turns)-1], ev.GetTextDelta().Text)
		case ev.GetToolCallStart() != nil:
			tc := ev.GetToolCallStart()
			toolID = tc.ToolId
			if tc.ToolName != "Bash" || tc.Input.GetFields()["command"].GetStringValue() != fakeapi.ToolCommand {
				t.Errorf("tool call %v, want Bash %q", tc, fakeapi.ToolCommand)
			}
		case ev.GetToolCallResult() != nil:
			tr := ev.GetToolCallResult()
			if tr.ToolId != toolID || toolID == "" || tr.Output != "done" || tr.IsError {
				t.Errorf("tool result %v, want output done for %q", tr, toolID)
			}
		case ev.GetTurnComplete() != nil:
			completes++
			if r := ev.GetTurnComplete().StopReason; r != StopReasonImported {
				t.Errorf("stop reason %q", r)
			}
		}
	}
	for i, texts := range turns {
		if i < len(rs.texts) && strings.Join(texts, "") != rs.texts[i] {
			t.Errorf("turn %d imported text %q, the CLI streamed %q", i, texts, rs.texts[i])
		}
	}
	wantStatuses := []string{"THINKING ", "IDLE ", "THINKING ", "IDLE "}
	if !slices.Equal(statuses, wantStatuses) {
		t.Errorf("statuses %q, want %q", statuses, wantStatuses)
	}
	if !slices.Equal(inputs, prompts) {
		t.Errorf("user inputs %q, want the prompts %q", inputs, prompts)
	}
	if completes != len(prompts) || toolID == "" {
		t.Errorf("%d TurnCompletes for %d prompts; tool call seen: %v", completes, len(prompts), toolID != "")
	}

	if *update {
		b, err := os.ReadFile(info.Path)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join("testdata", realTranscript), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
