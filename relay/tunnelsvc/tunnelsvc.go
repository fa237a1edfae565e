// Package tunnelsvc implements TunnelService: agents register, send
// heartbeats and open the tunnel that carries their clients' calls. The
// machine id always comes from the agent's verified client certificate,
// never from the request body alone.
package tunnelsvc

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/betcode-dev/betcode/relay/registry"
	"github.com/betcode-dev/betcode/relay/store"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/mtls"
	"github.com/betcode-dev/betcode/shared/tunnel"
)

// Service implements TunnelService.
type Service struct {
	pb.UnimplementedTunnelServiceServer
	Store             store.Store
	Registry          *registry.Registry
	Log               *slog.Logger
	HeartbeatInterval time.Duration
	// OnOnline, if set, runs (in its own goroutine) when a machine's
	// tunnel is up, e.g. to deliver its buffered requests.
	OnOnline func(ctx context.Context, t *registry.Tunnel)
	// Replica is this replica's advertised address, recorded in the store
	// as the holder of each tunnel while it is up so that other replicas
	// forward to it. Empty (a single replica) records nothing.
	Replica string
	Now     func() time.Time
	// Revoked, if set, reports whether a machine id was revoked; such a
	// machine may not register or open a tunnel.
	Revoked func(machineID string) bool
	// Audit, if set, records security events.
	Audit func(store.AuditEvent)
	// Metrics, if set, counts registrations, tunnels and heartbeat lag.
	Metrics *Metrics
	// Engine makes agents' direct connections carry calls on the relay's
	// own HTTP/2 client (tunnel.Client.UseEngine; --front=engine).
	Engine bool
	// Push, if set, delivers machines' own encrypted push messages
	// (SendPush); PushRate and PushBurst bound them per machine (defaults
	// DefaultPushRate, DefaultPushBurst).
	Push      Pusher
	PushRate  rate.Limit
	PushBurst int
	// MinAgentVersion is the oldest agent version that may register
	// (default DefaultMinAgentVersion(); "none" serves every version);
	// older agents are refused with CodeAgentTooOld.
	MinAgentVersion string
	// Version is the relay's own version; a refused agent is told to
	// install it when it is a release.
	Version string
	// Draining, if set, reports whether the replica drains: its agents are
	// moving to other replicas, so it no longer records itself as theirs.
	Draining func() bool
	// RetryFirst is the first wait before a failed store call is tried
	// again: recording the replica (default 100 ms, growing to 2 s, for one
	// HeartbeatInterval; the heartbeats record it after that) and
	// registration's reads and writes (default 50 ms, storeCall).
	RetryFirst time.Duration

	heartbeatDeliveries sync.Map // machine id -> struct{}: a delivery started by a heartbeat runs
	issuing             sync.Map // machine id -> *sync.Mutex: pairing.go's limits, one machine's calls at a time
	pushLimits          sync.Map // machine id -> *rate.Limiter: push.go's SendPush rate
}

func (s *Service) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// machineID returns the id in the caller's verified certificate.
func (s *Service) machineID(ctx context.Context) (string, error) {
	id, err := mtls.MachineIDFromPeer(ctx)
	if err != nil {
		addr := ""
		if p, ok := peer.FromContext(ctx); ok {
			addr = p.Addr.String()
		}
		s.Log.Warn("tunnel: refusing a caller without a valid machine certificate", "remote", addr, "err", err)
		return "", status.Error(codes.Unauthenticated, "a machine client certificate signed by the relay's CA is required: "+err.Error())
	}
	return id, nil
}

// Register records the machine and answers the heartbeat interval. An
// enrolled machine keeps the owner recorded at enrollment; a machine with a
// development certificate is owned by the user or team its certificate
// names (betcode-relay certs machine --owner). A machine with neither, or
// a revoked one, is refused.
func (s *Service) Register(ctx context.Context, req *pb.RegisterRequest) (*pb.RegisterResponse, error) {
	resp, err := s.register(ctx, req)
	s.Metrics.registered(err, status.Code(err) == codes.PermissionDenied || status.Code(err) == codes.Unauthenticated)
	return resp, err
}

