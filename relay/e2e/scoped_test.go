package e2e

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/betcode-dev/betcode/relay/pki"
	"github.com/betcode-dev/betcode/relay/store"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/mtls"
	"github.com/betcode-dev/betcode/shared/tunnel"
)

// fakeMachine is a machine without an agent: this process dials the relay
// with the machine's certificate, registers, serves its tunnel with fake
// ChannelService and AgentService handlers, and calls TunnelService on the
// same mTLS connection as agent/relaylink does.
type fakeMachine struct {
	id     string
	tunnel pb.TunnelServiceClient
	mu     sync.Mutex
	calls  []string // "Method machine-header user-header authorization-header"
}

func (f *fakeMachine) record(ctx context.Context, method string) {
	md, _ := metadata.FromIncomingContext(ctx)
	get := func(k string) string { return strings.Join(md.Get(k), ",") }
	f.mu.Lock()
	f.calls = append(f.calls, strings.Join([]string{method, get("x-betcode-machine-id"), get("x-betcode-user"), get("authorization")}, " "))
	f.mu.Unlock()
}

func (f *fakeMachine) callLog() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

type fakeChannels struct {
	pb.UnimplementedChannelServiceServer
	m *fakeMachine
}

// Open and Pair echo every message, as a handshake's answer would come.
func (c fakeChannels) Open(s grpc.BidiStreamingServer[pb.OpenRequest, pb.OpenResponse]) error {
	c.m.record(s.Context(), "Open")
	for {
		msg, err := s.Recv()
		if err != nil {
			return nil
		}
		if err := s.Send(&pb.OpenResponse{Data: msg.Data}); err != nil {
			return err
		}
	}
}

func (c fakeChannels) Pair(s grpc.BidiStreamingServer[pb.PairRequest, pb.PairResponse]) error {
	c.m.record(s.Context(), "Pair")
	for {
		msg, err := s.Recv()
		if err != nil {
			return nil
		}
		if err := s.Send(&pb.PairResponse{Data: msg.Data}); err != nil {
			return err
		}
	}
}

type fakeAgentService struct {
	pb.UnimplementedAgentServiceServer
	m *fakeMachine
}

func (a fakeAgentService) ListSessions(ctx context.Context, _ *pb.ListSessionsRequest) (*pb.ListSessionsResponse, error) {
	a.m.record(ctx, "ListSessions")
	return &pb.ListSessionsResponse{}, nil
}

// startFakeMachine connects machine id (owned by alice) to the relay and
// returns once the relay confirmed its tunnel.
func startFakeMachine(t *testing.T, w *world, id string) *fakeMachine {
	t.Helper()
	cert, key := w.machineCert(id)
	cfg, err := mtls.ClientConfig(filepath.Join(w.pki, pki.CACertFile), cert, key, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	cc, err := grpc.NewClient(w.addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	f := &fakeMachine{id: id, tunnel: pb.NewTunnelServiceClient(cc)}
	ctx := ctxT(t, 30*time.Second)
	if _, err := f.tunnel.Register(ctx, &pb.RegisterRequest{MachineName: "fake-" + id, Capabilities: []string{tunnel.CapabilityHTTP2}}); err != nil {
		t.Fatalf("register %s: %v", id, err)
	}
	sctx, stop := context.WithCancel(context.Background())
	stream, err := f.tunnel.OpenTunnel(sctx)
	if err != nil {
		stop()
		t.Fatalf("open tunnel %s: %v", id, err)
	}
	srv := grpc.NewServer()
	pb.RegisterChannelServiceServer(srv, fakeChannels{m: f})
	pb.RegisterAgentServiceServer(srv, fakeAgentService{m: f})
	conn := tunnel.NewConn(stream, stop, tunnel.Addr("machine"), tunnel.Addr("relay"))
	confirmed := make(chan struct{})
	var once sync.Once
	conn.OnHeartbeat = func(*pb.TunnelHeartbeat) { once.Do(func() { close(confirmed) }) }
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = (&tunnel.Server{Handler: srv, Native: srv, Remote: "relay"}).ServeConn(sctx, conn)
	}()
	// Heartbeats keep the machine's presence live for other replicas.
	beats := make(chan struct{})
	go func() {
		defer close(beats)
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-sctx.Done():
				return
			case <-tick.C:
				_, _ = f.tunnel.Heartbeat(sctx, &pb.HeartbeatRequest{})
			}
		}
	}()
	t.Cleanup(func() { stop(); <-done; <-beats; srv.Stop() })
	select {
	case <-confirmed:
	case <-done:
		t.Fatalf("the tunnel of %s closed before the relay confirmed it", id)
	case <-ctx.Done():
		t.Fatalf("the relay did not confirm the tunnel of %s", id)
	}
	return f
}

