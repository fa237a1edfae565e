package adminsvc_test

import (
	"context"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/betcode-dev/betcode/relay/admin"
	"github.com/betcode-dev/betcode/relay/adminsvc"
	"github.com/betcode-dev/betcode/relay/auth"
	"github.com/betcode-dev/betcode/relay/store"
	"github.com/betcode-dev/betcode/relay/store/sqlite"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// testUserKey is the metadata the test interceptor turns into an identity,
// standing in for the relay's authenticating middleware.
const testUserKey = "x-test-user"

type env struct {
	client pb.AdminServiceClient
	ops    *admin.Ops
	st     store.Store
	now    time.Time
	// tokens maps a user to the public id of their token.
	tokens map[string]string
}

// as returns a context whose calls are made as user (admin: a relay
// administrator); "" makes unauthenticated calls.
func (e *env) as(t *testing.T, user string) context.Context {
	if user == "" {
		return t.Context()
	}
	return metadata.AppendToOutgoingContext(t.Context(), testUserKey, user)
}

// newEnv serves AdminService on loopback over a SQLite store holding root
// (relay administrator), alice (owner of team t1), bob (member of t1) and
// carol (no team), each with a client token, and machine m1 of team t1.
func newEnv(t *testing.T) *env {
	t.Helper()
	ctx := t.Context()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "relay.db"), sqlite.Options{Synchronous: "NORMAL"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	now := time.Now().UTC().Truncate(time.Millisecond)
	e := &env{st: st, now: now, tokens: map[string]string{}}
	e.ops = &admin.Ops{Store: st, Now: func() time.Time { return now }, Log: slog.New(slog.NewTextHandler(t.Output(), nil))}
	cli := admin.CLI()
	for _, u := range []store.User{{ID: "root", Admin: true}, {ID: "alice"}, {ID: "bob"}, {ID: "carol"}} {
		if _, err := e.ops.CreateUser(ctx, cli, u); err != nil {
			t.Fatal(err)
		}
		_, tok, err := e.ops.CreateToken(ctx, cli, u.ID, "test", 0)
		if err != nil {
			t.Fatal(err)
		}
		e.tokens[u.ID] = tok.ID
	}
	if _, err := e.ops.CreateTeam(ctx, cli, "t1", "alice"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.ops.AddMember(ctx, cli, "t1", "bob", store.RoleMember); err != nil {
		t.Fatal(err)
	}
	if err := st.UpsertMachine(ctx, store.Machine{ID: "m1", OwnerID: "alice", TeamID: "t1", Name: "box"}); err != nil {
		t.Fatal(err)
	}

	// identify stands in for the lead's middleware: it reads the user
	// from metadata and the rest from the store.
	identify := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		if v := md.Get(testUserKey); len(v) == 1 {
			u, err := st.GetUser(ctx, v[0])
			if err != nil {
				return nil, status.Errorf(codes.Unauthenticated, "test identity: %v", err)
			}
			ctx = auth.WithIdentity(ctx, auth.Identity{UserID: u.ID, Admin: u.Admin, TokenID: e.tokens[u.ID], Remote: "198.51.100.7:4242"})
		}
		return handler(ctx, req)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(grpc.UnaryInterceptor(identify))
	svc := adminsvc.New(e.ops)
	svc.Online = func(m *store.Machine) bool { return m.ID == "m1" }
	pb.RegisterAdminServiceServer(gs, svc)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = gs.Serve(lis)
	}()
	t.Cleanup(func() {
		gs.Stop()
		<-done
	})
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	e.client = pb.NewAdminServiceClient(conn)
	return e
}

// TestUnauthenticated: every RPC refuses a call without an identity.
func TestUnauthenticated(t *testing.T) {
	e := newEnv(t)
	ctx := e.as(t, "")
	c := e.client
	calls := map[string]func() error{
		"WhoAmI":      func() error { _, err := c.WhoAmI(ctx, &pb.WhoAmIRequest{}); return err },
		"CreateUser":  func() error { _, err := c.CreateUser(ctx, &pb.CreateUserRequest{Id: "x"}); return err },
		"ListUsers":   func() error { _, err := c.ListUsers(ctx, &pb.ListUsersRequest{}); return err },
		"DisableUser": func() error { _, err := c.DisableUser(ctx, &pb.DisableUserRequest{UserId: "bob"}); return err },
		"CreateTeam":  func() error { _, err := c.CreateTeam(ctx, &pb.CreateTeamRequest{Id: "x"}); return err },
		"ListTeams":   func() error { _, err := c.ListTeams(ctx, &pb.ListTeamsRequest{}); return err },
		"AddTeamMember": func() error {
			_, err := c.AddTeamMember(ctx, &pb.AddTeamMemberRequest{TeamId: "t1", UserId: "carol"})
			return err
		},
		"RemoveTeamMember": func() error {
			_, err := c.RemoveTeamMember(ctx, &pb.RemoveTeamMemberRequest{TeamId: "t1", UserId: "bob"})
			return err
		},
		"CreateToken": func() error { _, err := c.CreateToken(ctx, &pb.CreateTokenRequest{}); return err },
		"ListTokens":  func() error { _, err := c.ListTokens(ctx, &pb.ListTokensRequest{}); return err },
		"RevokeToken": func() error {
			_, err := c.RevokeToken(ctx, &pb.RevokeTokenRequest{TokenId: e.tokens["bob"]})
			return err
		},
		"CreateEnrollToken": func() error { _, err := c.CreateEnrollToken(ctx, &pb.CreateEnrollTokenRequest{}); return err },
		"ListAdminMachines": func() error { _, err := c.ListAdminMachines(ctx, &pb.ListAdminMachinesRequest{}); return err },
		"RevokeMachine":     func() error { _, err := c.RevokeMachine(ctx, &pb.RevokeMachineRequest{MachineId: "m1"}); return err },
		"DeleteMachine":     func() error { _, err := c.DeleteMachine(ctx, &pb.DeleteMachineRequest{MachineId: "m1"}); return err },
		"ListAudit":         func() error { _, err := c.ListAudit(ctx, &pb.ListAuditRequest{}); return err },
	}
	if n := len(pb.AdminService_ServiceDesc.Methods); n != len(calls) {
		t.Fatalf("AdminService has %d methods, the test calls %d", n, len(calls))
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			if err := call(); status.Code(err) != codes.Unauthenticated {
				t.Errorf("got %v, want UNAUTHENTICATED", err)
			}
		})
	}
}

