package e2e

import (
	"errors"
	"os/exec"
	"strings"
	"testing"

	"github.com/betcode-dev/betcode/agent/client"
	"github.com/betcode-dev/betcode/agent/internal/testenv"
	"github.com/betcode-dev/betcode/agent/server"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// TestVersionNegotiationWithTheRealAgent: through the real agent binary, an
// old Go client is refused before its first Converse with the upgrade hint,
// and a current one negotiates and converses; `betcode version` shows the
// agent's versions and feature stages.
func TestVersionNegotiationWithTheRealAgent(t *testing.T) {
	agent := fakeAgent(t)
	ctx := ctxT(t)
	addr := "unix://" + agent.Opts.Socket

	t.Run("old client", func(t *testing.T) {
		conn, err := client.Dial(addr, client.DialOptions{Version: "0.0.9", Negotiation: &client.Negotiation{Request: &pb.NegotiateRequest{ClientType: "cli"}}})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_, err = client.Start(ctx, pb.NewAgentServiceClient(conn), &pb.StartConversation{WorkingDirectory: agent.ProjectDir(t)}, 0)
		var refused *client.RefusedError
		want := "betcode 0.0.9 is too old for this agent (minimum " + server.MinClientVersion + "): upgrade"
		if !errors.As(err, &refused) || !strings.Contains(err.Error(), want) {
			t.Fatalf("Start = %v, want a refusal saying %q", err, want)
		}
	})

	t.Run("current client", func(t *testing.T) {
		n := &client.Negotiation{Request: &pb.NegotiateRequest{ClientType: "cli", RequestedFeatures: []string{"streaming_deltas", "permission_bridge"}}}
		conn, err := client.Dial(addr, client.DialOptions{Version: "0.2.0", Negotiation: n})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		conv, err := client.Start(ctx, pb.NewAgentServiceClient(conn), &pb.StartConversation{WorkingDirectory: agent.ProjectDir(t)}, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer conv.Close()
		if !n.Granted("streaming_deltas") || !n.Granted("permission_bridge") {
			t.Fatalf("granted %v", n.Response().GetGrantedFeatures())
		}
		if err := conv.Send(&pb.AgentRequest{Request: &pb.AgentRequest_Message{Message: &pb.UserMessage{Content: "hello"}}}); err != nil {
			t.Fatal(err)
		}
		for {
			ev, err := conv.Recv(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if ev.GetTurnComplete() != nil {
				break
			}
		}
	})

	t.Run("betcode version", func(t *testing.T) {
		out, err := exec.CommandContext(ctx, testenv.Binaries(t).Client, "version", "--agent", addr).CombinedOutput()
		if err != nil {
			t.Fatalf("betcode version: %v\n%s", err, out)
		}
		for _, want := range []string{"betcode ", "agent ", "(API v1)", "claude ", "minimum client " + server.MinClientVersion,
			"streaming_deltas", "stable", "legacy_permission_format", "deprecated", "removal in 0.4.0"} {
			if !strings.Contains(string(out), want) {
				t.Errorf("output lacks %q:\n%s", want, out)
			}
		}
	})
}