// echoPair sends one message on a new Pair stream and returns the echo.
func echoPair(ctx context.Context, cc *grpc.ClientConn, msg string) (string, error) {
	s, err := pb.NewChannelServiceClient(cc).Pair(ctx)
	if err != nil {
		return "", err
	}
	defer s.CloseSend()
	if err := s.Send(&pb.PairRequest{Data: []byte(msg)}); err != nil {
		_, err = s.Recv()
		return "", err
	}
	resp, err := s.Recv()
	if err != nil {
		return "", err
	}
	return string(resp.Data), nil
}

// TestScopedTokensEndToEnd: through the relay binary (PostgreSQL), a
// machine gets a pairing ticket over its mTLS connection; a client with it
// reaches the machine's ChannelService.Pair, once; the machine gets a
// device token, which reaches ChannelService.Open on that machine only —
// not the machine's AgentService, not the relay's MachineService, not
// another machine — until the machine revokes it, which ends its open
// channel within a second. A client that is not a machine gets no token.
func TestScopedTokensEndToEnd(t *testing.T) {
	w := newWorld(t, pgURL(t))
	m1 := startFakeMachine(t, w, "scoped-1")
	m2 := startFakeMachine(t, w, "scoped-2") // alice's too
	ctx := ctxT(t, 2*time.Minute)

	// Pairing: the ticket is good for one Pair call to its machine.
	ticket, err := m1.tunnel.IssuePairingTicket(ctx, &pb.IssuePairingTicketRequest{})
	if err != nil {
		t.Fatalf("IssuePairingTicket: %v", err)
	}
	if d := time.Until(ticket.ExpiresAt.AsTime()); d < 9*time.Minute || d > 10*time.Minute {
		t.Errorf("the ticket expires in %v; want 10 minutes", d)
	}
	phone := w.dial(w.addr, ticket.Ticket)
	if got, err := echoPair(ctx, phone, "hello machine"); err != nil || got != "hello machine" {
		t.Fatalf("Pair with the ticket: %q, %v", got, err)
	}
	if calls := m1.callLog(); len(calls) != 1 || calls[0] != "Pair scoped-1 alice " {
		t.Fatalf("the machine saw %q; want one Pair for scoped-1 from alice, without the token", calls)
	}
	if _, err := echoPair(ctx, phone, "again"); status.Code(err) != codes.Unauthenticated || !strings.Contains(err.Error(), "already used") {
		t.Fatalf("a second Pair with the ticket: %v; want UNAUTHENTICATED, already used", err)
	}
	other := w.dial(w.addr, ticket.Ticket)
	if _, err := echoPair(ctx, other, "from elsewhere"); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("the spent ticket on a new connection: %v", err)
	}
	if n := len(m1.callLog()); n != 1 {
		t.Fatalf("a refused Pair reached the machine (%d calls)", n)
	}

	// The device's token.
	dev, err := m1.tunnel.IssueDeviceToken(ctx, &pb.IssueDeviceTokenRequest{DeviceName: "phone"})
	if err != nil {
		t.Fatalf("IssueDeviceToken: %v", err)
	}
	device := w.dial(w.addr, dev.Token)
	open, err := pb.NewChannelServiceClient(device).Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := open.Send(&pb.OpenRequest{Data: []byte("noise msg 1")}); err != nil {
		t.Fatal(err)
	}
	if resp, err := open.Recv(); err != nil || string(resp.Data) != "noise msg 1" {
		t.Fatalf("Open with the device token: %v, %v", resp, err)
	}
	refusals := []struct {
		name   string
		call   func() error
		code   codes.Code
		reason string
	}{
		{"AgentService on its machine", func() error {
			_, err := pb.NewAgentServiceClient(device).ListSessions(onMachine(ctx, "scoped-1"), &pb.ListSessionsRequest{})
			return err
		}, codes.PermissionDenied, "TOKEN_SCOPE"},
		{"the relay's MachineService", func() error {
			_, err := pb.NewMachineServiceClient(device).ListMachines(ctx, &pb.ListMachinesRequest{})
			return err
		}, codes.PermissionDenied, "TOKEN_SCOPE"},
		{"Open on another machine of its user", func() error {
			s, err := pb.NewChannelServiceClient(device).Open(onMachine(ctx, "scoped-2"))
			if err == nil {
				_, err = s.Recv()
			}
			return err
		}, codes.NotFound, "MACHINE_NOT_FOUND"},
		{"TunnelService (only a machine's certificate gets tokens)", func() error {
			_, err := pb.NewTunnelServiceClient(device).IssueDeviceToken(ctx, &pb.IssueDeviceTokenRequest{DeviceName: "more"})
			return err
		}, codes.PermissionDenied, "TOKEN_SCOPE"},
	}
	for _, r := range refusals {
		if err := r.call(); status.Code(err) != r.code || reason(err) != r.reason {
			t.Errorf("device token, %s: %v (%s); want %s / %s", r.name, err, reason(err), r.code, r.reason)
		}
	}
	if _, err := healthpb.NewHealthClient(device).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Errorf("device token, health check: %v", err)
	}
	for _, c := range append(m1.callLog(), m2.callLog()...) {
		if !strings.HasPrefix(c, "Pair ") && !strings.HasPrefix(c, "Open ") {
			t.Errorf("a refused call reached a machine: %q", c)
		}
	}
	if calls := m2.callLog(); len(calls) != 0 {
		t.Errorf("the other machine saw %q", calls)
	}

	// A client that is not a machine (alice's own token, TLS without a
	// machine certificate) gets no token; it still reaches ChannelService
	// like any service of her machines.
	alice := w.client()
	if _, err := pb.NewTunnelServiceClient(alice).IssuePairingTicket(ctx, &pb.IssuePairingTicketRequest{}); status.Code(err) != codes.Unauthenticated {
		t.Errorf("IssuePairingTicket from a user's client: %v; want UNAUTHENTICATED", err)
	}
	if got, err := echoPair(onMachine(ctx, "scoped-2"), alice, "ordinary"); err != nil || got != "ordinary" {
		t.Errorf("an ordinary token's Pair on scoped-2: %q, %v", got, err)
	}
	// Another machine cannot revoke this one's device token.
	if _, err := m2.tunnel.RevokeDeviceToken(ctx, &pb.RevokeDeviceTokenRequest{TokenId: dev.TokenId}); status.Code(err) != codes.NotFound {
		t.Errorf("scoped-2 revoking scoped-1's device token: %v; want NOT_FOUND", err)
	}

	// The machine revokes the device: its open channel ends within a
	// second, and the token is refused from then on.
	ended := make(chan error, 1)
	go func() {
		for {
			if _, err := open.Recv(); err != nil {
				ended <- err
				return
			}
		}
	}()
	revoked := time.Now()
	if _, err := m1.tunnel.RevokeDeviceToken(ctx, &pb.RevokeDeviceTokenRequest{TokenId: dev.TokenId}); err != nil {
		t.Fatalf("RevokeDeviceToken: %v", err)
	}
	select {
	case err := <-ended:
		if d := time.Since(revoked); d > time.Second {
			t.Errorf("the channel ended %v after the revocation; want within 1s", d)
		}
		if status.Code(err) != codes.Unauthenticated {
			t.Errorf("the revoked device's channel ended with %v; want UNAUTHENTICATED", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the revoked device's channel is still open 5s after the revocation")
	}
	if _, err := echoPair(ctx, device, "after"); status.Code(err) != codes.Unauthenticated {
		t.Errorf("the revoked device token: %v; want UNAUTHENTICATED", err)
	}

	// Audited as the machine, with no secret.
	var events []store.AuditEvent
	want := []string{"pairing.ticket", "pairing.ticket_used", "device_token.issue", "device_token.revoke"}
	// The relay writes its audit in the background: poll the store.
	audited := eventually(10*time.Second, 100*time.Millisecond, func() bool {
		events, err = w.store().ListAudit(ctx, store.AuditFilter{})
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, e := range events {
			if e.Outcome == "ok" {
				seen[e.Action] = true
			}
		}
		for _, a := range want {
			if !seen[a] {
				return false
			}
		}
		return true
	})
	if !audited {
		t.Fatalf("audit lacks some of %v: %+v", want, events)
	}
	for _, e := range events {
		if strings.HasPrefix(e.Action, "device_token.") || e.Action == "pairing.ticket" {
			if e.Actor != "machine:scoped-1" && e.Actor != "machine:scoped-2" {
				t.Errorf("audit %+v: actor %q, want the machine", e, e.Actor)
			}
		}
		for _, secret := range []string{ticket.Ticket, dev.Token} {
			if strings.Contains(e.Detail+e.Target, secret) {
				t.Errorf("audit event %+v holds a token", e)
			}
		}
	}
	if strings.Contains(w.relay.Log(), dev.Token) || strings.Contains(w.relay.Log(), ticket.Ticket) {
		t.Error("the relay logged a token")
	}
}

// TestRevokedMachineScopedTokens: revoking a machine (the admin path)
// ends its devices' tokens and tickets on the relay too.
func TestRevokedMachineScopedTokens(t *testing.T) {
	w := newWorld(t, pgURL(t))
	m := startFakeMachine(t, w, "scoped-gone")
	ctx := ctxT(t, time.Minute)
	dev, err := m.tunnel.IssueDeviceToken(ctx, &pb.IssueDeviceTokenRequest{DeviceName: "tablet"})
	if err != nil {
		t.Fatal(err)
	}
	ticket, err := m.tunnel.IssuePairingTicket(ctx, &pb.IssuePairingTicketRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.store().RevokeMachine(ctx, "scoped-gone", time.Now()); err != nil {
		t.Fatal(err)
	}
	// The device token first: once it is refused, this replica follows
	// the revocation, and the ticket must be refused for the same reason
	// (not spent, then sent to a machine that is gone).
	for _, c := range []struct{ name, tok string }{{"device token", dev.Token}, {"ticket", ticket.Ticket}} {
		cc := w.dial(w.addr, c.tok)
		var err error
		// The replica follows the revocation through the store's change
		// feed: poll until it refuses.
		eventually(2*time.Second, 50*time.Millisecond, func() bool {
			_, err = echoPair(ctx, cc, "x")
			return status.Code(err) == codes.Unauthenticated
		})
		if status.Code(err) != codes.Unauthenticated || !strings.Contains(err.Error(), "machine scoped-gone was revoked") {
			t.Errorf("%s of a revoked machine: %v; want UNAUTHENTICATED, machine revoked", c.name, err)
		}
	}
	if calls := m.callLog(); len(calls) != 0 {
		t.Errorf("a revoked machine's tokens reached it: %q", calls)
	}
}

// TestScopedTokensAcrossReplicas: the machine's tunnel is on replica A,
// the device talks to replica B only. B checks the scope, hands the call
// to A with it, and A checks it again: the channel and the pairing work
// through the hop, nothing else does, a ticket spent through one replica
// is spent on the other, and revoking the device ends its channel through
// B within a second.
func TestScopedTokensAcrossReplicas(t *testing.T) {
	w := newWorldOf(t, &world{t: t, pki: t.TempDir(), dataDir: t.TempDir(), dbURL: pgURL(t), advertise: true})
	bAddr, _ := w.startReplica("relay B")
	m := startFakeMachine(t, w, "scoped-r") // on A
	startFakeMachine(t, w, "scoped-r2")     // alice's too, also on A
	ctx := ctxT(t, time.Minute)

	ticket, err := m.tunnel.IssuePairingTicket(ctx, &pb.IssuePairingTicketRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := echoPair(ctx, w.dial(bAddr, ticket.Ticket), "through B"); err != nil || got != "through B" {
		t.Fatalf("Pair through B: %q, %v", got, err)
	}
	if _, err := echoPair(ctx, w.dial(w.addr, ticket.Ticket), "again at A"); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("the ticket spent through B, used at A: %v", err)
	}
	if calls := m.callLog(); len(calls) != 1 || calls[0] != "Pair scoped-r alice " {
		t.Fatalf("the machine saw %q; want one Pair", calls)
	}

	dev, err := m.tunnel.IssueDeviceToken(ctx, &pb.IssueDeviceTokenRequest{DeviceName: "phone"})
	if err != nil {
		t.Fatal(err)
	}
	device := w.dial(bAddr, dev.Token)
	open, err := pb.NewChannelServiceClient(device).Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := open.Send(&pb.OpenRequest{Data: []byte("hi")}); err != nil {
		t.Fatal(err)
	}
	if resp, err := open.Recv(); err != nil || string(resp.Data) != "hi" {
		t.Fatalf("Open through B: %v, %v", resp, err)
	}
	if _, err := pb.NewAgentServiceClient(device).ListSessions(ctx, &pb.ListSessionsRequest{}); status.Code(err) != codes.PermissionDenied || reason(err) != "TOKEN_SCOPE" {
		t.Errorf("AgentService through B with the device token: %v", err)
	}
	s, err := pb.NewChannelServiceClient(device).Open(onMachine(ctx, "scoped-r2"))
	if err == nil {
		_, err = s.Recv()
	}
	if status.Code(err) != codes.NotFound || reason(err) != "MACHINE_NOT_FOUND" {
		t.Errorf("Open on another machine through B: %v", err)
	}

	ended := make(chan error, 1)
	go func() {
		for {
			if _, err := open.Recv(); err != nil {
				ended <- err
				return
			}
		}
	}()
	revoked := time.Now()
	if _, err := m.tunnel.RevokeDeviceToken(ctx, &pb.RevokeDeviceTokenRequest{TokenId: dev.TokenId}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-ended:
		if d := time.Since(revoked); d > time.Second || status.Code(err) != codes.Unauthenticated {
			t.Errorf("the channel through B ended after %v with %v; want UNAUTHENTICATED within 1s", d, err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the revoked device's channel through B is still open 5s after the revocation")
	}
	for _, c := range m.callLog() {
		if strings.Contains(c, "ListSessions") {
			t.Errorf("a refused call reached the machine: %q", c)
		}
	}
}

// eventually checks cond at once and then every interval until it holds
// or d has passed, and reports whether it held.
func eventually(d, every time.Duration, cond func() bool) bool {
	if cond() {
		return true
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for {
		select {
		case <-tick.C:
			if cond() {
				return true
			}
		case <-deadline.C:
			return cond()
		}
	}
}
