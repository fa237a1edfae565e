package codex

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

func ptr[T any](v T) *T { return &v }

// TestTranslate maps synthetic event sequences, including the ones the real
// app-server cannot be made to produce on demand.
func TestTranslate(t *testing.T) {
	turn := Turn{ID: "u1", Status: TurnStatusInProgress}
	done := func(status string, err *TurnError) *TurnEnded {
		return &TurnEnded{ThreadID: "t", Turn: Turn{ID: "u1", Status: status, Error: err, DurationMs: ptr(int64(42))}}
	}
	usage := &TokenUsage{TokenUsageNotification{TokenUsage: ThreadTokenUsage{Last: TokenUsageBreakdown{
		InputTokens: 100, CachedInputTokens: 30, CacheWriteInputTokens: 5, OutputTokens: 20, ReasoningOutputTokens: 4, TotalTokens: 120,
	}}}}
	tests := []struct {
		name   string
		events []Event
		want   []string // kinds in order
		check  func(t *testing.T, out []*pb.AgentEvent)
	}{
		{
			name: "unstreamed message and usage summed over two requests",
			events: []Event{
				&TurnStarted{Turn: turn},
				&ItemCompleted{Item: Item{Type: ItemAgentMessage, ID: "m", Text: "whole"}},
				usage, usage,
				done(TurnStatusCompleted, nil),
			},
			want: []string{"status_change", "text_delta", "usage", "turn_complete", "status_change"},
			check: func(t *testing.T, out []*pb.AgentEvent) {
				if d := out[1].GetTextDelta(); d.GetText() != "whole" || !d.GetIsComplete() {
					t.Errorf("TextDelta %v", d)
				}
				u := out[2].GetUsage()
				if u.GetInputTokens() != 140 || u.GetCacheReadTokens() != 60 || u.GetCacheCreationTokens() != 10 ||
					u.GetOutputTokens() != 40 || u.GetDurationMs() != 42 || u.GetModel() != "gpt-5.5" {
					t.Errorf("UsageReport %v", u)
				}
			},
		},
		{
			name: "retrying error is a status, final error an ErrorEvent once",
			events: []Event{
				&TurnStarted{Turn: turn},
				&Error{ErrorNotification{Error: TurnError{Message: "Reconnecting"}, WillRetry: true}},
				&Error{ErrorNotification{Error: TurnError{Message: "limit", CodexErrorInfo: json.RawMessage(`{"responseTooManyFailedAttempts":{"httpStatusCode":429}}`)}}},
				done(TurnStatusFailed, &TurnError{Message: "limit"}),
			},
			want: []string{"status_change", "status_change", "error", "usage", "turn_complete", "status_change"},
			check: func(t *testing.T, out []*pb.AgentEvent) {
				if out[1].GetStatusChange().GetMessage() != "retrying: Reconnecting" {
					t.Errorf("retry status %v", out[1])
				}
				if e := out[2].GetError(); e.GetCode() != CodeRateLimited || e.GetIsFatal() {
					t.Errorf("ErrorEvent %v", e)
				}
				if out[4].GetTurnComplete().GetStopReason() != StopError {
					t.Errorf("TurnComplete %v", out[4])
				}
			},
		},
		{
			name: "failed turn without error notification",
			events: []Event{
				&TurnStarted{Turn: turn},
				done(TurnStatusFailed, &TurnError{Message: "boom", CodexErrorInfo: json.RawMessage(`"other"`)}),
			},
			want: []string{"status_change", "error", "usage", "turn_complete", "status_change"},
			check: func(t *testing.T, out []*pb.AgentEvent) {
				if e := out[1].GetError(); e.GetCode() != CodeAgentError || e.GetMessage() != "boom" || e.GetDetails()["codex_error_info"] != `"other"` {
					t.Errorf("ErrorEvent %v", e)
				}
			},
		},
		{
			name: "command denied by the sandbox has no item/started",
			events: []Event{
				&TurnStarted{Turn: turn},
				&ItemCompleted{Item: Item{Type: ItemCommandExecution, ID: "c", Command: "/bin/bash -lc 'touch x'", Status: ItemStatusFailed,
					AggregatedOutput: ptr("Read-only file system\n"), ExitCode: ptr(1)}},
				done(TurnStatusCompleted, nil),
			},
			want: []string{"status_change", "tool_call_start", "status_change", "tool_call_result", "status_change", "usage", "turn_complete", "status_change"},
			check: func(t *testing.T, out []*pb.AgentEvent) {
				r := out[3].GetToolCallResult()
				if !r.GetIsError() || r.GetOutput() != "Read-only file system\n\n(exit code 1)" {
					t.Errorf("ToolCallResult %v", r)
				}
				if out[1].GetToolCallStart().GetInput().GetFields()["command"].GetStringValue() != "touch x" {
					t.Errorf("ToolCallStart %v", out[1])
				}
			},
		},
		{
			name: "file change approval takes the item's input",
			events: []Event{
				&TurnStarted{Turn: turn},
				&ItemStarted{Item: Item{Type: ItemFileChange, ID: "p", Status: ItemStatusInProgress, Changes: []FileUpdateChange{
					{Path: "/w/a.txt", Kind: PatchChangeKind{Type: "update"}, Diff: "-a\n+b\n"},
				}}},
				&Approval{Kind: ApprovalFileChange, ItemID: "p", id: "u1/0"},
				&RequestResolved{ApprovalID: "u1/0"},
				&ItemCompleted{Item: Item{Type: ItemFileChange, ID: "p", Status: ItemStatusDeclined, Changes: []FileUpdateChange{
					{Path: "/w/a.txt", Kind: PatchChangeKind{Type: "update"}},
				}}},
			},
			want: []string{"status_change", "tool_call_start", "status_change", "permission_request", "status_change", "status_change", "tool_call_result", "status_change"},
			check: func(t *testing.T, out []*pb.AgentEvent) {
				pr := out[3].GetPermissionRequest()
				if pr.GetToolName() != ToolPatch || pr.GetRequestId() != "u1/0" || pr.GetDescription() != "M /w/a.txt" ||
					pr.GetInput().GetFields()["file_path"].GetStringValue() != "/w/a.txt" {
					t.Errorf("PermissionRequest %v", pr)
				}
				if r := out[6].GetToolCallResult(); !r.GetIsError() || r.GetOutput() != "declined by user\nM /w/a.txt" {
					t.Errorf("ToolCallResult %v", r)
				}
			},
		},
		{
			name: "crash mid-turn",
			events: []Event{
				&TurnStarted{Turn: turn},
				&AgentMessageDelta{DeltaNotification{ItemID: "m", Delta: "par"}},
				&Exited{Err: errors.New("killed")},
			},
			want: []string{"status_change", "text_delta", "error", "turn_complete", "status_change"},
			check: func(t *testing.T, out []*pb.AgentEvent) {
				if e := out[2].GetError(); e.GetCode() != CodeSubprocessCrashed || !e.GetIsFatal() {
					t.Errorf("ErrorEvent %v", e)
				}
			},
		},
		{
			name:   "clean exit when idle says nothing",
			events: []Event{&Exited{}},
			want:   nil,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := time.Unix(0, 0)
			tr := NewTranslator("gpt-5.5", func() time.Time { clock = clock.Add(time.Second); return clock })
			var out []*pb.AgentEvent
			for _, ev := range tt.events {
				out = append(out, tr.Translate(ev)...)
			}
			var kinds []string
			for _, ev := range out {
				kinds = append(kinds, pbKind(ev))
			}
			if !slices.Equal(kinds, tt.want) {
				t.Fatalf("kinds %v, want %v", kinds, tt.want)
			}
			if tt.check != nil {
				tt.check(t, out)
			}
		})
	}
}

