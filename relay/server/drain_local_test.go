package server

import (
	"context"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"
	rpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// heldMachines is a MachineService whose ListMachines waits for release:
// a relay-served call under way when the drain starts.
type heldMachines struct {
	pb.UnimplementedMachineServiceServer
	entered chan struct{}
	release chan struct{}
}

func (s *heldMachines) ListMachines(context.Context, *pb.ListMachinesRequest) (*pb.ListMachinesResponse, error) {
	close(s.entered)
	<-s.release
	return &pb.ListMachinesResponse{}, nil
}

func (s *heldMachines) GetMachine(context.Context, *pb.GetMachineRequest) (*pb.Machine, error) {
	return &pb.Machine{}, nil
}

type admins struct {
	pb.UnimplementedAdminServiceServer
}

func (admins) WhoAmI(context.Context, *pb.WhoAmIRequest) (*pb.WhoAmIResponse, error) {
	return &pb.WhoAmIResponse{}, nil
}

// TestDrainRefusesRelayServedCalls checks that the drain treats the
// relay's own services as it treats forwarded calls: a MachineService or
// AdminService call made during the drain is refused UNAVAILABLE /
// RELAY_DRAINING, one under way finishes and holds the drain, and health
// keeps answering, NOT_SERVING.
func TestDrainRefusesRelayServedCalls(t *testing.T) {
	d := newDrain(slog.New(slog.DiscardHandler), prometheus.NewRegistry())
	gs := grpc.NewServer(grpc.ChainUnaryInterceptor(d.unaryInterceptor), grpc.ChainStreamInterceptor(d.streamInterceptor))
	machines := &heldMachines{entered: make(chan struct{}), release: make(chan struct{})}
	pb.RegisterMachineServiceServer(gs, machines)
	pb.RegisterAdminServiceServer(gs, admins{})
	hs := health.NewServer()
	healthpb.RegisterHealthServer(gs, hs)
	reflection.Register(gs)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go gs.Serve(ln)
	t.Cleanup(gs.Stop)
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	machineC, adminC, healthC := pb.NewMachineServiceClient(conn), pb.NewAdminServiceClient(conn), healthpb.NewHealthClient(conn)

	if _, err := adminC.WhoAmI(ctx, &pb.WhoAmIRequest{}); err != nil {
		t.Fatalf("WhoAmI before the drain: %v", err)
	}
	inFlight := make(chan error, 1)
	go func() {
		_, err := machineC.ListMachines(ctx, &pb.ListMachinesRequest{})
		inFlight <- err
	}()
	<-machines.entered

	var mu sync.Mutex
	var got []string
	steps := recordSteps(&mu, &got)
	draining := make(chan struct{}) // run calls notReady once it drains
	steps.notReady = func() { hs.Shutdown(); close(draining) }
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		d.run(ctx, steps)
	}()
	select {
	case <-draining:
	case <-ctx.Done():
		t.Fatal("the drain did not start")
	}

	refused := []struct {
		name string
		call func() error
	}{
		{"MachineService.GetMachine", func() error {
			_, err := machineC.GetMachine(ctx, &pb.GetMachineRequest{MachineId: "m1"})
			return err
		}},
		{"AdminService.WhoAmI", func() error {
			_, err := adminC.WhoAmI(ctx, &pb.WhoAmIRequest{})
			return err
		}},
		{"ServerReflection", func() error {
			s, err := rpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
			if err != nil {
				return err
			}
			s.Send(&rpb.ServerReflectionRequest{MessageRequest: &rpb.ServerReflectionRequest_ListServices{}})
			_, err = s.Recv()
			return err
		}},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.call(); !isDrainingErr(err) {
				t.Fatalf("during the drain: %v; want UNAVAILABLE / RELAY_DRAINING", status.Convert(err).Proto())
			}
		})
	}
	if u, st := testutil.ToFloat64(d.m.refusedUnary), testutil.ToFloat64(d.m.refusedStream); u != 2 || st != 1 {
		t.Errorf("refused calls: unary %v, stream %v; want 2 and 1", u, st)
	}
	resp, err := healthC.Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("health during the drain = %v, %v; want NOT_SERVING", resp.GetStatus(), err)
	}

	select {
	case <-drained:
		t.Fatal("the drain finished while a MachineService call ran")
	case <-time.After(50 * time.Millisecond):
	}
	close(machines.release)
	if err := <-inFlight; err != nil {
		t.Fatalf("the call under way when the drain started: %v; want it to finish", err)
	}
	select {
	case <-drained:
	case <-ctx.Done():
		t.Fatal("the drain did not finish once the MachineService call ended")
	}
}
