package enrollsvc_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"net"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/betcode-dev/betcode/relay/enrollsvc"
	"github.com/betcode-dev/betcode/relay/pki"
	"github.com/betcode-dev/betcode/relay/store"
	"github.com/betcode-dev/betcode/relay/store/sqlite"
	"github.com/betcode-dev/betcode/shared/authtoken"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/mtls"
)

var machineIDRE = regexp.MustCompile(`^m-[a-z2-7]{12}$`)

// checkEnrolled checks a successful Enroll: the certificate is a machine
// certificate for the new id, signed by the CA for client auth, valid for
// the default 30 days; the machine row is owned as the token said; the
// certificate is recorded (revoking the machine revokes its serial); and
// the enrollment is audited.
func checkEnrolled(t *testing.T, e *env, resp *pb.EnrollResponse, team, user, name string) *x509.Certificate {
	t.Helper()
	id := resp.GetMachineId()
	if !machineIDRE.MatchString(id) || mtls.ValidateMachineID(id) != nil {
		t.Fatalf("machine id %q, want m- and 12 lower-case base32 characters", id)
	}
	if resp.GetTeamId() != team || resp.GetOwnerUserId() != user {
		t.Errorf("response owner: team %q user %q, want %q %q", resp.GetTeamId(), resp.GetOwnerUserId(), team, user)
	}
	if string(resp.GetCaPem()) != string(e.ca.CertPEM()) {
		t.Error("ca_pem is not the CA's certificate")
	}
	cert := parseCert(t, resp.GetCertificatePem())
	chains, err := cert.Verify(x509.VerifyOptions{Roots: e.roots(), CurrentTime: e.now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	if err != nil {
		t.Fatalf("certificate does not verify against ca_pem for client auth: %v", err)
	}
	if got, err := mtls.MachineID(tls.ConnectionState{VerifiedChains: chains}); err != nil || got != id {
		t.Errorf("certificate names machine %q (%v), want %q", got, err, id)
	}
	if len(cert.URIs) != 1 || len(cert.DNSNames)+len(cert.IPAddresses)+len(cert.EmailAddresses) != 0 || cert.Subject.CommonName != id {
		t.Errorf("names: CN %q, URIs %v, DNS %v, IP %v; want CN %s and the machine URI only", cert.Subject.CommonName, cert.URIs, cert.DNSNames, cert.IPAddresses, id)
	}
	if len(cert.ExtKeyUsage) != 1 || cert.ExtKeyUsage[0] != x509.ExtKeyUsageClientAuth || cert.IsCA {
		t.Errorf("EKU %v, CA %v; want clientAuth only, not a CA", cert.ExtKeyUsage, cert.IsCA)
	}
	if got := cert.NotAfter.Sub(e.now); got != enrollsvc.DefaultLifetime {
		t.Errorf("lifetime = %v, want %v", got, enrollsvc.DefaultLifetime)
	}
	if !resp.GetNotAfter().AsTime().Equal(cert.NotAfter) {
		t.Errorf("not_after = %v, certificate says %v", resp.GetNotAfter().AsTime(), cert.NotAfter)
	}
	m, err := e.st.GetMachine(t.Context(), id)
	if err != nil {
		t.Fatalf("machine row: %v", err)
	}
	if m.TeamID != team || m.OwnerID != user || m.Name != name || !m.RevokedAt.IsZero() {
		t.Errorf("machine row %+v, want team %q owner %q name %q", m, team, user, name)
	}
	ev := e.audit(t, enrollsvc.ActionEnrolled)
	if len(ev) != 1 {
		t.Fatalf("%d %s events, want 1", len(ev), enrollsvc.ActionEnrolled)
	}
	owner := "user " + user
	if team != "" {
		owner = "team " + team
	}
	if ev[0].Target != id || ev[0].Outcome != "ok" || ev[0].Actor != "" || ev[0].Remote != testRemote.String() ||
		!strings.Contains(ev[0].Detail, owner) || !strings.Contains(ev[0].Detail, mtls.SerialHex(cert)) {
		t.Errorf("audit event %+v, want target %s, outcome ok, remote %s, detail naming %q and the serial", ev[0], id, testRemote, owner)
	}
	return cert
}

// checkRecorded revokes machine id and checks that the store then lists
// cert's serial as revoked: the certificate was recorded.
func checkRecorded(t *testing.T, e *env, id string, cert *x509.Certificate) {
	t.Helper()
	if err := e.st.RevokeMachine(t.Context(), id, e.now); err != nil {
		t.Fatal(err)
	}
	_, serials, err := e.st.Revocations(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range serials {
		if s == mtls.SerialHex(cert) {
			return
		}
	}
	t.Errorf("serial %s not revoked with its machine (revoked serials %v)", mtls.SerialHex(cert), serials)
}

func TestEnroll(t *testing.T) {
	// A token's creator is recorded as the owner (team tokens: the user
	// who enrolled); the store keeps team and user.
	type tokenFn func(t *testing.T, e *env) string
	teamToken := func(t *testing.T, e *env) string { return e.joinToken(t, "infra", "alice", e.now.Add(time.Hour)) }
	userToken := func(t *testing.T, e *env) string { return e.joinToken(t, "", "bob", e.now.Add(time.Hour)) }
	csr := func(t *testing.T) []byte { return newCSR(t, machineKey(t), nil) }
	tests := []struct {
		name  string
		token tokenFn
		// edit changes the request (CSR, name, token) before the call.
		edit func(t *testing.T, e *env, req *pb.EnrollRequest)
		// before runs first, with the request (e.g. an enrollment that
		// uses the token up).
		before func(t *testing.T, e *env, req *pb.EnrollRequest)
		noCA   bool

		code        codes.Code
		betcode     string
		msg         string
		team, owner string // of a success
		wantName    string
		// tokenLive: after a refusal, the token still enrolls a machine.
		tokenLive bool
	}{
		{name: "team token", token: teamToken, code: codes.OK, team: "infra", owner: "alice", wantName: "laptop"},
		{name: "user token", token: userToken, code: codes.OK, owner: "bob", wantName: "laptop"},
		{
			name: "no name", token: teamToken, code: codes.OK, team: "infra", owner: "alice", wantName: enrollsvc.DefaultMachineName,
			edit: func(t *testing.T, e *env, req *pb.EnrollRequest) { req.Name = "  " },
		},
		{
			name: "CSR asks for more", token: teamToken, code: codes.OK, team: "infra", owner: "alice", wantName: "laptop",
			edit: func(t *testing.T, e *env, req *pb.EnrollRequest) {
				req.CsrDer = newCSR(t, machineKey(t), &x509.CertificateRequest{
					Subject:     pkix.Name{CommonName: "betcode-relay"},
					DNSNames:    []string{"relay.example.com"},
					IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
					URIs:        []*url.URL{mtls.MachineURI("someone-else"), mtls.RelayURI("betcode-relay"), mtls.OwnerURI(mtls.Owner{Kind: mtls.OwnerTeam, Name: "admins"})},
				})
			},
		},
		{
			name: "token used twice", token: teamToken,
			before: func(t *testing.T, e *env, req *pb.EnrollRequest) {
				if _, err := e.svc.Enroll(plainCtx(t), req); err != nil {
					t.Fatalf("first Enroll: %v", err)
				}
			},
			code: codes.FailedPrecondition, betcode: enrollsvc.CodeJoinTokenUsed, msg: "already used; ask for a new one (betcode-relay admin enroll-token create)",
		},
		{
			name:  "expired token",
			token: func(t *testing.T, e *env) string { return e.joinToken(t, "infra", "alice", e.now.Add(-time.Second)) },
			code:  codes.Unauthenticated, betcode: enrollsvc.CodeJoinTokenExpired, msg: "expired",
		},
		{
			name: "unknown token",
			token: func(t *testing.T, e *env) string {
				s, err := authtoken.New(authtoken.Join)
				if err != nil {
					t.Fatal(err)
				}
				return s
			},
			code: codes.Unauthenticated, betcode: enrollsvc.CodeJoinTokenUnknown, msg: "join token not recognised",
		},
		{
			name: "mistyped token", token: teamToken,
			edit: func(t *testing.T, e *env, req *pb.EnrollRequest) {
				b := []byte(req.JoinToken)
				b[10] = map[bool]byte{true: 'b', false: 'a'}[b[10] == 'a']
				req.JoinToken = string(b)
			},
			code: codes.InvalidArgument, betcode: enrollsvc.CodeJoinTokenMalformed, msg: "checksum does not match", tokenLive: true,
		},
		{
			name: "cut-off token", token: teamToken,
			edit: func(t *testing.T, e *env, req *pb.EnrollRequest) { req.JoinToken = req.JoinToken[:20] },
			code: codes.InvalidArgument, betcode: enrollsvc.CodeJoinTokenMalformed, msg: "was it cut short?", tokenLive: true,
		},
		{
			name: "no token", token: teamToken,
			edit: func(t *testing.T, e *env, req *pb.EnrollRequest) { req.JoinToken = "" },
			code: codes.InvalidArgument, betcode: enrollsvc.CodeJoinTokenMalformed, msg: `a join token starts with "bcj_"`, tokenLive: true,
		},
		{
			name: "client token instead", token: teamToken,
			edit: func(t *testing.T, e *env, req *pb.EnrollRequest) {
				s, err := authtoken.New(authtoken.Client)
				if err != nil {
					t.Fatal(err)
				}
				req.JoinToken = s
			},
			code: codes.InvalidArgument, betcode: enrollsvc.CodeJoinTokenMalformed, msg: "this is a client token, not a join token", tokenLive: true,
		},
		{
			name: "garbage CSR", token: teamToken,
			edit: func(t *testing.T, e *env, req *pb.EnrollRequest) { req.CsrDer = []byte("not a CSR") },
			code: codes.InvalidArgument, betcode: enrollsvc.CodeInvalidCSR, msg: "csr_der: bad certificate signing request", tokenLive: true,
		},
		{
			name: "no CSR", token: teamToken,
			edit: func(t *testing.T, e *env, req *pb.EnrollRequest) { req.CsrDer = nil },
			code: codes.InvalidArgument, betcode: enrollsvc.CodeInvalidCSR, msg: "empty", tokenLive: true,
		},
		{
			name: "CSR with a bad signature", token: teamToken,
			edit: func(t *testing.T, e *env, req *pb.EnrollRequest) { req.CsrDer[len(req.CsrDer)-3] ^= 0xff },
			code: codes.InvalidArgument, betcode: enrollsvc.CodeInvalidCSR, msg: "signature does not verify", tokenLive: true,
		},
		{
			name: "name too long", token: teamToken,
			edit: func(t *testing.T, e *env, req *pb.EnrollRequest) { req.Name = strings.Repeat("é", 65) },
			code: codes.InvalidArgument, betcode: enrollsvc.CodeInvalidArgument, msg: "at most 64", tokenLive: true,
		},
		{
			name: "name with a control character", token: teamToken,
			edit: func(t *testing.T, e *env, req *pb.EnrollRequest) { req.Name = "lap\x1btop" },
			code: codes.InvalidArgument, betcode: enrollsvc.CodeInvalidArgument, msg: "not printable", tokenLive: true,
		},
		{
			name: "no CA key", token: teamToken, noCA: true,
			code: codes.FailedPrecondition, betcode: enrollsvc.CodeNoCAKey, msg: "this relay has no CA key (--ca-key)", tokenLive: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			token := tt.token(t, e)
			req := &pb.EnrollRequest{JoinToken: token, CsrDer: csr(t), Name: "laptop"}
			if tt.before != nil {
				tt.before(t, e, &pb.EnrollRequest{JoinToken: token, CsrDer: csr(t), Name: "first"})
			}
			if tt.edit != nil {
				tt.edit(t, e, req)
			}
			if tt.noCA {
				e.svc.CA = nil
			}
			machinesBefore := len(e.machines(t))
			resp, err := e.svc.Enroll(plainCtx(t), req)
			if tt.code == codes.OK {
				if err != nil {
					t.Fatalf("Enroll: %v", err)
				}
				cert := checkEnrolled(t, e, resp, tt.team, tt.owner, tt.wantName)
				checkRecorded(t, e, resp.GetMachineId(), cert)
				return
			}
			checkStatus(t, err, tt.code, tt.betcode, tt.msg)
			if resp != nil {
				t.Errorf("a refusal came with a response: %v", resp)
			}
			if n := len(e.machines(t)); n != machinesBefore {
				t.Errorf("store has %d machines after a refusal, had %d", n, machinesBefore)
			}
			for _, s := range []string{status.Convert(err).Message(), e.logs.String()} {
				if strings.Contains(s, token) || (req.JoinToken != "" && strings.Contains(s, req.JoinToken)) {
					t.Errorf("the join token leaked into %q", s)
				}
			}
			refused := e.audit(t, enrollsvc.ActionEnrollRefused)
			if len(refused) != 1 {
				t.Fatalf("%d %s events, want 1", len(refused), enrollsvc.ActionEnrollRefused)
			}
			if ev := refused[0]; ev.Outcome != "denied" || ev.Remote != testRemote.String() || ev.Detail != status.Convert(err).Message() ||
				strings.Contains(ev.Detail, token) || strings.Contains(ev.Target, token) {
				t.Errorf("audit event %+v, want outcome denied, remote %s, the message as detail", ev, testRemote)
			}
			if tt.tokenLive {
				e.svc.CA = e.ca
				good := &pb.EnrollRequest{JoinToken: token, CsrDer: csr(t), Name: "laptop"}
				resp, err := e.svc.Enroll(plainCtx(t), good)
				if err != nil {
					t.Fatalf("the refused call burned the token: %v", err)
				}
				checkEnrolled(t, e, resp, "infra", "alice", "laptop")
			}
		})
	}
}

// TestEnrollConcurrent races 20 enrollments on one join token: exactly one
// wins, the others learn the token was used, and the store holds one
// machine.
func TestEnrollConcurrent(t *testing.T) {
	e := newEnv(t)
	token := e.joinToken(t, "infra", "alice", e.now.Add(time.Hour))
	csr := newCSR(t, machineKey(t), nil)
	const n = 20
	errs := make([]error, n)
	resps := make([]*pb.EnrollResponse, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			resps[i], errs[i] = e.svc.Enroll(plainCtx(t), &pb.EnrollRequest{JoinToken: token, CsrDer: csr, Name: "racer"})
		})
	}
	close(start)
	wg.Wait()
	var won []*pb.EnrollResponse
	for i, err := range errs {
		if err == nil {
			won = append(won, resps[i])
			continue
		}
		if status.Code(err) != codes.FailedPrecondition {
			t.Errorf("call %d: %v, want FailedPrecondition", i, err)
		}
	}
	if len(won) != 1 {
		t.Fatalf("%d calls won, want 1", len(won))
	}
	ms := e.machines(t)
	if len(ms) != 1 || ms[0].ID != won[0].GetMachineId() {
		t.Fatalf("store machines %+v, want only the winner %s", ms, won[0].GetMachineId())
	}
	checkEnrolled(t, e, won[0], "infra", "alice", "racer")
	if got := len(e.audit(t, enrollsvc.ActionEnrollRefused)); got != n-1 {
		t.Errorf("%d refusals audited, want %d", got, n-1)
	}
}

