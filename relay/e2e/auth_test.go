package e2e

import (
	"crypto/tls"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/betcode-dev/betcode/relay/internal/pgtest"
	"github.com/betcode-dev/betcode/relay/pki"
	"github.com/betcode-dev/betcode/relay/store"
	"github.com/betcode-dev/betcode/shared/authtoken"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/mtls"
)

// wantCode fails unless err has code c and its message contains msg.
func wantCode(t *testing.T, what string, err error, c codes.Code, msg string) {
	t.Helper()
	if status.Code(err) != c || !strings.Contains(status.Convert(err).Message(), msg) {
		t.Fatalf("%s: got %v; want %s mentioning %q", what, err, c, msg)
	}
}

// TestTokensRefusedWithClearErrors: every kind of bad token is refused
// UNAUTHENTICATED with a message that says what to do, the token never
// reaches a log, and the relay keeps serving a good one.
func TestTokensRefusedWithClearErrors(t *testing.T) {
	w := newWorld(t, "")
	w.startAgent("m1", w.addr)
	ctx := ctxT(t, 60*time.Second)
	good := w.userToken("alice")
	expired := w.newToken("alice", time.Now().Add(-time.Minute))
	revoked := w.token("alice")
	if _, err := w.store().RevokeToken(ctx, tokenID(revoked), time.Now()); err != nil {
		t.Fatal(err)
	}
	unknown, err := authtoken.New(authtoken.Client) // well formed, never stored
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, token, msg string
	}{
		{"none", "", "needs a token"},
		{"malformed", "hello", "malformed token"},
		{"mistyped", good[:20] + flip(good[20]) + good[21:], "checksum"},
		{"unknown", unknown, "not recognised"},
		{"join token", "bcj_" + good[4:], "join token"},
		{"expired", expired, "expired at"},
		{"revoked", revoked, "was revoked"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cc := w.dial(w.addr, "")
			if tt.token != "" {
				cc = w.dialInsecureToken(tt.token)
			}
			_, err := pb.NewMachineServiceClient(cc).ListMachines(ctx, &pb.ListMachinesRequest{})
			wantCode(t, "ListMachines", err, codes.Unauthenticated, tt.msg)
			_, err = pb.NewAgentServiceClient(cc).ListSessions(onMachine(ctx, "m1"), &pb.ListSessionsRequest{})
			wantCode(t, "ListSessions on m1", err, codes.Unauthenticated, tt.msg)
		})
	}
	// The good token still works, and no token is in the relay's log.
	cc := w.client()
	if _, err := pb.NewAgentServiceClient(cc).ListSessions(onMachine(ctx, "m1"), &pb.ListSessionsRequest{}); err != nil {
		t.Fatalf("alice after the refusals: %v", err)
	}
	for _, tok := range []string{good, expired, revoked} {
		if strings.Contains(w.relay.Log(), tok[4:20]) {
			t.Fatal("a token appears in the relay's log")
		}
	}
	// Refusals are audited, without the secrets.
	events, err := w.store().ListAudit(ctx, store.AuditFilter{})
	if err != nil {
		t.Fatal(err)
	}
	refused := 0
	for _, e := range events {
		if e.Action == "auth.refused" {
			refused++
		}
		for _, tok := range []string{good, expired, revoked} {
			if strings.Contains(e.Detail+e.Target, tok[4:20]) {
				t.Fatalf("audit event %+v holds a token", e)
			}
		}
	}
	if refused < len(tests) {
		t.Fatalf("%d auth.refused audit events; want at least %d", refused, len(tests))
	}
}

// flip returns a different base62 character than c.
func flip(c byte) string {
	if c == 'a' {
		return "b"
	}
	return "a"
}

func tokenID(tok string) string { return authtoken.ID(authtoken.Hash(tok)) }

// dialInsecureToken sends token even if it is not well formed (the
// per-RPC credentials do not check).
func (w *world) dialInsecureToken(token string) *grpc.ClientConn {
	w.t.Helper()
	return w.dial(w.addr, token)
}

