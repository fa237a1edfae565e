package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/fakeapi"
)

// startReplica starts another relay replica sharing w's PostgreSQL
// database and PKI, and returns its address.
func (w *world) startReplica(name string) (string, *proc) {
	w.t.Helper()
	return w.startReplicaOf(bin(w.t, "betcode-relay"), name)
}

// startReplicaOf is startReplica running the betcode-relay at path
// (another release's).
func (w *world) startReplicaOf(path, name string) (string, *proc) {
	w.t.Helper()
	addr := freePort(w.t)
	args := append(serveArgs(w.pki, addr, w.t.TempDir()), "--advertise-addr", addr, "--database-url", w.dbURL)
	if w.front != "" {
		args = append(args, "--front", w.front)
	}
	p := start(w.t, name, nil, path, args...)
	p.waitLine(w.t, `relay serving`, 60*time.Second)
	return addr, p
}

// machineStatus is m's status as the relay behind cc reports it, by both
// GetMachine and ListMachines (which must agree).
func machineStatus(t *testing.T, cc *grpc.ClientConn, id string) pb.MachineStatus {
	t.Helper()
	ctx := ctxT(t, 10*time.Second)
	api := pb.NewMachineServiceClient(cc)
	m, err := api.GetMachine(ctx, &pb.GetMachineRequest{MachineId: id})
	if err != nil {
		t.Fatalf("GetMachine(%s): %v", id, err)
	}
	list, err := api.ListMachines(ctx, &pb.ListMachinesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range list.Machines {
		if l.Id == id && l.Status != m.Status {
			t.Fatalf("ListMachines says %s, GetMachine %s", l.Status, m.Status)
		}
	}
	return m.Status
}

// TestReplicasServeMachinesOfOtherReplicas runs two relay replicas on one
// PostgreSQL database: the agent dials relay A, the client talks to relay B
// only, and B serves it as if the tunnel were its own.
func TestReplicasServeMachinesOfOtherReplicas(t *testing.T) {
	w := newWorldOf(t, &world{t: t, pki: t.TempDir(), dataDir: t.TempDir(), dbURL: pgURL(t), advertise: true})
	bAddr, _ := w.startReplica("relay B")
	m1 := w.startAgent("m1", w.addr)
	ccA, ccB := w.client(), w.clientTo(bAddr)
	ctx := ctxT(t, 180*time.Second)

	if st := machineStatus(t, ccB, "m1"); st != pb.MachineStatus_ONLINE {
		t.Fatalf("m1 through B is %s; want ONLINE", st)
	}
	if v, err := pb.NewVersionServiceClient(ccB).GetVersion(onMachine(ctx, "m1"), &pb.GetVersionRequest{}); err != nil || v.ServerVersion == "" {
		t.Fatalf("GetVersion through B = %v, %v", v, err)
	}

	// A whole turn with a tool call, bidi through B and A, on the machine
	// selected through B.
	if _, err := pb.NewMachineServiceClient(ccB).SwitchMachine(ctx, &pb.SwitchMachineRequest{MachineId: "m1"}); err != nil {
		t.Fatal(err)
	}
	agentB := pb.NewAgentServiceClient(ccB)
	s, err := agentB.Converse(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s.Send(&pb.AgentRequest{Request: &pb.AgentRequest_Start{Start: &pb.StartConversation{WorkingDirectory: m1.project, AllowedTools: []string{"Bash"}}}})
	s.Send(&pb.AgentRequest{Request: &pb.AgentRequest_Message{Message: &pb.UserMessage{Content: "please RUNTOOL"}}})
	evs := recvUntil(t, s, isTurnComplete)
	checkSeq(t, evs)
	if !strings.Contains(textOf(evs), "Tool result received: done") {
		t.Fatalf("text = %q", textOf(evs))
	}
	if _, err := os.Stat(filepath.Join(m1.project, "created-by-tool.txt")); err != nil {
		t.Fatalf("the tool did not run on m1: %v", err)
	}
	s.CloseSend()
	session := sessionOf(t, evs)

	// Forwarding headers from a client without a relay certificate are
	// dropped: they neither change the user (mallory has no m1: the call
	// would be NOT_FOUND) nor stop B from forwarding (a forwarded call
	// for a machine elsewhere would be MACHINE_OFFLINE).
	for _, tc := range []struct {
		name string
		cc   *grpc.ClientConn
	}{{"through B", ccB}, {"at A", ccA}} {
		t.Run("spoofed forwarding headers "+tc.name, func(t *testing.T) {
			spoofed := metadata.AppendToOutgoingContext(onMachine(ctx, "m1"),
				"x-betcode-forwarded-by", bAddr, "x-betcode-user", "mallory")
			l, err := pb.NewAgentServiceClient(tc.cc).ListSessions(spoofed, &pb.ListSessionsRequest{})
			if err != nil || l.Total != 1 {
				t.Fatalf("ListSessions with spoofed headers = %v, %v (%s); want m1's one session", l, err, errDetails(err))
			}
		})
	}

	// The agent stops: B reports it OFFLINE and fails calls fast, but
	// buffers QueueMessage in the shared store...
	m1.proc.stop()
	w.relay.waitLine(t, `tunnel: machine offline`, 30*time.Second)
	if st := machineStatus(t, ccB, "m1"); st != pb.MachineStatus_OFFLINE {
		t.Fatalf("m1 through B after the agent stopped is %s; want OFFLINE", st)
	}
	if _, err := agentB.ListSessions(ctx, &pb.ListSessionsRequest{}); status.Code(err) != codes.Unavailable || !strings.Contains(errDetails(err), "MACHINE_OFFLINE") {
		t.Fatalf("call through B for the stopped machine: %v %s", err, errDetails(err))
	}
	if r, err := agentB.QueueMessage(ctx, &pb.QueueMessageRequest{SessionId: session, IdempotencyKey: "k1",
		Message: &pb.UserMessage{Content: "queued through B"}}); err != nil || !r.Buffered {
		t.Fatalf("QueueMessage through B = %v, %v", r, err)
	}
	// ...which A delivers when the agent comes back to A.
	m1.restart(w)
	if _, err := w.api.Wait(ctx, func(rs []fakeapi.Request) bool {
		return strings.Contains(strings.Join(promptLines(rs), "|"), "queued through B")
	}); err != nil {
		t.Fatalf("waiting for the message buffered through B: %v (prompts %q)", err, promptLines(w.api.Requests()))
	}
	if st := machineStatus(t, ccB, "m1"); st != pb.MachineStatus_ONLINE {
		t.Fatalf("m1 through B after the agent came back is %s; want ONLINE", st)
	}

	// Relay A dies without clearing its record: B cannot reach it, so the
	// machine is offline there at once, and listed OFFLINE once the
	// record is older than three heartbeats.
	w.relay.kill()
	if _, err := agentB.ListSessions(ctx, &pb.ListSessionsRequest{}); status.Code(err) != codes.Unavailable || !strings.Contains(errDetails(err), "MACHINE_OFFLINE") {
		t.Fatalf("call through B for a machine of a dead replica: %v %s", err, errDetails(err))
	}
	// The record expires three heartbeat intervals (3 s here) after the
	// last heartbeat A recorded: that instant is what is under test, so
	// wait for it (plus a margin for the two processes' reads), then look.
	m, err := pb.NewMachineServiceClient(ccB).GetMachine(ctx, &pb.GetMachineRequest{MachineId: "m1"})
	if err != nil {
		t.Fatal(err)
	}
	expires := m.GetLastSeen().AsTime().Add(3 * time.Second)
	timer := time.NewTimer(time.Until(expires) + 250*time.Millisecond)
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
	if st := machineStatus(t, ccB, "m1"); st != pb.MachineStatus_OFFLINE {
		t.Fatalf("m1 of the dead replica A is %s through B after its record expired (last seen %s); want OFFLINE", st, m.GetLastSeen().AsTime().Format(time.RFC3339Nano))
	}
}