// TestEnrollCallerGone checks that a caller that hangs up before the token
// is consumed leaves it unused.
func TestEnrollCallerGone(t *testing.T) {
	e := newEnv(t)
	token := e.joinToken(t, "infra", "alice", e.now.Add(time.Hour))
	ctx, cancel := context.WithCancel(plainCtx(t))
	cancel()
	if _, err := e.svc.Enroll(ctx, &pb.EnrollRequest{JoinToken: token, CsrDer: newCSR(t, machineKey(t), nil)}); status.Code(err) != codes.Canceled {
		t.Fatalf("Enroll with a cancelled context: %v, want Canceled", err)
	}
	resp, err := e.svc.Enroll(plainCtx(t), &pb.EnrollRequest{JoinToken: token, CsrDer: newCSR(t, machineKey(t), nil), Name: "laptop"})
	if err != nil {
		t.Fatalf("the token did not survive a cancelled call: %v", err)
	}
	checkEnrolled(t, e, resp, "infra", "alice", "laptop")
}

// TestEnrollLifetime checks Service.Lifetime and that no certificate
// outlives the CA.
func TestEnrollLifetime(t *testing.T) {
	tests := []struct {
		name     string
		lifetime time.Duration
		caLeft   time.Duration // how long the CA has left; 0: years
		want     time.Duration
	}{
		{"default", 0, 0, enrollsvc.DefaultLifetime},
		{"set", 7 * 24 * time.Hour, 0, 7 * 24 * time.Hour},
		{"capped by the CA", 0, 48 * time.Hour, 48 * time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			e.svc.Lifetime = tt.lifetime
			if tt.caLeft != 0 {
				dir := t.TempDir()
				if _, err := pki.Init(dir, []string{"localhost"}, pki.Options{CALifetime: tt.caLeft, Now: func() time.Time { return e.now }}); err != nil {
					t.Fatal(err)
				}
				ca, err := pki.LoadCA(filepath.Join(dir, pki.CACertFile), filepath.Join(dir, pki.CAKeyFile))
				if err != nil {
					t.Fatal(err)
				}
				e.svc.CA = ca
			}
			token := e.joinToken(t, "infra", "alice", e.now.Add(time.Hour))
			resp, err := e.svc.Enroll(plainCtx(t), &pb.EnrollRequest{JoinToken: token, CsrDer: newCSR(t, machineKey(t), nil)})
			if err != nil {
				t.Fatal(err)
			}
			if got := resp.GetNotAfter().AsTime().Sub(e.now); got != tt.want {
				t.Errorf("lifetime = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		svc  *enrollsvc.Service
		want string
	}{
		{"no store", &enrollsvc.Service{Store: store.Store(nil)}, "no store"},
		{"negative lifetime", &enrollsvc.Service{Store: &sqlite.Store{}, Lifetime: -time.Hour}, "negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.svc.Validate(); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Validate = %v, want %q", err, tt.want)
			}
		})
	}
	if err := (&enrollsvc.Service{Store: &sqlite.Store{}}).Validate(); err != nil {
		t.Errorf("Validate of a minimal service: %v", err)
	}
}