// TestUsersReachOnlyTheirOwnAndTheirTeamsMachines: bob cannot reach alice's
// machine by id, by metadata, by listing, by switching, through a stale
// current-machine record or the offline buffer; a team's machine is reached
// by its members only, and removing a member ends their open stream.
func TestUsersReachOnlyTheirOwnAndTheirTeamsMachines(t *testing.T) {
	w := newWorld(t, pgtest.URL(t))
	ctx := ctxT(t, 120*time.Second)
	st := w.store()
	w.userToken("carol")
	if err := st.CreateTeam(ctx, store.Team{ID: "eng"}); err != nil {
		t.Fatal(err)
	}
	if err := st.SetMember(ctx, store.Member{TeamID: "eng", UserID: "carol", Role: store.RoleMember}); err != nil {
		t.Fatal(err)
	}
	w.startAgent("m1", w.addr) // alice's
	cert, key := w.machineCertOf("team1", "team:eng")
	a := w.newAgent("team1")
	a.start(w, cert, key)

	alice, bob, carol := w.client(), w.dial(w.addr, w.userToken("bob")), w.dial(w.addr, w.userToken("carol"))
	list := func(cc *grpc.ClientConn) []string {
		t.Helper()
		l, err := pb.NewMachineServiceClient(cc).ListMachines(ctx, &pb.ListMachinesRequest{})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, m := range l.Machines {
			ids = append(ids, m.Id)
		}
		return ids
	}
	if got := strings.Join(list(alice), ","); got != "m1" {
		t.Fatalf("alice lists %q; want m1", got)
	}
	if got := strings.Join(list(bob), ","); got != "" {
		t.Fatalf("bob lists %q; want nothing", got)
	}
	if got := strings.Join(list(carol), ","); got != "team1" {
		t.Fatalf("carol lists %q; want team1", got)
	}

	// bob, every way in: NOT_FOUND, exactly as for a machine that does not
	// exist.
	machines, agentAPI := pb.NewMachineServiceClient(bob), pb.NewAgentServiceClient(bob)
	for _, id := range []string{"m1", "team1", "no-such-machine"} {
		_, err := machines.GetMachine(ctx, &pb.GetMachineRequest{MachineId: id})
		wantCode(t, "bob GetMachine "+id, err, codes.NotFound, `no machine "`+id+`"`)
		_, err = machines.SwitchMachine(ctx, &pb.SwitchMachineRequest{MachineId: id})
		wantCode(t, "bob SwitchMachine "+id, err, codes.NotFound, `no machine "`+id+`"`)
		_, err = agentAPI.ListSessions(onMachine(ctx, id), &pb.ListSessionsRequest{})
		wantCode(t, "bob ListSessions on "+id, err, codes.NotFound, `no machine "`+id+`"`)
		_, err = agentAPI.QueueMessage(onMachine(ctx, id), &pb.QueueMessageRequest{SessionId: "s", Message: &pb.UserMessage{Content: "rm -rf /"}, IdempotencyKey: "k-" + id})
		wantCode(t, "bob QueueMessage on "+id, err, codes.NotFound, `no machine "`+id+`"`)
		s, err := agentAPI.Converse(onMachine(ctx, id))
		if err == nil {
			_, err = s.Recv()
		}
		wantCode(t, "bob Converse on "+id, err, codes.NotFound, `no machine "`+id+`"`)
	}
	// A current-machine record naming alice's machine (as if bob had once
	// been allowed) does not route bob there.
	if _, err := st.SetCurrentMachine(ctx, "bob", "m1"); err != nil {
		t.Fatal(err)
	}
	_, err := agentAPI.ListSessions(ctx, &pb.ListSessionsRequest{})
	wantCode(t, "bob through a stale current machine", err, codes.NotFound, `no machine "m1"`)
	if n, _, err := st.Counts(ctx, "m1"); err != nil || n != 0 {
		t.Fatalf("m1's buffer holds %d messages (%v); bob's were refused", n, err)
	}

	// carol reaches the team's machine; once removed from the team her
	// open stream ends and her next call is NOT_FOUND.
	s, err := pb.NewAgentServiceClient(carol).Converse(onMachine(ctx, "team1"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(&pb.AgentRequest{Request: &pb.AgentRequest_Start{Start: &pb.StartConversation{WorkingDirectory: a.project}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recv(); err != nil { // SessionInfo: the stream is up
		t.Fatal(err)
	}
	removed := time.Now()
	if err := st.RemoveMember(ctx, "eng", "carol"); err != nil {
		t.Fatal(err)
	}
	for {
		_, err = s.Recv()
		if err != nil {
			break
		}
	}
	took := time.Since(removed)
	wantCode(t, "carol's open stream after removal", err, codes.NotFound, `no machine "team1"`)
	t.Logf("removal ended the open stream in %s", took)
	if took > time.Second {
		t.Fatalf("removal took %s to end the stream; want within 1s", took)
	}
	_, err = pb.NewAgentServiceClient(carol).ListSessions(onMachine(ctx, "team1"), &pb.ListSessionsRequest{})
	wantCode(t, "carol after removal", err, codes.NotFound, `no machine "team1"`)
	if got := strings.Join(list(carol), ","); got != "" {
		t.Fatalf("carol lists %q after removal", got)
	}
}

// TestRevokedTokenEndsItsOpenStreamWithinASecond on two replicas: a token
// revoked through one is refused by the other and its open stream there is
// ended UNAUTHENTICATED within a second.
func TestRevokedTokenEndsItsOpenStreamWithinASecond(t *testing.T) {
	w := newWorldOf(t, &world{t: t, pki: t.TempDir(), dataDir: t.TempDir(), dbURL: pgtest.URL(t), advertise: true})
	addrB, _ := w.startReplica("relay B")
	a := w.startAgent("m1", w.addr)
	ctx := ctxT(t, 120*time.Second)
	tok := w.token("alice")
	other := w.userToken("alice")
	ccB := w.dial(addrB, tok)

	s, err := pb.NewAgentServiceClient(ccB).Converse(onMachine(ctx, "m1"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(&pb.AgentRequest{Request: &pb.AgentRequest_Start{Start: &pb.StartConversation{WorkingDirectory: a.project}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recv(); err != nil {
		t.Fatal(err)
	}
	revoked := time.Now()
	if _, err := w.store().RevokeToken(ctx, tokenID(tok), time.Now()); err != nil {
		t.Fatal(err)
	}
	for err == nil {
		_, err = s.Recv()
	}
	took := time.Since(revoked)
	wantCode(t, "the open stream", err, codes.Unauthenticated, "revoked")
	t.Logf("revocation ended the open stream on the other replica in %s", took)
	if took > time.Second {
		t.Fatalf("revocation took %s; want within 1s", took)
	}
	for _, addr := range []string{w.addr, addrB} {
		_, err := pb.NewMachineServiceClient(w.dial(addr, tok)).ListMachines(ctx, &pb.ListMachinesRequest{})
		wantCode(t, "the revoked token on "+addr, err, codes.Unauthenticated, "revoked")
		if _, err := pb.NewAgentServiceClient(w.dial(addr, other)).ListSessions(onMachine(ctx, "m1"), &pb.ListSessionsRequest{}); err != nil {
			t.Fatalf("alice's other token on %s: %v", addr, err)
		}
	}
}

// TestMachineCertificatesHostile: a machine certificate is no client
// credential; a certificate naming no owner, or whose id differs from the
// Register request, is refused; a revoked machine loses its tunnel at once
// and cannot reconnect.
func TestMachineCertificatesHostile(t *testing.T) {
	w := newWorld(t, "")
	ctx := ctxT(t, 120*time.Second)
	m1 := w.startAgent("m1", w.addr)
	mcert, mkey := filepath.Join(w.pki, pki.MachineCertFile("m1")), filepath.Join(w.pki, pki.MachineKeyFile("m1"))
	cfg, err := mtls.ClientConfig(filepath.Join(w.pki, pki.CACertFile), mcert, mkey, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	machineConn := dialTLS(t, w.addr, cfg)

	// As a client: the agents' endpoint serves the tunnel only.
	_, err = pb.NewMachineServiceClient(machineConn).ListMachines(ctx, &pb.ListMachinesRequest{})
	wantCode(t, "machine certificate as a client", err, codes.Unimplemented, "")
	_, err = pb.NewAgentServiceClient(machineConn).ListSessions(onMachine(ctx, "m1"), &pb.ListSessionsRequest{})
	wantCode(t, "machine certificate reaching an agent", err, codes.Unimplemented, "")

	// Register naming another machine.
	_, err = pb.NewTunnelServiceClient(machineConn).Register(ctx, &pb.RegisterRequest{MachineId: "m2"})
	wantCode(t, "Register as another machine", err, codes.PermissionDenied, `does not match the certificate's "m1"`)

	// A certificate without an owner, for a machine never enrolled.
	cert, key := w.machineCertOf("orphan", "")
	ocfg, err := mtls.ClientConfig(filepath.Join(w.pki, pki.CACertFile), cert, key, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	_, err = pb.NewTunnelServiceClient(dialTLS(t, w.addr, ocfg)).Register(ctx, &pb.RegisterRequest{MachineId: "orphan"})
	wantCode(t, "Register without an owner", err, codes.PermissionDenied, "not enrolled")

	// Revoke m1: its tunnel closes at once, it cannot come back, and
	// alice no longer finds it.
	alice := pb.NewAgentServiceClient(w.client())
	if _, err := alice.ListSessions(onMachine(ctx, "m1"), &pb.ListSessionsRequest{}); err != nil {
		t.Fatal(err)
	}
	if err := w.store().RevokeMachine(ctx, "m1", time.Now()); err != nil {
		t.Fatal(err)
	}
	m1.proc.waitLine(t, `relay link down`, 10*time.Second)
	w.relay.waitLine(t, `refused a connection.*revoked`, 30*time.Second)
	_, err = alice.ListSessions(onMachine(ctx, "m1"), &pb.ListSessionsRequest{})
	wantCode(t, "alice on a revoked machine", err, codes.NotFound, `no machine "m1"`)
	// A handshake with the revoked certificate fails on a fresh
	// connection (TLS 1.3 reports the server's refusal of a client
	// certificate on the client's first read).
	c, err := tls.Dial("tcp", w.addr, cfg.Clone())
	if err == nil {
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, err = c.Read(make([]byte, 1))
		c.Close()
	}
	if err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("a handshake with the revoked certificate: %v; want a certificate alert", err)
	}
}

func dialTLS(t *testing.T, addr string, cfg *tls.Config) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}
