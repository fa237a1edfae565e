package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/betcode-dev/betcode/agent/internal/testenv"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/fakeapi"
)

func TestTurnStreamsTextWithGaplessSequences(t *testing.T) {
	api := testenv.FakeAPI(t)
	agent := testenv.StartAgent(t, testenv.AgentOptions{APIURL: api.URL()})
	ctx := ctxT(t)
	want := "The quick brown fox jumps over the lazy dog, streamed word by word."
	api.Enqueue(fakeapi.Reply{Text: want})

	s := startConv(t, ctx, agent.API, &pb.StartConversation{WorkingDirectory: agent.ProjectDir(t)})
	say(t, s, "hello there")
	evs := until(t, s, isTurnComplete)
	checkSequences(t, evs, 0)
	if got := text(evs); got != want {
		t.Errorf("text deltas join to %q, want %q", got, want)
	}
	deltas, complete := 0, false
	var usage *pb.UsageReport
	for _, ev := range evs {
		if d := ev.GetTextDelta(); d != nil {
			if d.Text != "" {
				deltas++
			}
			complete = complete || d.IsComplete
		}
		if u := ev.GetUsage(); u != nil {
			usage = u
		}
	}
	if deltas < 5 {
		t.Errorf("text arrived in %d deltas; want it streamed in several", deltas)
	}
	if !complete {
		t.Error("no TextDelta with is_complete")
	}
	if usage == nil || usage.OutputTokens == 0 || usage.InputTokens == 0 {
		t.Errorf("usage = %v, want token counts", usage)
	}
	if tc := last(evs).GetTurnComplete(); tc.StopReason != "end_turn" {
		t.Errorf("stop_reason = %q, want end_turn", tc.StopReason)
	}
	// The session ends idle.
	ev, err := s.Recv()
	if err != nil || ev.GetStatusChange().GetStatus() != pb.AgentStatus_IDLE {
		t.Errorf("after TurnComplete got %v, %v; want StatusChange IDLE", ev, err)
	}
	_ = s.CloseSend()

	// ListSessions shows it with totals and a preview.
	resp, err := agent.API.ListSessions(ctx, &pb.ListSessionsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Total != 1 || len(resp.Sessions) != 1 {
		t.Fatalf("ListSessions = %v", resp)
	}
	sum := resp.Sessions[0]
	if sum.Id != sessionID(t, evs) || sum.TotalOutputTokens == 0 || sum.LastMessagePreview == "" || sum.MessageCount == 0 {
		t.Errorf("summary = %v", sum)
	}
}

func TestToolCallAppearsWithResult(t *testing.T) {
	api := testenv.FakeAPI(t)
	agent := testenv.StartAgent(t, testenv.AgentOptions{APIURL: api.URL()})
	ctx := ctxT(t)
	dir := agent.ProjectDir(t)
	s := startConv(t, ctx, agent.API, &pb.StartConversation{WorkingDirectory: dir, AllowedTools: []string{"Bash"}})
	say(t, s, "please RUNTOOL now")
	evs := until(t, s, isTurnComplete)
	checkSequences(t, evs, 0)
	var start *pb.ToolCallStart
	var result *pb.ToolCallResult
	starts := 0
	for _, ev := range evs {
		if ts := ev.GetToolCallStart(); ts != nil {
			start = ts
			starts++
		}
		if tr := ev.GetToolCallResult(); tr != nil {
			result = tr
		}
	}
	if start == nil || start.ToolName != "Bash" || !strings.Contains(start.Input.AsMap()["command"].(string), "touch") {
		t.Fatalf("ToolCallStart = %v", start)
	}
	if starts != 1 {
		t.Errorf("%d ToolCallStart events for one tool call", starts)
	}
	if result == nil || result.ToolId != start.ToolId || result.IsError || !strings.Contains(result.Output, "done") {
		t.Fatalf("ToolCallResult = %v", result)
	}
	if _, err := os.Stat(filepath.Join(dir, "created-by-tool.txt")); err != nil {
		t.Errorf("the tool's file does not exist: %v", err)
	}
	if !strings.Contains(text(evs), "done") {
		t.Errorf("final answer %q does not quote the tool result", text(evs))
	}
}

func TestTwoClientsSeeTheSameEvents(t *testing.T) {
	api := testenv.FakeAPI(t)
	agent := testenv.StartAgent(t, testenv.AgentOptions{APIURL: api.URL()})
	ctx := ctxT(t)
	a := startConv(t, ctx, agent.API, &pb.StartConversation{WorkingDirectory: agent.ProjectDir(t)})
	first := until(t, a, func(ev *pb.AgentEvent) bool { return ev.GetSessionInfo() != nil })
	id := sessionID(t, first)
	b := startConv(t, ctx, agent.API, &pb.StartConversation{SessionId: id, Metadata: map[string]string{"from_sequence": "0"}})
	gotB := until(t, b, func(ev *pb.AgentEvent) bool { return ev.GetSessionInfo() != nil })
	api.Enqueue(fakeapi.Reply{Text: "one two three four five six"})
	say(t, a, "hi")
	gotA := append(first, until(t, a, isTurnComplete)...)
	gotB = append(gotB, until(t, b, isTurnComplete)...)
	if len(gotA) != len(gotB) {
		t.Fatalf("client A got %d events, client B %d", len(gotA), len(gotB))
	}
	for i := range gotA {
		if !proto.Equal(gotA[i], gotB[i]) {
			t.Fatalf("event %d differs:\nA: %v\nB: %v", i, gotA[i], gotB[i])
		}
	}
	checkSequences(t, gotA, 0)
}