// TestEnrollMachineLimit: one owner (a user's own machines, or a team's)
// enrolls at most MaxMachines machines, so no user can fill the relay
// every user shares; a revoked machine frees its place, and the limits of
// a user and of their team are apart.
func TestEnrollMachineLimit(t *testing.T) {
	e := newEnv(t)
	e.svc.MaxMachines = 2
	enroll := func(team, user string) (*pb.EnrollResponse, error) {
		t.Helper()
		token := e.joinToken(t, team, user, e.now.Add(time.Hour))
		return e.svc.Enroll(plainCtx(t), &pb.EnrollRequest{JoinToken: token, CsrDer: newCSR(t, machineKey(t), nil), Name: "laptop"})
	}
	var bobs []string
	for range 2 {
		resp, err := enroll("", "bob")
		if err != nil {
			t.Fatalf("bob's machine %d: %v", len(bobs)+1, err)
		}
		bobs = append(bobs, resp.GetMachineId())
	}
	third := e.joinToken(t, "", "bob", e.now.Add(time.Hour))
	_, err := e.svc.Enroll(plainCtx(t), &pb.EnrollRequest{JoinToken: third, CsrDer: newCSR(t, machineKey(t), nil), Name: "laptop"})
	checkStatus(t, err, codes.ResourceExhausted, enrollsvc.CodeMachineLimit,
		"user bob already has 2 machines, the most this relay allows (betcode-relay serve --max-machines-per-owner); revoke one it no longer uses (betcode-relay admin machine revoke ID), then enroll again with the same join token")
	if n := len(e.machines(t)); n != 2 {
		t.Errorf("store has %d machines after the refusal, want 2", n)
	}
	if refused := e.audit(t, enrollsvc.ActionEnrollRefused); len(refused) != 1 || !strings.Contains(refused[0].Detail, "already has 2 machines") {
		t.Errorf("audit: %+v, want one refusal naming the limit", refused)
	}

	// Alice's own machines and her team's count apart, and bob's do not
	// count for anyone else.
	for _, owner := range []struct{ team, user string }{{"", "alice"}, {"", "alice"}, {"infra", "alice"}, {"infra", "alice"}} {
		if _, err := enroll(owner.team, owner.user); err != nil {
			t.Fatalf("%+v: %v", owner, err)
		}
	}
	_, err = enroll("infra", "alice")
	checkStatus(t, err, codes.ResourceExhausted, enrollsvc.CodeMachineLimit, "team infra already has 2 machines")

	// A revoked machine frees its place, and the refused token was not
	// spent: it enrolls now.
	if err := e.st.RevokeMachine(t.Context(), bobs[0], e.now); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Enroll(plainCtx(t), &pb.EnrollRequest{JoinToken: third, CsrDer: newCSR(t, machineKey(t), nil), Name: "laptop"}); err != nil {
		t.Fatalf("the refused token, after revoking one of bob's machines: %v", err)
	}

	// No limit when negative.
	e.svc.MaxMachines = -1
	if _, err := enroll("", "bob"); err != nil {
		t.Fatalf("no limit: %v", err)
	}
}
