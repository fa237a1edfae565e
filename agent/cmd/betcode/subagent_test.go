package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/betcode-dev/betcode/agent/client"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// betcodeStatus is a status carrying a BetCode code, as the agent sends.
func betcodeStatus(t *testing.T, c codes.Code, code, msg string) error {
	t.Helper()
	st, err := status.New(c, msg).WithDetails(&errdetails.ErrorInfo{Reason: code, Domain: "betcode.dev"})
	if err != nil {
		t.Fatal(err)
	}
	return st.Err()
}

func TestServiceError(t *testing.T) {
	tests := []struct {
		name     string
		err      error
		want     string // the whole message, or its start when wantHint
		wantHint string
		wantCode int
	}{
		{name: "flag off", err: betcodeStatus(t, codes.Unimplemented, "NOT_IMPLEMENTED", "subagent orchestration is not enabled (ALPHA)"),
			want: "spawn subagent: NOT_IMPLEMENTED: subagent orchestration is not enabled (ALPHA)\nhint: ", wantHint: "--feature-flag subagent_orchestration",
			wantCode: client.ExitAgentError},
		{name: "service missing", err: status.Error(codes.Unimplemented, "unknown service betcode.v1.TeamService"),
			want: "spawn subagent: Unimplemented: unknown service betcode.v1.TeamService\nhint: ", wantHint: "update betcode-agent", wantCode: client.ExitAgentError},
		{name: "cycle", err: betcodeStatus(t, codes.InvalidArgument, "DAG_CYCLE", "dependency cycle: a -> b -> a"),
			want: "spawn subagent: DAG_CYCLE: dependency cycle: a -> b -> a", wantCode: client.ExitInvalidArgs},
		{name: "unknown parent", err: betcodeStatus(t, codes.NotFound, "SESSION_NOT_FOUND", "spawn: session does not exist"),
			want: "spawn subagent: SESSION_NOT_FOUND: spawn: session does not exist", wantCode: client.ExitSessionNotFound},
		{name: "limit", err: betcodeStatus(t, codes.ResourceExhausted, "SUBAGENT_LIMIT", "16 unfinished subagents"),
			want: "spawn subagent: SUBAGENT_LIMIT: 16 unfinished subagents", wantCode: client.ExitRateLimited},
		{name: "precondition", err: betcodeStatus(t, codes.FailedPrecondition, "", "skill in use"),
			want: "spawn subagent: FailedPrecondition: skill in use", wantCode: client.ExitAgentError},
		{name: "name taken", err: betcodeStatus(t, codes.AlreadyExists, "SPEC_EXISTS", "spec name already in use"),
			want: "spawn subagent: SPEC_EXISTS: spec name already in use", wantCode: client.ExitInvalidArgs},
		{name: "no code", err: status.Error(codes.Unavailable, "connection refused"), want: "spawn subagent: Unavailable: connection refused", wantCode: client.ExitConnection},
		{name: "plain", err: errors.New("boom"), want: "spawn subagent: boom", wantCode: client.ExitInternal},
		{name: "exit error kept", err: usageError("bad flag"), want: "bad flag", wantCode: client.ExitInvalidArgs},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := serviceError("spawn subagent", tt.err)
			got := err.Error()
			if tt.wantHint == "" && got != tt.want || tt.wantHint != "" && (!strings.HasPrefix(got, tt.want) || !strings.Contains(got, tt.wantHint)) {
				t.Fatalf("serviceError = %q, want %q (hint %q)", got, tt.want, tt.wantHint)
			}
			if client.ExitCode(err) != tt.wantCode {
				t.Fatalf("exit code %d, want %d", client.ExitCode(err), tt.wantCode)
			}
		})
	}
	if serviceError("x", nil) != nil {
		t.Fatal("serviceError(nil) is not nil")
	}
	// UNAUTHENTICATED stays a status, for the relay login hint.
	if err := serviceError("x", status.Error(codes.Unauthenticated, "no token")); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("unauthenticated became %v", err)
	}
}