func TestWhoAmI(t *testing.T) {
	e := newEnv(t)
	resp, err := e.client.WhoAmI(e.as(t, "bob"), &pb.WhoAmIRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetUser().GetId() != "bob" || resp.GetUser().GetAdmin() || resp.GetTokenId() != e.tokens["bob"] {
		t.Errorf("WhoAmI %v", resp)
	}
	if got := resp.GetTokenExpiresAt().AsTime(); !got.Equal(e.now.Add(admin.DefaultTokenTTL)) {
		t.Errorf("token expires %v, want %v", got, e.now.Add(admin.DefaultTokenTTL))
	}
	if len(resp.GetTeams()) != 1 || resp.GetTeams()[0].GetTeamId() != "t1" || resp.GetTeams()[0].GetRole() != pb.TeamRole_TEAM_ROLE_MEMBER {
		t.Errorf("teams %v, want member of t1", resp.GetTeams())
	}
}

// TestCalls runs each RPC as a caller and checks the answer's code and
// content.
func TestCalls(t *testing.T) {
	cases := []struct {
		name string
		as   string
		call func(ctx context.Context, e *env) (any, error)
		want codes.Code
		// check, if set, inspects a successful response.
		check func(t *testing.T, e *env, resp any)
	}{
		{
			name: "admin creates a user", as: "root", want: codes.OK,
			call: func(ctx context.Context, e *env) (any, error) {
				return e.client.CreateUser(ctx, &pb.CreateUserRequest{Id: "dave", Email: "dave@example.com", Admin: true})
			},
			check: func(t *testing.T, _ *env, resp any) {
				u := resp.(*pb.CreateUserResponse).GetUser()
				if u.GetId() != "dave" || !u.GetAdmin() || u.GetEmail() != "dave@example.com" || u.GetCreatedAt() == nil {
					t.Errorf("user %v", u)
				}
			},
		},
		{
			name: "member may not create users", as: "bob", want: codes.PermissionDenied,
			call: func(ctx context.Context, e *env) (any, error) {
				return e.client.CreateUser(ctx, &pb.CreateUserRequest{Id: "dave"})
			},
		},
		{
			name: "existing user", as: "root", want: codes.AlreadyExists,
			call: func(ctx context.Context, e *env) (any, error) {
				return e.client.CreateUser(ctx, &pb.CreateUserRequest{Id: "bob"})
			},
		},
		{
			name: "admin disables and re-enables", as: "root", want: codes.OK,
			call: func(ctx context.Context, e *env) (any, error) {
				if _, err := e.client.DisableUser(ctx, &pb.DisableUserRequest{UserId: "carol"}); err != nil {
					return nil, err
				}
				return e.client.DisableUser(ctx, &pb.DisableUserRequest{UserId: "carol", Enable: true})
			},
			check: func(t *testing.T, _ *env, resp any) {
				if u := resp.(*pb.DisableUserResponse).GetUser(); u.GetDisabled() {
					t.Errorf("user %v still disabled", u)
				}
			},
		},
		{
			name: "admin creates a team owned by the caller", as: "root", want: codes.OK,
			call: func(ctx context.Context, e *env) (any, error) {
				return e.client.CreateTeam(ctx, &pb.CreateTeamRequest{Id: "ops"})
			},
			check: func(t *testing.T, _ *env, resp any) {
				tm := resp.(*pb.CreateTeamResponse).GetTeam()
				if tm.GetId() != "ops" || len(tm.GetMembers()) != 1 || tm.GetMembers()[0].GetUserId() != "root" || tm.GetMembers()[0].GetRole() != pb.TeamRole_TEAM_ROLE_OWNER {
					t.Errorf("team %v", tm)
				}
			},
		},
		{
			name: "owner adds an admin", as: "alice", want: codes.OK,
			call: func(ctx context.Context, e *env) (any, error) {
				return e.client.AddTeamMember(ctx, &pb.AddTeamMemberRequest{TeamId: "t1", UserId: "carol", Role: pb.TeamRole_TEAM_ROLE_ADMIN})
			},
			check: func(t *testing.T, _ *env, resp any) {
				if m := resp.(*pb.AddTeamMemberResponse).GetMember(); m.GetRole() != pb.TeamRole_TEAM_ROLE_ADMIN {
					t.Errorf("member %v", m)
				}
			},
		},
		{
			name: "unspecified role is member", as: "alice", want: codes.OK,
			call: func(ctx context.Context, e *env) (any, error) {
				return e.client.AddTeamMember(ctx, &pb.AddTeamMemberRequest{TeamId: "t1", UserId: "carol"})
			},
			check: func(t *testing.T, _ *env, resp any) {
				if m := resp.(*pb.AddTeamMemberResponse).GetMember(); m.GetRole() != pb.TeamRole_TEAM_ROLE_MEMBER {
					t.Errorf("member %v", m)
				}
			},
		},
		{
			name: "unknown role", as: "alice", want: codes.InvalidArgument,
			call: func(ctx context.Context, e *env) (any, error) {
				return e.client.AddTeamMember(ctx, &pb.AddTeamMemberRequest{TeamId: "t1", UserId: "carol", Role: 42})
			},
		},
		{
			name: "member may not add members", as: "bob", want: codes.PermissionDenied,
			call: func(ctx context.Context, e *env) (any, error) {
				return e.client.AddTeamMember(ctx, &pb.AddTeamMemberRequest{TeamId: "t1", UserId: "carol"})
			},
		},
		{
			name: "outsider does not see the team", as: "carol", want: codes.NotFound,
			call: func(ctx context.Context, e *env) (any, error) {
				return e.client.RemoveTeamMember(ctx, &pb.RemoveTeamMemberRequest{TeamId: "t1", UserId: "bob"})
			},
		},
		{
			name: "token with defaults", as: "bob", want: codes.OK,
			call: func(ctx context.Context, e *env) (any, error) {
				return e.client.CreateToken(ctx, &pb.CreateTokenRequest{Name: "laptop"})
			},
			check: func(t *testing.T, e *env, resp any) {
				r := resp.(*pb.CreateTokenResponse)
				if !strings.HasPrefix(r.GetToken(), "bct_") || r.GetInfo().GetUserId() != "bob" || r.GetInfo().GetName() != "laptop" {
					t.Errorf("token %v", r.GetInfo())
				}
				if got := r.GetInfo().GetExpiresAt().AsTime(); !got.Equal(e.now.Add(admin.DefaultTokenTTL)) {
					t.Errorf("expires %v, want in 720h", got)
				}
			},
		},
		{
			name: "token ttl", as: "bob", want: codes.OK,
			call: func(ctx context.Context, e *env) (any, error) {
				return e.client.CreateToken(ctx, &pb.CreateTokenRequest{TtlSeconds: 3600})
			},
			check: func(t *testing.T, e *env, resp any) {
				if got := resp.(*pb.CreateTokenResponse).GetInfo().GetExpiresAt().AsTime(); !got.Equal(e.now.Add(time.Hour)) {
					t.Errorf("expires %v, want in 1h", got)
				}
			},
		},
		{
			name: "negative ttl", as: "bob", want: codes.InvalidArgument,
			call: func(ctx context.Context, e *env) (any, error) {
				return e.client.CreateToken(ctx, &pb.CreateTokenRequest{TtlSeconds: -1})
			},
		},
		{
			name: "huge ttl", as: "bob", want: codes.InvalidArgument,
			call: func(ctx context.Context, e *env) (any, error) {
				return e.client.CreateToken(ctx, &pb.CreateTokenRequest{TtlSeconds: 1 << 62})
			},
		},
		{
			name: "token for someone else", as: "bob", want: codes.PermissionDenied,
			call: func(ctx context.Context, e *env) (any, error) {
				return e.client.CreateToken(ctx, &pb.CreateTokenRequest{UserId: "carol"})
			},
		},
		{
			name: "list own tokens", as: "bob", want: codes.OK,
			call: func(ctx context.Context, e *env) (any, error) {
				return e.client.ListTokens(ctx, &pb.ListTokensRequest{})
			},
			check: func(t *testing.T, e *env, resp any) {
				ts := resp.(*pb.ListTokensResponse).GetTokens()
				if len(ts) != 1 || ts[0].GetId() != e.tokens["bob"] {
					t.Errorf("tokens %v", ts)
				}
			},
		},
		{
			name: "admin lists everyone's tokens", as: "root", want: codes.OK,
			call: func(ctx context.Context, e *env) (any, error) {
				return e.client.ListTokens(ctx, &pb.ListTokensRequest{UserId: admin.AllUsers})
			},
			check: func(t *testing.T, _ *env, resp any) {
				if n := len(resp.(*pb.ListTokensResponse).GetTokens()); n != 4 {
					t.Errorf("%d tokens, want 4", n)
				}
			},
		},
		{
			name: "another user's token is not found", as: "carol", want: codes.NotFound,
			call: func(ctx context.Context, e *env) (any, error) {
				return e.client.RevokeToken(ctx, &pb.RevokeTokenRequest{TokenId: e.tokens["bob"]})
			},
		},
		{
			name: "revoke own token", as: "bob", want: codes.OK,
			call: func(ctx context.Context, e *env) (any, error) {
				return e.client.RevokeToken(ctx, &pb.RevokeTokenRequest{TokenId: e.tokens["bob"]})
			},
			check: func(t *testing.T, e *env, resp any) {
				if info := resp.(*pb.RevokeTokenResponse).GetInfo(); info.GetRevokedAt() == nil || !info.GetRevokedAt().AsTime().Equal(e.now) {
					t.Errorf("token %v, want revoked now", info)
				}
			},
		},
		{
			name: "owner creates a team join token", as: "alice", want: codes.OK,
			call: func(ctx context.Context, e *env) (any, error) {
				return e.client.CreateEnrollToken(ctx, &pb.CreateEnrollTokenRequest{TeamId: "t1", TtlSeconds: 600})
			},
			check: func(t *testing.T, e *env, resp any) {
				r := resp.(*pb.CreateEnrollTokenResponse)
				if !strings.HasPrefix(r.GetToken(), "bcj_") || r.GetTokenId() == "" || !r.GetExpiresAt().AsTime().Equal(e.now.Add(10*time.Minute)) {
					t.Errorf("join token %v", r)
				}
			},
		},
		{
			name: "join token ttl over a day", as: "alice", want: codes.InvalidArgument,
			call: func(ctx context.Context, e *env) (any, error) {
				return e.client.CreateEnrollToken(ctx, &pb.CreateEnrollTokenRequest{TtlSeconds: 25 * 3600})
			},
		},
		{
			name: "member may not enroll for the team", as: "bob", want: codes.PermissionDenied,
			call: func(ctx context.Context, e *env) (any, error) {
				return e.client.CreateEnrollToken(ctx, &pb.CreateEnrollTokenRequest{TeamId: "t1"})
			},
		},
		{
			name: "owner lists the team's machines", as: "alice", want: codes.OK,
			call: func(ctx context.Context, e *env) (any, error) {
				return e.client.ListAdminMachines(ctx, &pb.ListAdminMachinesRequest{})
			},
			check: func(t *testing.T, _ *env, resp any) {
				ms := resp.(*pb.ListAdminMachinesResponse).GetMachines()
				if len(ms) != 1 || ms[0].GetId() != "m1" || ms[0].GetTeamId() != "t1" || !ms[0].GetOnline() || ms[0].GetRevokedAt() != nil {
					t.Errorf("machines %v", ms)
				}
			},
		},
		{
			name: "member lists no machines", as: "bob", want: codes.OK,
			call: func(ctx context.Context, e *env) (any, error) {
				return e.client.ListAdminMachines(ctx, &pb.ListAdminMachinesRequest{})
			},
			check: func(t *testing.T, _ *env, resp any) {
				if ms := resp.(*pb.ListAdminMachinesResponse).GetMachines(); len(ms) != 0 {
					t.Errorf("machines %v", ms)
				}
			},
		},
		{
			name: "member may not revoke the team's machine", as: "bob", want: codes.PermissionDenied,
			call: func(ctx context.Context, e *env) (any, error) {
				return e.client.RevokeMachine(ctx, &pb.RevokeMachineRequest{MachineId: "m1"})
			},
		},
		{
			name: "outsider does not see the machine", as: "carol", want: codes.NotFound,
			call: func(ctx context.Context, e *env) (any, error) {
				return e.client.DeleteMachine(ctx, &pb.DeleteMachineRequest{MachineId: "m1"})
			},
		},
		{
			name: "owner revokes the machine", as: "alice", want: codes.OK,
			call: func(ctx context.Context, e *env) (any, error) {
				if _, err := e.client.RevokeMachine(ctx, &pb.RevokeMachineRequest{MachineId: "m1"}); err != nil {
					return nil, err
				}
				return e.client.ListAdminMachines(ctx, &pb.ListAdminMachinesRequest{})
			},
			check: func(t *testing.T, _ *env, resp any) {
				ms := resp.(*pb.ListAdminMachinesResponse).GetMachines()
				if len(ms) != 1 || ms[0].GetRevokedAt() == nil || ms[0].GetOnline() {
					t.Errorf("machines %v, want m1 revoked and offline", ms)
				}
			},
		},
		{
			name: "audit since", as: "root", want: codes.OK,
			call: func(ctx context.Context, e *env) (any, error) {
				if _, err := e.client.RevokeMachine(ctx, &pb.RevokeMachineRequest{MachineId: "m1"}); err != nil {
					return nil, err
				}
				return e.client.ListAudit(ctx, &pb.ListAuditRequest{Since: timestamppb.New(e.now), UserId: "root"})
			},
			check: func(t *testing.T, _ *env, resp any) {
				evs := resp.(*pb.ListAuditResponse).GetEvents()
				last := evs[len(evs)-1]
				if last.GetAction() != admin.ActionMachineRevoked || last.GetActor() != "root" || last.GetRemote() != "198.51.100.7:4242" || last.GetOutcome() != admin.OutcomeOK || last.GetTarget() != "machine:m1" {
					t.Errorf("last event %v", last)
				}
			},
		},
		{
			name: "member's audit is their own", as: "bob", want: codes.OK,
			call: func(ctx context.Context, e *env) (any, error) {
				if _, err := e.client.RevokeMachine(ctx, &pb.RevokeMachineRequest{MachineId: "m1"}); status.Code(err) != codes.PermissionDenied {
					return nil, err
				}
				return e.client.ListAudit(ctx, &pb.ListAuditRequest{UserId: "alice"})
			},
			check: func(t *testing.T, _ *env, resp any) {
				evs := resp.(*pb.ListAuditResponse).GetEvents()
				if len(evs) == 0 || evs[len(evs)-1].GetAction() != admin.ActionAccessDenied {
					t.Fatalf("events %v, want bob's refusal last", evs)
				}
				for _, ev := range evs {
					if ev.GetActor() != "bob" && ev.GetTarget() != "bob" {
						t.Errorf("bob sees %v", ev)
					}
				}
			},
		},
		{
			name: "invalid since", as: "root", want: codes.InvalidArgument,
			call: func(ctx context.Context, e *env) (any, error) {
				return e.client.ListAudit(ctx, &pb.ListAuditRequest{Since: &timestamppb.Timestamp{Nanos: -1}})
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			resp, err := tc.call(e.as(t, tc.as), e)
			if status.Code(err) != tc.want {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			if err == nil && tc.check != nil {
				tc.check(t, e, resp)
			}
		})
	}
}
