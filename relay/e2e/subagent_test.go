package e2e

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// TestSubagentsThroughRelay: SubagentService reaches the machine through
// the relay's tunnel with the owner's token, like every agent service: a
// subagent is spawned, watched to its end and listed; an orchestration of
// two dependent steps runs to COMPLETED and is listed; refusals keep their
// BetCode codes; another user reaches nothing and a call without a token is
// refused before the machine.
func TestSubagentsThroughRelay(t *testing.T) {
	w := newWorld(t, "")
	a := w.newAgent("m1")
	a.args = []string{"--feature-flag", "subagent_orchestration"}
	cert, key := w.machineCert("m1")
	a.start(w, cert, key)
	ctx := onMachine(ctxT(t, 120*time.Second), "m1")

	s, err := pb.NewAgentServiceClient(w.client()).Converse(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(&pb.AgentRequest{Request: &pb.AgentRequest_Start{Start: &pb.StartConversation{WorkingDirectory: a.project}}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Send(&pb.AgentRequest{Request: &pb.AgentRequest_Message{Message: &pb.UserMessage{Content: "hello"}}}); err != nil {
		t.Fatal(err)
	}
	parent := sessionOf(t, recvUntil(t, s, isTurnComplete))

	subs := pb.NewSubagentServiceClient(w.client())
	sp, err := subs.SpawnSubagent(ctx, &pb.SpawnSubagentRequest{ParentSessionId: parent, Spec: &pb.SubagentSpec{Name: "counter", Prompt: "STREAM 2"}})
	if err != nil {
		t.Fatalf("SpawnSubagent through the relay: %v", err)
	}
	watch, err := subs.WatchSubagent(ctx, &pb.WatchSubagentRequest{SubagentId: sp.GetSubagent().GetId()})
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	for done := false; !done; {
		r, err := watch.Recv()
		if err != nil {
			t.Fatalf("WatchSubagent through the relay: %v (text so far %q)", err, text.String())
		}
		text.WriteString(r.GetAgentEvent().GetTextDelta().GetText())
		switch st := r.GetStatusChange().GetStatus(); st {
		case pb.SubagentStatus_SUBAGENT_STATUS_COMPLETED:
			done = true
		case pb.SubagentStatus_SUBAGENT_STATUS_FAILED, pb.SubagentStatus_SUBAGENT_STATUS_CANCELLED:
			t.Fatalf("the subagent ended %v: %s", st, r.GetStatusChange().GetMessage())
		}
	}
	if got := strings.TrimSpace(text.String()); got != "w0 w1" {
		t.Fatalf("the subagent's streamed text through the relay: %q, want %q", got, "w0 w1")
	}
	list, err := subs.ListSubagents(ctx, &pb.ListSubagentsRequest{ParentSessionId: parent})
	if err != nil || len(list.GetSubagents()) != 1 || list.GetSubagents()[0].GetStatus() != pb.SubagentStatus_SUBAGENT_STATUS_COMPLETED ||
		strings.TrimSpace(list.GetSubagents()[0].GetResult()) != "w0 w1" {
		t.Fatalf("ListSubagents through the relay: %v (%v)", list, err)
	}

	orch, err := subs.CreateOrchestration(ctx, &pb.CreateOrchestrationRequest{ParentSessionId: parent, Name: "two", Steps: []*pb.OrchestrationStep{
		{Id: "first", Spec: &pb.SubagentSpec{Prompt: "STREAM 1"}},
		{Id: "second", Spec: &pb.SubagentSpec{Prompt: "STREAM 1"}, DependsOn: []string{"first"}},
	}})
	if err != nil {
		t.Fatalf("CreateOrchestration through the relay: %v", err)
	}
	ow, err := subs.WatchOrchestration(ctx, &pb.WatchOrchestrationRequest{OrchestrationId: orch.GetOrchestration().GetId()})
	if err != nil {
		t.Fatal(err)
	}
	for {
		r, err := ow.Recv()
		if err != nil {
			t.Fatalf("WatchOrchestration through the relay: %v", err)
		}
		if st := r.GetSnapshot().GetStatus(); st != pb.OrchestrationStatus_ORCHESTRATION_STATUS_UNSPECIFIED && st != pb.OrchestrationStatus_ORCHESTRATION_STATUS_RUNNING {
			if st != pb.OrchestrationStatus_ORCHESTRATION_STATUS_COMPLETED {
				t.Fatalf("the orchestration ended %v: %v", st, r.GetSnapshot())
			}
			break
		}
	}
	orchs, err := subs.ListOrchestrations(ctx, &pb.ListOrchestrationsRequest{ParentSessionId: parent})
	if err != nil || len(orchs.GetOrchestrations()) != 1 || orchs.GetOrchestrations()[0].GetStatus() != pb.OrchestrationStatus_ORCHESTRATION_STATUS_COMPLETED {
		t.Fatalf("ListOrchestrations through the relay: %v (%v)", orchs, err)
	}

	_, err = subs.CreateOrchestration(ctx, &pb.CreateOrchestrationRequest{ParentSessionId: parent, Steps: []*pb.OrchestrationStep{
		{Id: "a", Spec: &pb.SubagentSpec{Prompt: "x"}, DependsOn: []string{"b"}},
		{Id: "b", Spec: &pb.SubagentSpec{Prompt: "x"}, DependsOn: []string{"a"}},
	}})
	if status.Code(err) != codes.InvalidArgument || reason(err) != "DAG_CYCLE" {
		t.Fatalf("a cycle through the relay: %v (%s)", err, reason(err))
	}
	_, err = subs.CancelSubagent(ctx, &pb.CancelSubagentRequest{SubagentId: "no-such-subagent"})
	if status.Code(err) != codes.NotFound || reason(err) != "SUBAGENT_NOT_FOUND" {
		t.Fatalf("cancelling an unknown subagent through the relay: %v (%s)", err, reason(err))
	}

	bob := pb.NewSubagentServiceClient(w.dial(w.addr, w.userToken("bob")))
	_, err = bob.ListSubagents(ctx, &pb.ListSubagentsRequest{ParentSessionId: parent})
	wantCode(t, "bob ListSubagents on m1", err, codes.NotFound, `no machine "m1"`)
	_, err = bob.SpawnSubagent(ctx, &pb.SpawnSubagentRequest{ParentSessionId: parent, Spec: &pb.SubagentSpec{Prompt: "hi"}})
	wantCode(t, "bob SpawnSubagent on m1", err, codes.NotFound, `no machine "m1"`)
	_, err = pb.NewSubagentServiceClient(w.dial(w.addr, "")).ListOrchestrations(ctx, &pb.ListOrchestrationsRequest{})
	if status.Code(err) != codes.Unauthenticated {
		t.Fatalf("ListOrchestrations without a token: %v", err)
	}
}