func TestParseSubagentStatus(t *testing.T) {
	tests := []struct {
		in      string
		want    pb.SubagentStatus
		wantErr bool
	}{
		{"running", pb.SubagentStatus_SUBAGENT_STATUS_RUNNING, false},
		{"COMPLETED", pb.SubagentStatus_SUBAGENT_STATUS_COMPLETED, false},
		{"waiting", pb.SubagentStatus_SUBAGENT_STATUS_WAITING_FOR_USER, false},
		{"waiting-for-user", pb.SubagentStatus_SUBAGENT_STATUS_WAITING_FOR_USER, false},
		{"subagent_status_skipped", pb.SubagentStatus_SUBAGENT_STATUS_SKIPPED, false},
		{"unspecified", 0, true},
		{"done", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parseSubagentStatus(tt.in)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Fatalf("parseSubagentStatus(%q) = %v, %v", tt.in, got, err)
			}
			if err != nil && client.ExitCode(err) != client.ExitInvalidArgs {
				t.Fatalf("exit code %d", client.ExitCode(err))
			}
		})
	}
}

func TestSpawnRequest(t *testing.T) {
	tests := []struct {
		name    string
		o       spawnOptions
		wantErr string
	}{
		{name: "minimal", o: spawnOptions{parent: "p", prompt: "hi"}},
		{name: "full", o: spawnOptions{parent: "p", prompt: "hi", name: "n", model: "m", worktree: "wt", tools: []string{"Read"}, autoApprove: true,
			maxTurns: 2, prov: "acp", config: []string{"agent=gemini"}, spec: "s", meta: []string{"k=v"}}},
		{name: "blank prompt", o: spawnOptions{parent: "p", prompt: "  "}, wantErr: "--prompt is empty"},
		{name: "auto-approve without tools", o: spawnOptions{parent: "p", prompt: "hi", autoApprove: true}, wantErr: "--auto-approve needs --allow-tool"},
		{name: "bad provider", o: spawnOptions{parent: "p", prompt: "hi", prov: "nonsense"}, wantErr: "--provider: "},
		{name: "config without provider", o: spawnOptions{parent: "p", prompt: "hi", config: []string{"a=b"}}, wantErr: "--provider-config needs --provider"},
		{name: "bad metadata", o: spawnOptions{parent: "p", prompt: "hi", meta: []string{"novalue"}}, wantErr: "--metadata"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := tt.o.request(&globals{})
			if tt.wantErr == "" {
				if err != nil || req.GetSpec().GetPrompt() != tt.o.prompt || req.GetParentSessionId() != "p" {
					t.Fatalf("request = %v, %v", req, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || client.ExitCode(err) != client.ExitInvalidArgs {
				t.Fatalf("request error %v (exit %d), want %q (exit 5)", err, client.ExitCode(err), tt.wantErr)
			}
		})
	}
}

func ts(s string) *timestamppb.Timestamp {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return timestamppb.New(t)
}

func TestPrintSubagentTable(t *testing.T) {
	now, _ := time.Parse(time.RFC3339, "2030-01-02T03:05:00Z")
	list := []*pb.Subagent{
		{Id: "sa-1", Name: "counter", Status: pb.SubagentStatus_SUBAGENT_STATUS_COMPLETED, Model: "claude-sonnet",
			StartedAt: ts("2030-01-02T03:04:00Z"), FinishedAt: ts("2030-01-02T03:04:02.5Z"),
			Usage: &pb.UsageReport{InputTokens: 12, OutputTokens: 20, CostUsd: 0.0012}, Result: "w0 w1 w2\nmore"},
		{Id: "sa-2", Name: "b", Status: pb.SubagentStatus_SUBAGENT_STATUS_FAILED, OrchestrationId: "0123456789ab", StepId: "build", Attempt: 2,
			StartedAt: ts("2030-01-02T03:00:00Z"), FinishedAt: ts("2030-01-02T03:02:03Z"), Error: "API error 400"},
		{Id: "sa-3", Status: pb.SubagentStatus_SUBAGENT_STATUS_RUNNING, OrchestrationId: "0123456789ab", StepId: "test", Attempt: 1,
			StartedAt: ts("2030-01-02T03:04:30Z")},
		{Id: "sa-4", Name: "later", Status: pb.SubagentStatus_SUBAGENT_STATUS_PENDING},
	}
	want := `ID    NAME     STATUS     STEP               MODEL          TOKENS IN/OUT  COST     TOOK  RESULT
sa-1  counter  COMPLETED  -                  claude-sonnet  12/20          $0.0012  2.5s  w0 w1 w2 …
sa-2  b        FAILED     01234567/build #2  -              0/0            -        2m3s  error: API error 400
sa-3  -        RUNNING    01234567/test      -              0/0            -        30s   -
sa-4  later    PENDING    -                  -              0/0            -        -     -
`
	var b bytes.Buffer
	if err := printSubagentTable(&b, list, now); err != nil {
		t.Fatal(err)
	}
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}

func TestPrintSubagent(t *testing.T) {
	sa := &pb.Subagent{Id: "sa-2", ParentSessionId: "par", SessionId: "ses", Name: "b", Status: pb.SubagentStatus_SUBAGENT_STATUS_COMPLETED,
		OrchestrationId: "orch", StepId: "build", Attempt: 2, Provider: pb.SessionProvider_SESSION_PROVIDER_CLAUDE_CODE,
		Usage: &pb.UsageReport{InputTokens: 1, OutputTokens: 2, CostUsd: 0.5}, Result: "line one\nline two"}
	var b bytes.Buffer
	if err := printSubagent(&b, sa); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"id:            sa-2\n", "status:        COMPLETED\n", "orchestration: orch, step build (attempt 2)\n",
		"provider:      claude-code\n", "usage:         1 in / 2 out tokens, $0.5000\n", "started:       -\n", "result:\n  line one\n  line two\n"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, b.String())
		}
	}
}

