package tunnelsvc

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/betcode-dev/betcode/relay/registry"
	"github.com/betcode-dev/betcode/relay/store"
	"github.com/betcode-dev/betcode/relay/store/sqlite"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/tunnel"
)

// flakyStore fails SetMachineReplica its first failures calls, as
// PostgreSQL does while it restarts, and tells calls about each one; and
// its reads and registrations while down is above zero (each failing
// call takes one from it; -1: always).
type flakyStore struct {
	store.Store
	failures int64
	n        atomic.Int64
	calls    chan error
	down     atomic.Int64
}

var errRestarting = errors.New("FATAL: the database system is shutting down (SQLSTATE 57P03)")

func (s *flakyStore) fail() bool {
	switch d := s.down.Load(); {
	case d < 0:
		return true
	case d == 0:
		return false
	}
	return s.down.Add(-1) >= 0
}

func (s *flakyStore) GetMachine(ctx context.Context, id string) (store.Machine, error) {
	if s.fail() {
		return store.Machine{}, errRestarting
	}
	return s.Store.GetMachine(ctx, id)
}

func (s *flakyStore) UpsertMachine(ctx context.Context, m store.Machine) error {
	if s.fail() {
		return errRestarting
	}
	return s.Store.UpsertMachine(ctx, m)
}

func (s *flakyStore) SetMachineReplica(ctx context.Context, id, replica string, at time.Time) error {
	var err error
	if s.n.Add(1) <= s.failures {
		err = errRestarting
	} else {
		err = s.Store.SetMachineReplica(ctx, id, replica, at)
	}
	select {
	case s.calls <- err:
	default:
	}
	return err
}

// tunnelStream is an OpenTunnel stream whose agent sends nothing until
// its context ends.
type tunnelStream struct {
	ctx context.Context
}

func (s *tunnelStream) Send(*pb.TunnelFrame) error { return s.ctx.Err() }
func (s *tunnelStream) Recv() (*pb.TunnelFrame, error) {
	<-s.ctx.Done()
	return nil, io.EOF
}
func (s *tunnelStream) SetHeader(metadata.MD) error  { return nil }
func (s *tunnelStream) SendHeader(metadata.MD) error { return nil }
func (s *tunnelStream) SetTrailer(metadata.MD)       {}
func (s *tunnelStream) Context() context.Context     { return s.ctx }
func (s *tunnelStream) SendMsg(any) error            { return s.ctx.Err() }
func (s *tunnelStream) RecvMsg(any) error {
	<-s.ctx.Done()
	return io.EOF
}

// newTunnel is a tunnel of machine m1 over a pipe nobody answers.
func newTunnel(t *testing.T) *registry.Tunnel {
	c1, c2 := net.Pipe()
	tun := &registry.Tunnel{MachineID: "m1", OwnerID: "alice", Client: tunnel.NewClient(c1, true)}
	t.Cleanup(func() { tun.Client.Close(); c2.Close() })
	return tun
}

func openFlaky(t *testing.T, failures int64) (*flakyStore, context.Context) {
	t.Helper()
	ctx := machineCtx(t, "m1")
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "relay.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.UpsertMachine(ctx, store.Machine{ID: "m1", OwnerID: "alice", Capabilities: []string{tunnel.CapabilityHTTP2}}); err != nil {
		t.Fatal(err)
	}
	return &flakyStore{Store: st, failures: failures, calls: make(chan error, 16)}, ctx
}

