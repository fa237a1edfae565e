package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/betcode-dev/betcode/agent/internal/testenv"
	"github.com/betcode-dev/betcode/agent/session"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// These cases need a CLI that misbehaves on purpose; the fake CLI does.

func fakeAgent(t *testing.T) *testenv.Agent {
	return testenv.StartAgent(t, testenv.AgentOptions{ClaudeBin: testenv.Binaries(t).FakeClaude})
}

func TestCLICrashMidTurnIsReportedAndTheSessionContinues(t *testing.T) {
	agent := fakeAgent(t)
	ctx := ctxT(t)
	s := startConv(t, ctx, agent.API, &pb.StartConversation{WorkingDirectory: agent.ProjectDir(t)})
	say(t, s, "please CRASH")
	evs := until(t, s, isTurnComplete)
	checkSequences(t, evs, 0)
	var crash *pb.ErrorEvent
	for _, ev := range evs {
		if e := ev.GetError(); e != nil {
			crash = e
		}
	}
	if crash == nil || crash.Code != session.CodeSubprocessCrashed || !strings.Contains(crash.Message, "simulated crash") {
		t.Fatalf("crash error = %v", crash)
	}
	if got := last(evs).GetTurnComplete().StopReason; got != "crashed" {
		t.Errorf("stop_reason = %q, want crashed", got)
	}
	if text(evs) != "about to crash" {
		t.Errorf("text before the crash = %q", text(evs))
	}
	// The next message restarts the CLI.
	say(t, s, "hello again")
	evs = until(t, s, isTurnComplete)
	if text(evs) != "Fake answer." || last(evs).GetTurnComplete().StopReason != "end_turn" {
		t.Fatalf("after restart: %q, %v", text(evs), last(evs))
	}
}

func TestGarbageFromTheCLIIsSkipped(t *testing.T) {
	agent := fakeAgent(t)
	ctx := ctxT(t)
	s := startConv(t, ctx, agent.API, &pb.StartConversation{WorkingDirectory: agent.ProjectDir(t)})
	say(t, s, "GARBAGE")
	evs := until(t, s, isTurnComplete)
	if text(evs) != "survived garbage" {
		t.Fatalf("text = %q", text(evs))
	}
	checkSequences(t, evs, 0)
	if !strings.Contains(agent.Log(), "malformed stdout line") {
		t.Error("malformed lines were not logged")
	}
}

func TestCancelHungTurn(t *testing.T) {
	agent := fakeAgent(t)
	ctx := ctxT(t)
	s := startConv(t, ctx, agent.API, &pb.StartConversation{WorkingDirectory: agent.ProjectDir(t)})
	id := sessionID(t, until(t, s, func(ev *pb.AgentEvent) bool { return ev.GetSessionInfo() != nil }))
	say(t, s, "HANG")
	until(t, s, func(ev *pb.AgentEvent) bool { return ev.GetTextDelta() != nil })
	start := time.Now()
	resp, err := agent.API.CancelTurn(ctx, &pb.CancelTurnRequest{SessionId: id})
	if err != nil || !resp.WasActive {
		t.Fatalf("CancelTurn = %v, %v", resp, err)
	}
	evs := until(t, s, isTurnComplete)
	if got := last(evs).GetTurnComplete().StopReason; got != "cancelled" {
		t.Errorf("stop_reason = %q, want cancelled", got)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("cancel took %s", d)
	}
	resp, err = agent.API.CancelTurn(ctx, &pb.CancelTurnRequest{SessionId: id})
	if err != nil || resp.WasActive {
		t.Errorf("cancelling an idle session = %v, %v; want was_active=false", resp, err)
	}
}