func TestSubagentWatcher(t *testing.T) {
	change := func(prev, st pb.SubagentStatus, msg string) *pb.WatchSubagentResponse {
		return &pb.WatchSubagentResponse{SubagentId: "sa-1", Event: &pb.WatchSubagentResponse_StatusChange{StatusChange: &pb.SubagentStatusChange{
			PreviousStatus: prev, Status: st, Message: msg, Timestamp: ts("2030-01-02T03:04:05Z")}}}
	}
	text := func(s string) *pb.WatchSubagentResponse {
		return &pb.WatchSubagentResponse{SubagentId: "sa-1", Event: &pb.WatchSubagentResponse_AgentEvent{AgentEvent: &pb.AgentEvent{
			Event: &pb.AgentEvent_TextDelta{TextDelta: &pb.TextDelta{Text: s}}}}}
	}
	const (
		pending   = pb.SubagentStatus_SUBAGENT_STATUS_PENDING
		running   = pb.SubagentStatus_SUBAGENT_STATUS_RUNNING
		completed = pb.SubagentStatus_SUBAGENT_STATUS_COMPLETED
		failed    = pb.SubagentStatus_SUBAGENT_STATUS_FAILED
	)
	clock := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC).Local().Format(time.TimeOnly)
	tests := []struct {
		name              string
		stream            []*pb.WatchSubagentResponse
		wantOut, wantErr  string
		wantExit          int
		wantResultMessage string
	}{
		{name: "completed", stream: []*pb.WatchSubagentResponse{change(0, pending, ""), change(pending, running, ""), text("w0 "), text("w1"), change(running, completed, "done")},
			wantOut: "w0 w1\n", wantErr: "[" + clock + "] - -> PENDING\n[" + clock + "] PENDING -> RUNNING\n[" + clock + "] RUNNING -> COMPLETED: done\n"},
		{name: "failed", stream: []*pb.WatchSubagentResponse{change(running, failed, "API error")},
			wantErr: "[" + clock + "] RUNNING -> FAILED: API error\n", wantExit: client.ExitAgentError, wantResultMessage: "subagent sa-1 ended FAILED: API error"},
		{name: "stream ended early", stream: []*pb.WatchSubagentResponse{change(pending, running, "")},
			wantErr: "[" + clock + "] PENDING -> RUNNING\n", wantExit: client.ExitConnection, wantResultMessage: "the stream ended while it was RUNNING"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			w := newSubagentWatcher(&out, &errOut, false)
			for _, m := range tt.stream {
				if err := w.print(m); err != nil {
					t.Fatal(err)
				}
			}
			err := w.result("sa-1")
			if out.String() != tt.wantOut || errOut.String() != tt.wantErr {
				t.Fatalf("stdout %q stderr %q, want %q and %q", out.String(), errOut.String(), tt.wantOut, tt.wantErr)
			}
			if client.ExitCode(err) != tt.wantExit || err != nil && !strings.Contains(err.Error(), tt.wantResultMessage) {
				t.Fatalf("result %v (exit %d), want exit %d with %q", err, client.ExitCode(err), tt.wantExit, tt.wantResultMessage)
			}
		})
	}
}
