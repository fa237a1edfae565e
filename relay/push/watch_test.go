package push

import (
	"context"
	"encoding/json"
	"net"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/betcode-dev/betcode/relay/registry"
	"github.com/betcode-dev/betcode/relay/store"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/conntest"
	"github.com/betcode-dev/betcode/shared/tunnel"
)

// fakeAgent serves WatchSessions: each stream sends the next script, then
// ends with its error or, when that is nil, waits for the client to go
// away. With no script left it answers UNIMPLEMENTED, or, with hold set,
// waits.
type fakeAgent struct {
	pb.UnimplementedAgentServiceServer
	mu      sync.Mutex
	scripts []script
	hold    bool
	ended   chan struct{} // a stream's client went away
}

type script struct {
	updates []*pb.SessionUpdate
	err     error // nil: stay open until the client leaves
}

func (a *fakeAgent) WatchSessions(_ *pb.WatchSessionsRequest, stream grpc.ServerStreamingServer[pb.SessionUpdate]) error {
	a.mu.Lock()
	if len(a.scripts) == 0 {
		hold := a.hold
		a.mu.Unlock()
		if !hold {
			return status.Error(codes.Unimplemented, "no WatchSessions")
		}
		<-stream.Context().Done()
		return nil
	}
	sc := a.scripts[0]
	a.scripts = a.scripts[1:]
	a.mu.Unlock()
	for _, u := range sc.updates {
		if err := stream.Send(u); err != nil {
			return err
		}
	}
	if sc.err != nil {
		return sc.err
	}
	<-stream.Context().Done()
	if a.ended != nil {
		a.ended <- struct{}{}
	}
	return nil
}

// serveAgent runs a on a loopback gRPC server and returns a connection to it.
func serveAgent(t *testing.T, a *fakeAgent) *grpc.ClientConn {
	gs := grpc.NewServer()
	pb.RegisterAgentServiceServer(gs, a)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = gs.Serve(ln)
	}()
	cc, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close(); gs.Stop(); <-served })
	return cc
}

func snapshotDone() *pb.SessionUpdate { return &pb.SessionUpdate{SnapshotDone: true} }

// received collects n push messages as "type/requestId" strings, sorted.
func received(t *testing.T, e *env, n int) []string {
	t.Helper()
	var got []string
	for range n {
		m := e.push.Next(t, 30*time.Second)
		var p Notification
		if err := json.Unmarshal(m.Payload, &p); err != nil {
			t.Fatal(err)
		}
		got = append(got, p.Type+"/"+p.RequestID)
	}
	slices.Sort(got)
	return got
}