// TestOpenTunnelRecordsTheReplicaAfterAStoreFailure: a tunnel opened while
// PostgreSQL restarts could not record its replica, and clients of other
// replicas found the machine offline until its next heartbeat, up to 30 s
// later (the chaos soak: 24 s). The replica now tries again within a
// moment, until the store takes it.
func TestOpenTunnelRecordsTheReplicaAfterAStoreFailure(t *testing.T) {
	st, ctx := openFlaky(t, 3)
	svc := &Service{Store: st, Registry: registry.New(), Log: slog.New(slog.DiscardHandler), HeartbeatInterval: time.Minute,
		Replica: "10.0.0.1:8443", RetryFirst: time.Millisecond}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- svc.OpenTunnel(&tunnelStream{ctx: ctx}) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("OpenTunnel: %v", err)
		}
	}()
	deadline := time.After(10 * time.Second)
	for tries := 1; ; tries++ {
		select {
		case err := <-st.calls:
			if err == nil {
				if tries != 4 {
					t.Errorf("recorded at try %d, want 4 (3 failures)", tries)
				}
				if m, _ := st.GetMachine(ctx, "m1"); m.Replica != "10.0.0.1:8443" {
					t.Fatalf("the machine's replica is %q after the store took it, want 10.0.0.1:8443", m.Replica)
				}
				return
			}
		case <-deadline:
			t.Fatalf("the replica was not recorded within 10 s of the store coming back (%d tries)", st.n.Load())
		}
	}
}

// TestRecordReplicaStopsWhenNotOurs: the retry stops without writing once
// the replica drains (its agents are moving: writing would send other
// replicas' clients back here) or the tunnel is no longer the machine's
// one here.
func TestRecordReplicaStopsWhenNotOurs(t *testing.T) {
	for _, tc := range []struct {
		name     string
		draining bool
		replaced bool
	}{
		{"draining", true, false},
		{"tunnel replaced", false, true},
		{"tunnel closed", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, ctx := openFlaky(t, 0)
			reg := registry.New()
			svc := &Service{Store: st, Registry: reg, Log: slog.New(slog.DiscardHandler), Replica: "10.0.0.1:8443",
				RetryFirst: time.Millisecond, Draining: func() bool { return tc.draining }}
			tun := newTunnel(t)
			if tc.draining {
				reg.Add(tun)
			}
			if tc.replaced {
				reg.Add(newTunnel(t))
			}
			svc.recordReplica(ctx, tun) // returns: nothing to retry
			if n := st.n.Load(); n != 0 {
				t.Errorf("%d writes of the replica, want none", n)
			}
		})
	}
}

// TestRegistrationOutlastsAStoreRestart: an agent that registers and opens
// its tunnel while PostgreSQL restarts gets through, rather than a failure
// that sends it onto its backoff (or, from OpenTunnel, "must Register
// first", which the chaos soak showed); a store that stays down is
// reported as the store's failure, retryable, not as the agent's fault.
func TestRegistrationOutlastsAStoreRestart(t *testing.T) {
	st, ctx := openFlaky(t, 0)
	online := make(chan *registry.Tunnel, 1)
	svc := &Service{Store: st, Registry: registry.New(), Log: slog.New(slog.DiscardHandler), HeartbeatInterval: time.Minute,
		RetryFirst: time.Millisecond, OnOnline: func(_ context.Context, t *registry.Tunnel) { online <- t }}
	req := &pb.RegisterRequest{MachineName: "laptop", Capabilities: []string{tunnel.CapabilityHTTP2}}

	st.down.Store(4) // two reads and two writes fail, then it is back
	resp, err := svc.Register(ctx, req)
	if err != nil || !resp.Accepted {
		t.Fatalf("Register during a store restart = %v, %v; want accepted", resp, err)
	}
	st.down.Store(2)
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- svc.OpenTunnel(&tunnelStream{ctx: sctx}) }()
	select {
	case <-online:
	case err := <-done:
		t.Fatalf("OpenTunnel during a store restart: %v", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("OpenTunnel during a store restart: %v", err)
	}

	st.down.Store(-1) // down for good
	if _, err := svc.Register(ctx, req); status.Code(err) != codes.Internal {
		t.Errorf("Register with the store down answered %v, want INTERNAL (the store's failure)", err)
	}
	err = svc.OpenTunnel(&tunnelStream{ctx: ctx})
	if status.Code(err) != codes.Unavailable || strings.Contains(err.Error(), "must Register") {
		t.Errorf("OpenTunnel with the store down answered %v, want UNAVAILABLE, not \"must Register\"", err)
	}
}
