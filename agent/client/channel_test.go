package client

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/betcode-dev/betcode/agent/internal/testpki"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/e2ee"
)

// movingRelay is a relay whose machine is moving between its replicas: its
// first offline ChannelService.Open calls are answered MACHINE_OFFLINE with
// the relay's retry hint (or none, hint ""), the later ones reach the
// machine, which accepts the channel.
type movingRelay struct {
	pb.UnimplementedChannelServiceServer
	t       *testing.T
	machine e2ee.KeyPair
	offline int
	hint    string

	mu    sync.Mutex
	opens []time.Time
}

func (r *movingRelay) Open(s grpc.BidiStreamingServer[pb.OpenRequest, pb.OpenResponse]) error {
	r.mu.Lock()
	r.opens = append(r.opens, time.Now())
	n := len(r.opens)
	r.mu.Unlock()
	if n <= r.offline {
		return withRetryAfter(r.t, codes.Unavailable, "MACHINE_OFFLINE", r.hint)
	}
	t := &serverTransport{s: s}
	c, err := e2ee.Accept(s.Context(), t, r.machine, "m1", func([]byte, []byte) error { return nil })
	if err != nil {
		return err
	}
	defer c.Close()
	<-s.Context().Done()
	return nil
}

type serverTransport struct {
	s grpc.BidiStreamingServer[pb.OpenRequest, pb.OpenResponse]
}

func (t *serverTransport) Send(b []byte) error { return t.s.Send(&pb.OpenResponse{Data: b}) }
func (t *serverTransport) Recv() ([]byte, error) {
	m, err := t.s.Recv()
	return m.GetData(), err
}
func (t *serverTransport) Close() error { return nil }

// serveMovingRelay serves r over TLS and returns the pairing that reaches
// its machine.
func serveMovingRelay(t *testing.T, r *movingRelay) Channel {
	t.Helper()
	ca := testpki.NewCA(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.Creds(credentials.NewTLS(ca.ServerTLS(t))))
	pb.RegisterChannelServiceServer(srv, r)
	served := make(chan struct{})
	go func() {
		defer close(served)
		srv.Serve(ln)
	}()
	t.Cleanup(func() { srv.Stop(); <-served })
	device, err := e2ee.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	return Channel{Device: device, Name: "test", Pairing: Pairing{MachineID: "m1", Relay: ln.Addr().String(),
		RelayCA: ca.WriteCA(t, t.TempDir()), Token: "bct_device", MachineKey: r.machine.Public}}
}

// TestDialChannelWaitsForAMovingMachine: a channel to a machine moving
// between relay replicas opens once the machine is back, the dial trying
// again after the 100 ms the relay asks each time, instead of failing (the
// gRPC connection over it would then wait its own backoff, up to 2 s, and
// the machine's clients with it).
func TestDialChannelWaitsForAMovingMachine(t *testing.T) {
	machine, err := e2ee.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	r := &movingRelay{t: t, machine: machine, offline: 3, hint: "100"}
	ch := serveMovingRelay(t, r)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	c, err := DialChannel(ctx, ch)
	if err != nil {
		t.Fatalf("DialChannel to a machine back after 3 refusals: %v", err)
	}
	c.Close()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.opens) != 4 {
		t.Fatalf("%d Open calls, want 4 (3 refused, then the channel)", len(r.opens))
	}
	for i := 1; i < len(r.opens); i++ {
		if gap := r.opens[i].Sub(r.opens[i-1]); gap < 100*time.Millisecond {
			t.Errorf("try %d came %v after the one before, sooner than the 100 ms the relay asked", i+1, gap)
		}
	}
}

// TestDialChannelFailsWithoutAHint: an offline machine the relay gives no
// hint for fails the dial at once, with the relay's error.
func TestDialChannelFailsWithoutAHint(t *testing.T) {
	machine, err := e2ee.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	r := &movingRelay{t: t, machine: machine, offline: 1}
	ch := serveMovingRelay(t, r)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	_, err = DialChannel(ctx, ch)
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("DialChannel to an offline machine: %v, want the relay's UNAVAILABLE", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.opens) != 1 {
		t.Fatalf("%d Open calls, want 1", len(r.opens))
	}
}
