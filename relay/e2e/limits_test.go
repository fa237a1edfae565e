package e2e

import (
	"crypto/tls"
	"io"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/betcode-dev/betcode/relay/pki"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/mtls"
)

// TestLimitsAndHostileCalls against one relay process: each hostile call
// ends with a clear error while the relay keeps serving a legitimate user —
// an oversized message, a token over its call rate, unknown services and
// methods, and a thousand half-open TLS connections.
func TestLimitsAndHostileCalls(t *testing.T) {
	w := &world{t: t, pki: t.TempDir(), dataDir: t.TempDir(),
		extraArgs: []string{"--max-message-bytes", "65536", "--rate-limit", "0.05", "--rate-burst", "10", "--max-pending-conns", "64", "--handshake-timeout", "2s"}}
	newWorldOf(t, w)
	a := w.startAgent("m1", w.addr)
	ctx := ctxT(t, 120*time.Second)
	alice := pb.NewAgentServiceClient(w.client())

	// An oversized message: RESOURCE_EXHAUSTED / MESSAGE_TOO_LARGE, and
	// the machine never sees it.
	big := strings.Repeat("x", 100<<10)
	_, err := alice.QueueMessage(onMachine(ctx, "m1"), &pb.QueueMessageRequest{SessionId: "s", Message: &pb.UserMessage{Content: big}, IdempotencyKey: "big"})
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(errDetails(err), "MESSAGE_TOO_LARGE") {
		t.Fatalf("oversized message: %v (%s)", err, errDetails(err))
	}
	_ = a

	// Unknown service and method on the machine: UNIMPLEMENTED.
	for _, m := range []string{"/betcode.v1.NoSuchService/Do", "/betcode.v1.AgentService/NoSuchMethod"} {
		err := w.client().Invoke(onMachine(ctx, "m1"), m, &pb.ListSessionsRequest{}, &pb.ListSessionsResponse{})
		wantCode(t, m, err, codes.Unimplemented, "")
	}

	// A thousand connections that never finish TLS (bounded, loopback
	// only): the relay sheds what is over its cap and a user still gets
	// through.
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range 1000 {
		c, err := net.DialTimeout("tcp", w.addr, 5*time.Second)
		if err != nil {
			break // the listen backlog is full: the flood is as big as it gets
		}
		conns = append(conns, c)
	}
	t.Logf("%d half-open connections", len(conns))
	// A new connection takes the slot of a flood connection once that one
	// has waited a quarter of the handshake timeout; until then it is
	// refused and the client (waiting for ready, as the CLI does) retries.
	fresh := pb.NewAgentServiceClient(w.dial(w.addr, w.token("alice")))
	began := time.Now()
	if _, err := fresh.ListSessions(onMachine(ctxT(t, 20*time.Second), "m1"), &pb.ListSessionsRequest{}, grpc.WaitForReady(true)); err != nil {
		t.Fatalf("a user during the flood of half-open connections: %v", err)
	}
	t.Logf("a new user got through the flood in %s", time.Since(began))

	// A connection that finishes TLS but never authenticates a call is
	// closed after the handshake timeout (2s here).
	tcfg, err := mtls.ClientConfig(filepath.Join(w.pki, pki.CACertFile), "", "", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	tcfg.NextProtos = []string{"h2"}
	idle, err := tls.Dial("tcp", w.addr, tcfg)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	idle.SetReadDeadline(time.Now().Add(20 * time.Second))
	opened := time.Now()
	if _, err := io.Copy(io.Discard, idle); err != nil {
		t.Fatalf("an idle unauthenticated connection: %v; want it closed by the relay", err)
	}
	t.Logf("an idle unauthenticated connection was closed after %s", time.Since(opened).Round(time.Millisecond))

	// Over the call rate: RESOURCE_EXHAUSTED / RATE_LIMITED with
	// (one call in 20 s: on a loaded machine a rate of 5/s refilled a token
	// between the limited call and the Converse below, which then waited
	// for events until the test's deadline)
	// retry_after_ms (a Converse stream also gets it as an ErrorEvent);
	// another token of the same user is not affected.
	var limited error
	for range 30 {
		if _, err := alice.ListSessions(onMachine(ctx, "m1"), &pb.ListSessionsRequest{}); err != nil {
			limited = err
			break
		}
	}
	if status.Code(limited) != codes.ResourceExhausted || !strings.Contains(errDetails(limited), "RATE_LIMITED") || !strings.Contains(errDetails(limited), "retry_after_ms") {
		t.Fatalf("over the rate: %v (%s)", limited, errDetails(limited))
	}
	s, err := alice.Converse(onMachine(ctx, "m1"))
	if err == nil {
		var ev *pb.AgentEvent
		if ev, err = s.Recv(); err == nil {
			if ev.GetError().GetCode() != "RATE_LIMITED" || ev.GetError().GetDetails()["retry_after_ms"] == "" {
				t.Fatalf("first event of a rate-limited Converse = %v", ev)
			}
			_, err = s.Recv()
		}
	}
	wantCode(t, "rate-limited Converse", err, codes.ResourceExhausted, "")
	if _, err := pb.NewMachineServiceClient(w.dial(w.addr, w.token("alice"))).ListMachines(ctx, &pb.ListMachinesRequest{}); err != nil {
		t.Fatalf("another token while the first is limited: %v", err)
	}
}