func (s *Service) register(ctx context.Context, req *pb.RegisterRequest) (*pb.RegisterResponse, error) {
	id, err := s.machineID(ctx)
	if err != nil {
		return nil, err
	}
	if req.MachineId != "" && req.MachineId != id {
		s.audit(ctx, id, "machine.refused", "denied", fmt.Sprintf("Register names machine %q", req.MachineId))
		return nil, status.Errorf(codes.PermissionDenied, "machine_id %q does not match the certificate's %q", req.MachineId, id)
	}
	if s.Revoked != nil && s.Revoked(id) {
		s.audit(ctx, id, "machine.refused", "denied", "revoked")
		return nil, status.Errorf(codes.PermissionDenied, "machine %q was revoked", id)
	}
	if err := s.agentTooOld(ctx, req.GetInfo().GetVersion()); err != nil {
		s.audit(ctx, id, "machine.refused", "denied", "agent "+req.GetInfo().GetVersion()+" is older than the relay's minimum")
		s.Log.Warn("tunnel: refusing an agent older than --min-agent-version", "machine_id", id, "agent_version", req.GetInfo().GetVersion())
		return nil, err
	}
	owner, team, err := s.owner(ctx, id)
	if err != nil {
		return nil, err
	}
	m := store.Machine{ID: id, OwnerID: owner, TeamID: team, Name: req.MachineName, Capabilities: req.Capabilities, LastSeen: s.now()}
	if m.Name == "" {
		m.Name = id
	}
	if info := req.Info; info != nil {
		m.OS, m.Arch, m.Version, m.CPUCores, m.MemoryBytes = info.Os, info.Arch, info.Version, info.CpuCores, info.MemoryBytes
	}
	if err := s.storeCall(ctx, func() error { return s.Store.UpsertMachine(ctx, m) }); err != nil {
		switch {
		case errors.Is(err, store.ErrConflict):
			s.audit(ctx, id, "machine.refused", "denied", "certificate owner differs from the registered owner")
			return nil, status.Errorf(codes.PermissionDenied, "machine %q is registered to another owner", id)
		case errors.Is(err, store.ErrRevoked):
			s.audit(ctx, id, "machine.refused", "denied", "revoked")
			return nil, status.Errorf(codes.PermissionDenied, "machine %q was revoked", id)
		}
		return nil, status.Errorf(codes.Internal, "register machine: %v", err)
	}
	s.Log.Info("tunnel: machine registered", "machine_id", id, "name", m.Name, "owner", owner, "team", team)
	return &pb.RegisterResponse{Accepted: true, Message: "registered as " + id, HeartbeatIntervalSecs: uint32(s.HeartbeatInterval / time.Second)}, nil
}

// owner returns the machine's owning user and team: the store's record for
// an enrolled machine, else its certificate's owner.
func (s *Service) owner(ctx context.Context, id string) (owner, team string, err error) {
	var m store.Machine
	err = s.storeCall(ctx, func() (err error) { m, err = s.Store.GetMachine(ctx, id); return err })
	if err == nil {
		return m.OwnerID, m.TeamID, nil
	}
	if !errors.Is(err, store.ErrNotFound) {
		return "", "", status.Errorf(codes.Internal, "look up machine: %v", err)
	}
	o, ok, err := mtls.MachineOwnerFromPeer(ctx)
	if err != nil {
		return "", "", status.Errorf(codes.PermissionDenied, "machine certificate: %v", err)
	}
	if !ok {
		s.audit(ctx, id, "machine.refused", "denied", "not enrolled and no owner in its certificate")
		return "", "", status.Errorf(codes.PermissionDenied, "machine %q is not enrolled: enroll it with a join token (betcode-agent enroll) or issue its certificate with an owner (betcode-relay certs machine --owner user:NAME)", id)
	}
	switch o.Kind {
	case mtls.OwnerTeam:
		if err := s.storeCall(ctx, func() error { _, err := s.Store.GetTeam(ctx, o.Name); return err }); err != nil {
			return "", "", status.Errorf(codes.PermissionDenied, "machine %q: its certificate names team %q, which this relay does not have", id, o.Name)
		}
		return "", o.Name, nil
	default:
		if err := s.storeCall(ctx, func() error { _, err := s.Store.GetUser(ctx, o.Name); return err }); err != nil {
			return "", "", status.Errorf(codes.PermissionDenied, "machine %q: its certificate names user %q, who does not exist on this relay", id, o.Name)
		}
		return o.Name, "", nil
	}
}

// audit records a security event about machine id.
func (s *Service) audit(ctx context.Context, id, action, outcome, detail string) {
	if s.Audit == nil {
		return
	}
	remote := ""
	if p, ok := peer.FromContext(ctx); ok {
		remote = p.Addr.String()
	}
	s.Audit(store.AuditEvent{Actor: "machine:" + id, Action: action, Target: id, Remote: remote, Outcome: outcome, Detail: detail})
}