func TestUnwrapShell(t *testing.T) {
	tests := []struct{ in, want string }{
		{"/bin/bash -lc 'echo hi'", "echo hi"},
		{"/bin/bash -c 'ls -la'", "ls -la"},
		{`/bin/bash -lc 'echo '\''quoted'\'''`, "echo 'quoted'"},
		{"/bin/bash -lc ls", "ls"},
		{"/bin/bash -lc 'a' 'b'", "'a' 'b'"},
		{"git status", "git status"},
		{"", ""},
	}
	for _, tt := range tests {
		if got := UnwrapShell(tt.in); got != tt.want {
			t.Errorf("UnwrapShell(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestDecisionFor(t *testing.T) {
	tests := []struct {
		in   pb.PermissionDecision
		want Decision
	}{
		{pb.PermissionDecision_ALLOW_ONCE, Accept},
		{pb.PermissionDecision_ALLOW_SESSION, AcceptForSession},
		{pb.PermissionDecision_DENY, Decline},
		{pb.PermissionDecision_PERMISSION_DECISION_UNSPECIFIED, Decline},
	}
	for _, tt := range tests {
		if got := DecisionFor(tt.in); got != tt.want {
			t.Errorf("DecisionFor(%v) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestStopReason(t *testing.T) {
	for in, want := range map[string]string{TurnStatusCompleted: StopEndTurn, TurnStatusInterrupted: StopCancelled, TurnStatusFailed: StopError, "weird": StopError} {
		if got := StopReason(in); got != want {
			t.Errorf("StopReason(%q) = %q, want %q", in, got, want)
		}
	}
}
