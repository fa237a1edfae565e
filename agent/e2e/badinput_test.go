package e2e

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/betcode-dev/betcode/agent/internal/testenv"
	"github.com/betcode-dev/betcode/agent/server"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

func TestInvalidRequestsGetClearErrors(t *testing.T) {
	api := testenv.FakeAPI(t)
	agent := testenv.StartAgent(t, testenv.AgentOptions{APIURL: api.URL()})
	ctx := ctxT(t)

	recvErr := func(t *testing.T, s recver) (*pb.AgentEvent, error) {
		t.Helper()
		var lastEv *pb.AgentEvent
		for {
			ev, err := s.Recv()
			if err != nil {
				return lastEv, err
			}
			lastEv = ev
		}
	}
	tests := []struct {
		name     string
		first    *pb.AgentRequest
		code     codes.Code
		betcode  string
		contains string
	}{
		{"first message not start", &pb.AgentRequest{Request: &pb.AgentRequest_Message{Message: &pb.UserMessage{Content: "hi"}}},
			codes.InvalidArgument, server.CodeInvalidArgument, "first message on Converse must be StartConversation"},
		{"unknown session", &pb.AgentRequest{Request: &pb.AgentRequest_Start{Start: &pb.StartConversation{SessionId: "no-such-session"}}},
			codes.NotFound, server.CodeSessionNotFound, "Session does not exist"},
		{"relative working directory", &pb.AgentRequest{Request: &pb.AgentRequest_Start{Start: &pb.StartConversation{WorkingDirectory: "relative/dir"}}},
			codes.InvalidArgument, server.CodeInvalidArgument, "must be an absolute path"},
		{"missing working directory", &pb.AgentRequest{Request: &pb.AgentRequest_Start{Start: &pb.StartConversation{WorkingDirectory: "/does/not/exist"}}},
			codes.InvalidArgument, server.CodeInvalidArgument, "not an existing directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := agent.API.Converse(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Send(tt.first); err != nil {
				t.Fatal(err)
			}
			ev, err := recvErr(t, s)
			st := status.Convert(err)
			if st.Code() != tt.code || !strings.Contains(st.Message(), tt.contains) || server.BetCodeCode(err) != tt.betcode {
				t.Fatalf("got %v (betcode %q), want %v %q containing %q", err, server.BetCodeCode(err), tt.code, tt.betcode, tt.contains)
			}
			if tt.code == codes.NotFound {
				if ev.GetError().GetCode() != server.CodeSessionNotFound || !ev.GetError().IsFatal {
					t.Errorf("want a fatal ErrorEvent SESSION_NOT_FOUND before the status, got %v", ev)
				}
			}
		})
	}

	t.Run("resume unknown session", func(t *testing.T) {
		r, err := agent.API.ResumeSession(ctx, &pb.ResumeSessionRequest{SessionId: "nope"})
		if err == nil {
			_, err = r.Recv()
		}
		if status.Code(err) != codes.NotFound || server.BetCodeCode(err) != server.CodeSessionNotFound {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("list limit too large", func(t *testing.T) {
		_, err := agent.API.ListSessions(ctx, &pb.ListSessionsRequest{Limit: 100000})
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "limit") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("empty user message", func(t *testing.T) {
		s := startConv(t, ctx, agent.API, &pb.StartConversation{WorkingDirectory: agent.ProjectDir(t)})
		until(t, s, func(ev *pb.AgentEvent) bool { return ev.GetSessionInfo() != nil })
		say(t, s, "   ")
		ev, err := s.Recv()
		if err != nil || ev.GetError().GetCode() != server.CodeInvalidArgument || ev.Sequence != 0 || !strings.Contains(ev.GetError().Message, "empty") {
			t.Fatalf("got %v, %v; want a non-fatal INVALID_ARGUMENT ErrorEvent with sequence 0", ev, err)
		}
	})
	t.Run("stale permission answer", func(t *testing.T) {
		s := startConv(t, ctx, agent.API, &pb.StartConversation{WorkingDirectory: agent.ProjectDir(t)})
		until(t, s, func(ev *pb.AgentEvent) bool { return ev.GetSessionInfo() != nil })
		if err := s.Send(&pb.AgentRequest{Request: &pb.AgentRequest_Permission{Permission: &pb.PermissionResponse{RequestId: "never-asked", Decision: pb.PermissionDecision_ALLOW_ONCE}}}); err != nil {
			t.Fatal(err)
		}
		ev, err := s.Recv()
		if err != nil || ev.GetError().GetCode() != server.CodePermissionStale {
			t.Fatalf("got %v, %v", ev, err)
		}
	})
}

func TestMissingClaudeBinaryNamesTheFlag(t *testing.T) {
	b := testenv.Binaries(t)
	for _, bin := range []string{"/nonexistent/claude", filepath.Join(t.TempDir())} {
		cmd := exec.Command(b.Agent, "serve", "--listen", "unix://"+filepath.Join(t.TempDir(), "s.sock"),
			"--data-dir", t.TempDir(), "--claude-bin", bin)
		out, err := cmd.CombinedOutput()
		if err == nil {
			t.Fatalf("agent started with claude-bin %q", bin)
		}
		if !strings.Contains(string(out), "--claude-bin") || !strings.Contains(string(out), "BETCODE_CLAUDE_BIN") {
			t.Errorf("error for %q does not name the flag:\n%s", bin, out)
		}
	}
}

func TestSIGTERMEndsStreamsAndExitsCleanly(t *testing.T) {
	api := testenv.FakeAPI(t)
	agent := testenv.StartAgent(t, testenv.AgentOptions{APIURL: api.URL()})
	ctx := ctxT(t)
	s := startConv(t, ctx, agent.API, &pb.StartConversation{WorkingDirectory: agent.ProjectDir(t)})
	until(t, s, func(ev *pb.AgentEvent) bool { return ev.GetSessionInfo() != nil })
	say(t, s, "SLOW story please")
	until(t, s, func(ev *pb.AgentEvent) bool { return ev.GetTextDelta() != nil })
	if err := agent.Terminate(30 * time.Second); err != nil {
		t.Fatalf("agent exit after SIGTERM: %v\n%s", err, agent.Log())
	}
	var err error
	for err == nil {
		_, err = s.Recv()
	}
	if c := status.Code(err); c != codes.Unavailable {
		t.Errorf("stream ended with %v, want UNAVAILABLE", err)
	}
	if !strings.Contains(agent.Log(), "agent stopped") {
		t.Errorf("no clean stop in the log:\n%s", agent.Log())
	}
}

func TestHealthDetails(t *testing.T) {
	api := testenv.FakeAPI(t)
	agent := testenv.StartAgent(t, testenv.AgentOptions{APIURL: api.URL()})
	resp, err := pb.NewBetCodeHealthClient(agent.Conn).GetHealthDetails(ctxT(t), &pb.HealthDetailsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]pb.ServingStatus{}
	for _, c := range resp.Components {
		names[c.Name] = c.Status
	}
	if resp.OverallStatus != pb.ServingStatus_SERVING || names["sqlite"] != pb.ServingStatus_SERVING ||
		names["subprocess_pool"] != pb.ServingStatus_SERVING || resp.Metadata["claude_version"] == "" {
		t.Fatalf("health = %v", resp)
	}
}