// Heartbeat records liveness and says how many requests wait in the buffer.
func (s *Service) Heartbeat(ctx context.Context, req *pb.HeartbeatRequest) (*pb.HeartbeatResponse, error) {
	id, err := s.machineID(ctx)
	if err != nil {
		return nil, err
	}
	now := s.now()
	if sent := req.GetSentAt(); sent != nil {
		s.Metrics.heartbeat(now.Sub(sent.AsTime()))
	}
	t := s.Registry.Get(id)
	if t != nil && s.Replica != "" {
		// Re-asserts this replica as the tunnel's holder along with
		// last_seen, in one statement.
		err = s.Store.SetMachineReplica(ctx, id, s.Replica, now)
	} else {
		err = s.Store.TouchMachine(ctx, id, now)
	}
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, status.Errorf(codes.Internal, "heartbeat: %v", err)
	}
	n, _, err := s.Store.Counts(ctx, id)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "heartbeat: %v", err)
	}
	if n > 0 && t != nil && s.OnOnline != nil {
		// Another replica may have buffered these while the machine was
		// connecting here: deliver them now (Deliver runs one at a time
		// per machine, so this never races the delivery at connect).
		if _, running := s.heartbeatDeliveries.LoadOrStore(id, struct{}{}); !running {
			go func() {
				defer s.heartbeatDeliveries.Delete(id)
				s.deliver(t)
			}()
		}
	}
	return &pb.HeartbeatResponse{ReceivedAt: timestamppb.New(now), BufferedMessages: uint32(n)}, nil
}

// Detacher is an OpenTunnel stream whose call can outlive OpenTunnel
// (relay/internal/grpcstream on the relay's own HTTP/2 server): Detach
// returns the function that ends the call with a status, once; ok is false
// when the stream cannot.
type Detacher interface {
	Detach() (end func(error), ok bool)
}

// OpenTunnel carries the machine's tunnel (HTTP/2 or a yamux session, the relay
// the client, started with the first call) until either side ends it.
//
// A stream that can detach (Detacher) is left to the tunnel: OpenTunnel
// returns once the tunnel is set up, and the tunnel's end (its stream's
// context: the connection's end, or the tunnel closed, which cancels it)
// records the machine offline and ends the call. An idle tunnel then holds
// no goroutine here. Otherwise the setup (store lookup, registry, logging)
// runs in a short-lived goroutine, and this one waits for the tunnel's
// whole life on a stack that never grew past its first 4 KiB (Go shrinks a
// stack only by halves, never below twice what it uses).
func (s *Service) OpenTunnel(stream pb.TunnelService_OpenTunnelServer) error {
	if d, ok := stream.(Detacher); ok {
		t, ctx, cancel, err := s.openTunnel(stream)
		if err != nil {
			return err
		}
		if end, ok := d.Detach(); ok {
			context.AfterFunc(ctx, func() {
				s.closeTunnel(ctx, t)
				end(nil)
			})
			return nil
		}
		defer cancel()
		return s.waitTunnel(ctx, t)
	}
	var (
		t      *registry.Tunnel
		ctx    context.Context
		cancel context.CancelFunc
		err    error
	)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t, ctx, cancel, err = s.openTunnel(stream)
	}()
	<-done
	if err != nil {
		return err
	}
	defer cancel()
	return s.waitTunnel(ctx, t)
}

// waitTunnel waits for t's end and records the machine offline.
func (s *Service) waitTunnel(ctx context.Context, t *registry.Tunnel) error {
	select {
	case <-ctx.Done():
	case <-t.Client.Done():
	}
	s.closeTunnel(ctx, t)
	return nil
}

// openTunnel registers the tunnel; the context ends with the stream.
func (s *Service) openTunnel(stream pb.TunnelService_OpenTunnelServer) (*registry.Tunnel, context.Context, context.CancelFunc, error) {
	ctx := stream.Context()
	id, err := s.machineID(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	var m store.Machine
	err = s.storeCall(ctx, func() (err error) { m, err = s.Store.GetMachine(ctx, id); return err })
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, nil, nil, status.Errorf(codes.FailedPrecondition, "machine %q must Register before opening a tunnel", id)
	case err != nil:
		return nil, nil, nil, status.Errorf(codes.Unavailable, "look up machine %q: %v", id, err)
	}
	if !m.RevokedAt.IsZero() || s.Revoked != nil && s.Revoked(id) {
		return nil, nil, nil, status.Errorf(codes.PermissionDenied, "machine %q was revoked", id)
	}
	ctx, cancel := context.WithCancel(ctx)
	conn := tunnel.NewConn(stream, cancel, tunnel.Addr("relay"), tunnel.Addr("machine:"+id))
	h2 := slices.Contains(m.Capabilities, tunnel.CapabilityHTTP2)
	client := tunnel.NewClient(conn, h2)
	if h2 && slices.Contains(m.Capabilities, tunnel.CapabilityDirect) {
		client.EnableDirect(conn.SendDirectOffer)
		if s.Engine {
			client.UseEngine()
		}
	}
	t := &registry.Tunnel{MachineID: id, OwnerID: m.OwnerID, TeamID: m.TeamID, Client: client, ConnectedAt: s.now()}
	if old := s.Registry.Add(t); old != nil {
		s.Log.Info("tunnel: a new connection replaces the old one", "machine_id", id)
		old.Client.Close()
	}
	if s.Replica != "" {
		if err := s.Store.SetMachineReplica(ctx, id, s.Replica, s.now()); err != nil {
			// Until it is recorded, clients of other replicas find the
			// machine offline: try again soon rather than leave it to the
			// next heartbeat, up to 30 s away (the chaos soak found a
			// machine unreachable for 24 s after PostgreSQL restarted
			// under its registration).
			s.Log.Warn("tunnel: record this replica as the machine's; retrying", "machine_id", id, "err", err)
			go s.recordReplica(ctx, t)
		}
	}
	conn.SendHeartbeat() // tells the agent it is reachable now
	s.Metrics.opened(id)
	s.Log.Info("tunnel: machine online", "machine_id", id)
	if s.OnOnline != nil {
		go s.OnOnline(ctx, t)
	}
	return t, ctx, cancel, nil
}

