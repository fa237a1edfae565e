package main

import (
	"errors"
	"maps"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/betcode-dev/betcode/agent/client"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

func TestRPCError(t *testing.T) {
	tests := []struct {
		name     string
		err      error
		wantMsg  string
		wantCode int
	}{
		{"session not found", status.Error(codes.NotFound, "BETCODE-2010: session does not exist"), "get session: BETCODE-2010: session does not exist", client.ExitSessionNotFound},
		{"project not found", status.Error(codes.NotFound, `BETCODE-2001: project directory "/x" does not exist`), `get session: BETCODE-2001: project directory "/x" does not exist`, client.ExitInvalidArgs},
		{"wrong state", status.Error(codes.FailedPrecondition, "BETCODE-2020: session is already stopped"), "get session: BETCODE-2020: session is already stopped", client.ExitAgentError},
		{"unsupported provider", status.Error(codes.InvalidArgument, "BETCODE-2002: openclaw is not supported"), "get session: BETCODE-2002: openclaw is not supported", client.ExitInvalidArgs},
		{"no code", status.Error(codes.Unavailable, "connection refused"), "get session: Unavailable: connection refused", client.ExitConnection},
		{"plain error", errors.New("boom"), "get session: boom", client.ExitInternal},
		{"exit error kept", &client.ExitError{Code: client.ExitInvalidArgs, Err: errors.New("bad flag")}, "bad flag", client.ExitInvalidArgs},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := rpcError("get session", tt.err)
			if err.Error() != tt.wantMsg || client.ExitCode(err) != tt.wantCode {
				t.Fatalf("rpcError = %q (exit %d), want %q (exit %d)", err, client.ExitCode(err), tt.wantMsg, tt.wantCode)
			}
		})
	}
	if rpcError("x", nil) != nil {
		t.Fatal("rpcError(nil) is not nil")
	}
}

func TestKeyValues(t *testing.T) {
	tests := []struct {
		name    string
		in      []string
		want    map[string]string
		wantErr bool
	}{
		{"none", nil, nil, false},
		{"pairs", []string{"agent=gemini", "sandbox=read-only"}, map[string]string{"agent": "gemini", "sandbox": "read-only"}, false},
		{"value with =", []string{"k=a=b"}, map[string]string{"k": "a=b"}, false},
		{"empty value", []string{"k="}, map[string]string{"k": ""}, false},
		{"no =", []string{"novalue"}, nil, true},
		{"no key", []string{"=v"}, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := keyValues("provider-config", tt.in)
			if (err != nil) != tt.wantErr || !maps.Equal(got, tt.want) {
				t.Fatalf("keyValues(%q) = %v, %v", tt.in, got, err)
			}
			if err != nil && client.ExitCode(err) != client.ExitInvalidArgs {
				t.Fatalf("exit code %d, want %d", client.ExitCode(err), client.ExitInvalidArgs)
			}
		})
	}
}

func TestParseStatus(t *testing.T) {
	tests := []struct {
		in      string
		want    pb.SessionStatus
		wantErr bool
	}{
		{"running", pb.SessionStatus_SESSION_STATUS_RUNNING, false},
		{"STOPPED", pb.SessionStatus_SESSION_STATUS_STOPPED, false},
		{"session_status_failed", pb.SessionStatus_SESSION_STATUS_FAILED, false},
		{"unspecified", 0, true},
		{"bogus", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parseStatus(tt.in)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Fatalf("parseStatus(%q) = %v, %v", tt.in, got, err)
			}
		})
	}
}

func TestActivityPrinter(t *testing.T) {
	tests := []struct {
		name           string
		ev             *pb.SessionActivityEvent
		json           bool
		wantOut, wantE string
	}{
		{"tool call", &pb.SessionActivityEvent{Type: pb.ActivityType_ACTIVITY_TYPE_TOOL_CALL, ToolName: "Bash", Content: "ls\n-la"}, false, "⏺ Bash(ls …)\n", ""},
		{"tool result", &pb.SessionActivityEvent{Type: pb.ActivityType_ACTIVITY_TYPE_TOOL_RESULT, ToolSuccess: true, Content: "done"}, false, "  ⎿ done\n", ""},
		{"failed tool", &pb.SessionActivityEvent{Type: pb.ActivityType_ACTIVITY_TYPE_TOOL_RESULT, Content: "no"}, false, "  ⎿ ✗ no\n", ""},
		{"thinking", &pb.SessionActivityEvent{Type: pb.ActivityType_ACTIVITY_TYPE_THINKING, Content: "thinking"}, false, "", "… thinking\n"},
		{"completion", &pb.SessionActivityEvent{Type: pb.ActivityType_ACTIVITY_TYPE_COMPLETION, Content: "Hi.", TokensInput: 3, TokensOutput: 4}, false, "Hi.\n", "tokens: 3 in / 4 out\n"},
		{"json", &pb.SessionActivityEvent{SessionId: "s", Type: pb.ActivityType_ACTIVITY_TYPE_ERROR, Content: "x"}, true, `{"sessionId":"s","type":"ACTIVITY_TYPE_ERROR","content":"x"}` + "\n", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut strings.Builder
			p := &activityPrinter{out: &out, errOut: &errOut, json: tt.json}
			if err := p.print(tt.ev); err != nil {
				t.Fatal(err)
			}
			// protojson may put a space after a colon; compare without.
			if got := strings.ReplaceAll(out.String(), " ", ""); got != strings.ReplaceAll(tt.wantOut, " ", "") || errOut.String() != tt.wantE {
				t.Fatalf("stdout %q stderr %q, want %q and %q", out.String(), errOut.String(), tt.wantOut, tt.wantE)
			}
		})
	}
}