// TestWatch follows a machine through a stream that breaks and is
// resumed: the pending prompt of the first snapshot, live prompts and turn
// ends are each notified once, a fatal error and the turn end that follows
// it once, a prompt resolved (gone from the session's open prompts, while
// the stream was down too) is withdrawn once, and an agent without
// WatchSessions ends the watch.
func TestWatch(t *testing.T) {
	backends(t, func(t *testing.T, open opener) {
		e := newEnv(t, open)
		e.subscribe(t, "alice")
		s := session("s1", "alice")
		s2 := session("s2", "")
		pending := permissionEvent(t, 2, "r-old", "Bash", "make")
		live := permissionEvent(t, 3, "r-live", "Edit", "main.go")
		old := permissionEvent(t, 1, "r-ancient", "Bash", "rm -rf build")
		old.Timestamp.Seconds -= int64((8 * 24 * time.Hour).Seconds()) // past the claims' retention
		turn := func(seq uint64, reason string) *pb.AgentEvent {
			return &pb.AgentEvent{Sequence: seq, Event: &pb.AgentEvent_TurnComplete{TurnComplete: &pb.TurnComplete{StopReason: reason}}}
		}
		fatal := &pb.AgentEvent{Sequence: 20, Event: &pb.AgentEvent_Error{Error: &pb.ErrorEvent{Message: "crashed", IsFatal: true}}}
		a := &fakeAgent{scripts: []script{
			{updates: []*pb.SessionUpdate{
				{Session: s, Pending: []*pb.AgentEvent{old, pending}},
				snapshotDone(),
				{Session: s, Cause: live, Pending: []*pb.AgentEvent{pending, live}},
				{Session: s, Cause: &pb.AgentEvent{Event: &pb.AgentEvent_TextDelta{TextDelta: &pb.TextDelta{Text: "x"}}}, Pending: []*pb.AgentEvent{pending, live}},
			}, err: status.Error(codes.Unavailable, "tunnel broke")},
			{updates: []*pb.SessionUpdate{
				// The resumed snapshot repeats the prompt still pending;
				// r-live was answered meanwhile.
				{Session: s, Pending: []*pb.AgentEvent{pending}},
				{Session: s2},
				snapshotDone(),
				{Session: s, Cause: turn(10, "end_turn")}, // r-old went with the turn
				{Session: s2, Cause: fatal},
				{Session: s2, Cause: turn(21, "error")},
				{Session: s, Cause: turn(30, "cancelled")},
			}, err: status.Error(codes.Unavailable, "tunnel broke")},
		}}
		cc := serveAgent(t, a)
		if err := e.svc.Watch(t.Context(), "m1", cc); err != nil {
			t.Fatalf("Watch = %v; want nil once the agent answers UNIMPLEMENTED", err)
		}
		want := []string{"permission_request/r-live", "permission_request/r-old", "resolved/r-live", "resolved/r-old", "turn_complete/", "turn_failed/"}
		if got := received(t, e, len(want)); !slices.Equal(got, want) {
			t.Errorf("notifications = %v; want %v", got, want)
		}
		// Seven deliveries: r-old twice (one suppressed), r-live, their
		// resolutions, the turn end and the fatal error (the error turn
		// end after it, the cancelled turn and the prompt older than the
		// retention are not notified).
		e.waitDelivered(t, 7)
		if len(e.push.Messages()) != 0 || sends(e.svc, KindPermission, OutcomeSuppressed) != 1 {
			t.Errorf("%d more messages, %v suppressed; want none more, the repeated pending prompt suppressed",
				len(e.push.Messages()), sends(e.svc, KindPermission, OutcomeSuppressed))
		}
	})
}

// TestWatchTunnel watches a machine over a real tunnel (each of its
// modes) and stops when the tunnel ends.
func TestWatchTunnel(t *testing.T) {
	for _, mode := range []string{"frames", "http2-native", "http2-handler"} {
		t.Run(mode, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "relay.db")
			e := newEnv(t, func(t *testing.T) store.Store { return openSQLite(t, path) })
			unwatched := make(chan string, 1)
			e.svc.unwatched = func(id string) { unwatched <- id }
			e.subscribe(t, "alice")
			a := &fakeAgent{hold: true, ended: make(chan struct{}, 1), scripts: []script{{updates: []*pb.SessionUpdate{
				snapshotDone(),
				{Session: session("s1", "alice"), Cause: permissionEvent(t, 5, "r1", "Bash", "touch hello.txt")},
			}}}}
			gs := grpc.NewServer()
			pb.RegisterAgentServiceServer(gs, a)
			relayEnd, agentEnd := conntest.TCPPair(t)
			client := tunnel.NewClient(relayEnd, mode != "frames")
			srv := &tunnel.Server{Handler: gs, Remote: "relay"}
			if mode == "http2-native" {
				srv.Native = gs
			}
			served := make(chan struct{})
			go func() {
				defer close(served)
				_ = srv.ServeConn(context.Background(), agentEnd)
			}()
			t.Cleanup(func() { client.Close(); agentEnd.Close(); gs.Stop(); <-served })

			tun := &registry.Tunnel{MachineID: "m1", OwnerID: "alice", Client: client}
			e.svc.WatchTunnel(tun)
			e.svc.WatchTunnel(tun) // again (a heartbeat's delivery): no second watch
			m := e.push.Next(t, 30*time.Second)
			if string(m.Payload) != examplePayload {
				t.Errorf("payload = %s; want %s", m.Payload, examplePayload)
			}
			client.Close()
			select {
			case id := <-unwatched:
				if id != "m1" {
					t.Errorf("unwatched %q; want m1", id)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("the watch did not end with the tunnel")
			}
		})
	}
}
