package tunnelsvc

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/betcode-dev/betcode/relay/pki"
	"github.com/betcode-dev/betcode/relay/registry"
	"github.com/betcode-dev/betcode/relay/store"
	"github.com/betcode-dev/betcode/relay/store/sqlite"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/tunnel"
)

// machineCtx is the context of a call from machine id over mTLS, with a
// development certificate that names no owner.
func machineCtx(t *testing.T, id string) context.Context {
	t.Helper()
	return machineCtxOwned(t, id, "")
}

// TestHeartbeatRecordsReplicaAndDelivers: on the replica holding the
// tunnel a heartbeat re-records the replica and, when messages wait (maybe
// buffered by another replica), starts a delivery; elsewhere it only
// records last_seen.
func TestHeartbeatRecordsReplicaAndDelivers(t *testing.T) {
	ctx := machineCtx(t, "m1")
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "relay.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.UpsertMachine(ctx, store.Machine{ID: "m1", OwnerID: "alice"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.Enqueue(ctx, store.Message{MachineID: "m1", OwnerID: "alice", IdempotencyKey: "k",
		Service: "betcode.v1.AgentService", Method: "QueueMessage", Payload: []byte("x")}, store.Limits{}); err != nil {
		t.Fatal(err)
	}
	delivered := make(chan *registry.Tunnel, 1)
	reg := registry.New()
	svc := &Service{Store: st, Registry: reg, Log: slog.New(slog.DiscardHandler), HeartbeatInterval: time.Second, Replica: "10.0.0.1:8443",
		OnOnline: func(_ context.Context, t *registry.Tunnel) { delivered <- t }}

	// No tunnel here: last_seen only.
	resp, err := svc.Heartbeat(ctx, &pb.HeartbeatRequest{})
	if err != nil || resp.BufferedMessages != 1 {
		t.Fatalf("Heartbeat = %v, %v; want 1 buffered", resp, err)
	}
	if m, _ := st.GetMachine(ctx, "m1"); m.Replica != "" {
		t.Fatalf("heartbeat without a tunnel here recorded replica %q", m.Replica)
	}

	// The tunnel is here: the replica is recorded and delivery starts.
	c1, c2 := net.Pipe()
	defer c2.Close()
	tun := &registry.Tunnel{MachineID: "m1", OwnerID: "alice", Client: tunnel.NewClient(c1, true)}
	defer tun.Client.Close()
	reg.Add(tun)
	if _, err := svc.Heartbeat(ctx, &pb.HeartbeatRequest{}); err != nil {
		t.Fatal(err)
	}
	if m, _ := st.GetMachine(ctx, "m1"); m.Replica != "10.0.0.1:8443" {
		t.Fatalf("Replica after a heartbeat on the tunnel's replica = %q", m.Replica)
	}
	select {
	case got := <-delivered:
		if got != tun {
			t.Fatalf("delivery for %+v; want the local tunnel", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no delivery started by the heartbeat")
	}
}

// machineCtxOwned is machineCtx for a development certificate naming owner.
func machineCtxOwned(t *testing.T, id, owner string) context.Context {
	t.Helper()
	dir := t.TempDir()
	if _, err := pki.Init(dir, []string{"localhost"}, pki.Options{}); err != nil {
		t.Fatal(err)
	}
	if _, err := pki.IssueMachine(dir, id, pki.Options{Owner: owner}); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, pki.MachineCertFile(id)))
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(data)
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	state := tls.ConnectionState{PeerCertificates: []*x509.Certificate{cert}, VerifiedChains: [][]*x509.Certificate{{cert}}}
	return peer.NewContext(t.Context(), &peer.Peer{Addr: tunnel.Addr("agent"), AuthInfo: credentials.TLSInfo{State: state}})
}

// TestRegisterOwnership: an enrolled machine keeps its recorded owner; a
// development certificate's owner must exist; a certificate with no owner
// for an unknown machine, a revoked machine, and an owner that differs
// from the record are refused PERMISSION_DENIED.
func TestRegisterOwnership(t *testing.T) {
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "relay.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := t.Context()
	for _, u := range []string{"alice", "bob"} {
		if err := st.CreateUser(ctx, store.User{ID: u}); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.CreateTeam(ctx, store.Team{ID: "eng"}); err != nil {
		t.Fatal(err)
	}
	if err := st.UpsertMachine(ctx, store.Machine{ID: "enrolled", OwnerID: "bob", TeamID: "eng"}); err != nil {
		t.Fatal(err)
	}
	if err := st.UpsertMachine(ctx, store.Machine{ID: "gone", OwnerID: "alice"}); err != nil {
		t.Fatal(err)
	}
	if err := st.RevokeMachine(ctx, "gone", time.Now()); err != nil {
		t.Fatal(err)
	}
	metrics := NewMetrics(prometheus.NewRegistry())
	svc := &Service{Store: st, Registry: registry.New(), Log: slog.New(slog.DiscardHandler), HeartbeatInterval: time.Second, Metrics: metrics}
	tests := []struct {
		id, certOwner   string
		wantOwner, team string
		wantErr         string
	}{
		{"dev", "user:alice", "alice", "", ""},
		{"devteam", "team:eng", "", "eng", ""},
		{"enrolled", "", "bob", "eng", ""},
		{"orphan", "", "", "", "not enrolled"},
		{"ghost", "user:nobody", "", "", `names user "nobody"`},
		{"noteam", "team:nope", "", "", `names team "nope"`},
		{"gone", "user:alice", "", "", "revoked"},
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			_, err := svc.Register(machineCtxOwned(t, tt.id, tt.certOwner), &pb.RegisterRequest{MachineId: tt.id})
			if tt.wantErr != "" {
				if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Register = %v; want PERMISSION_DENIED mentioning %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			m, err := st.GetMachine(ctx, tt.id)
			if err != nil || m.OwnerID != tt.wantOwner || m.TeamID != tt.team {
				t.Fatalf("machine = %+v, %v; want owner %q team %q", m, err, tt.wantOwner, tt.team)
			}
		})
	}
	if a, r := testutil.ToFloat64(metrics.accepted), testutil.ToFloat64(metrics.refused); a != 3 || r != 4 {
		t.Errorf("registrations accepted, refused = %v, %v; want 3, 4", a, r)
	}
}