// storeCallFor bounds how long a registration waits for a store that
// fails: a PostgreSQL restart (the chaos soak's take 0.6 s) passes within
// it, and the agent's Register allows 15 s.
const storeCallFor = 3 * time.Second

// storeCall runs op, trying again for up to storeCallFor (from RetryFirst,
// default 50 ms, growing to 500 ms) while the store fails rather than
// answers: not found, a conflict, a revocation or an invalid argument is
// its answer, returned at once. Without it a registration during a
// PostgreSQL restart failed, and the agent waited out a second or more of
// backoff (or was told to Register first, by an OpenTunnel that could not
// read the record it had just written).
func (s *Service) storeCall(ctx context.Context, op func() error) error {
	_, err := store.Retry(ctx, store.RetryPolicy{First: cmp.Or(s.RetryFirst, 50*time.Millisecond), Max: 500 * time.Millisecond, For: storeCallFor}, op)
	return err
}

// recordReplica records this replica as t's machine's holder, trying again
// with backoff until the store takes it, t's tunnel ends or is replaced,
// the replica drains (its agents move away), or a heartbeat interval has
// passed (the heartbeats record it from then on).
func (s *Service) recordReplica(ctx context.Context, t *registry.Tunnel) {
	ours := true
	tries, err := store.Retry(ctx, store.RetryPolicy{First: cmp.Or(s.RetryFirst, 100*time.Millisecond), Max: 2 * time.Second, For: cmp.Or(s.HeartbeatInterval, 30*time.Second)}, func() error {
		if s.Registry.Get(t.MachineID) != t || s.Draining != nil && s.Draining() {
			ours = false // no longer this tunnel's to record
			return nil
		}
		return s.Store.SetMachineReplica(ctx, t.MachineID, s.Replica, s.now())
	})
	switch {
	case ctx.Err() != nil:
	case err != nil:
		s.Log.Warn("tunnel: recording this replica as the machine's failed; the next heartbeat records it", "machine_id", t.MachineID, "tries", tries, "err", err)
	case ours:
		s.Log.Info("tunnel: recorded this replica as the machine's", "machine_id", t.MachineID, "tries", tries)
	}
}

// deliver runs OnOnline for t until it returns or t's tunnel ends.
func (s *Service) deliver(t *registry.Tunnel) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-t.Client.Done():
			cancel()
		case <-ctx.Done():
		}
	}()
	s.OnOnline(ctx, t)
}

// closeTunnel records the machine offline. It is not inlined into
// OpenTunnel, so that its frame does not enlarge the waiting goroutine's.
//
//go:noinline
func (s *Service) closeTunnel(ctx context.Context, t *registry.Tunnel) {
	s.Registry.Remove(t)
	t.Client.Close()
	if err := s.Store.TouchMachine(context.WithoutCancel(ctx), t.MachineID, s.now()); err != nil {
		s.Log.Warn("tunnel: record last seen", "machine_id", t.MachineID, "err", err)
	}
	if s.Replica != "" && s.Registry.Get(t.MachineID) == nil {
		// Only if still ours: the machine may already be on another
		// replica, whose record must stay.
		if err := s.Store.ClearMachineReplica(context.WithoutCancel(ctx), t.MachineID, s.Replica); err != nil {
			s.Log.Warn("tunnel: clear the machine's replica", "machine_id", t.MachineID, "err", err)
		}
	}
	s.Log.Info("tunnel: machine offline", "machine_id", t.MachineID, "connected_for", fmt.Sprint(s.now().Sub(t.ConnectedAt).Round(time.Millisecond)))
}
