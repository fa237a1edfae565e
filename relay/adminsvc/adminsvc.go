// Package adminsvc implements the gRPC AdminService: remote administration
// of the relay's users, teams, tokens, join tokens, machines and audit log.
// Each RPC maps its request onto relay/admin, acting for the caller that
// the authenticating middleware put in the context (relay/auth), so the
// service allows, refuses and words errors exactly as `betcode-relay admin`
// does.
package adminsvc

import (
	"context"
	"math"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/betcode-dev/betcode/relay/admin"
	"github.com/betcode-dev/betcode/relay/auth"
	"github.com/betcode-dev/betcode/relay/store"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

var _ pb.AdminServiceServer = (*Server)(nil)

// Server implements AdminService over admin.Ops.
type Server struct {
	pb.UnimplementedAdminServiceServer
	Ops *admin.Ops
	// Online reports whether machine m has a tunnel to some replica now;
	// nil reports every machine offline.
	Online func(m *store.Machine) bool
}

// New returns an AdminService over ops. Set Online to report machines'
// presence.
func New(ops *admin.Ops) *Server { return &Server{Ops: ops} }

// actor is the caller: UNAUTHENTICATED without an identity.
func actor(ctx context.Context) (admin.Actor, auth.Identity, error) {
	id, ok := auth.FromContext(ctx)
	if !ok || id.UserID == "" {
		return admin.Actor{}, auth.Identity{}, status.Error(codes.Unauthenticated, "authentication required: log in with `betcode login`")
	}
	return admin.Actor{UserID: id.UserID, Admin: id.Admin, Remote: id.Remote}, id, nil
}

// WhoAmI returns the caller's user, teams and token.
func (s *Server) WhoAmI(ctx context.Context, _ *pb.WhoAmIRequest) (*pb.WhoAmIResponse, error) {
	a, id, err := actor(ctx)
	if err != nil {
		return nil, err
	}
	me, err := s.Ops.WhoAmI(ctx, a, id.TokenID)
	if err != nil {
		return nil, err
	}
	resp := &pb.WhoAmIResponse{User: userPB(&me.User), TokenId: id.TokenID}
	for _, m := range me.Teams {
		resp.Teams = append(resp.Teams, memberPB(m))
	}
	if me.Token != nil {
		resp.TokenExpiresAt = ts(me.Token.ExpiresAt)
	}
	return resp, nil
}

// CreateUser adds a user.
func (s *Server) CreateUser(ctx context.Context, req *pb.CreateUserRequest) (*pb.CreateUserResponse, error) {
	a, _, err := actor(ctx)
	if err != nil {
		return nil, err
	}
	u, err := s.Ops.CreateUser(ctx, a, store.User{ID: req.GetId(), Email: req.GetEmail(), Admin: req.GetAdmin()})
	if err != nil {
		return nil, err
	}
	return &pb.CreateUserResponse{User: userPB(&u)}, nil
}

// ListUsers lists every user.
func (s *Server) ListUsers(ctx context.Context, _ *pb.ListUsersRequest) (*pb.ListUsersResponse, error) {
	a, _, err := actor(ctx)
	if err != nil {
		return nil, err
	}
	us, err := s.Ops.ListUsers(ctx, a)
	if err != nil {
		return nil, err
	}
	resp := &pb.ListUsersResponse{}
	for i := range us {
		resp.Users = append(resp.Users, userPB(&us[i]))
	}
	return resp, nil
}

// DisableUser disables or re-enables a user.
func (s *Server) DisableUser(ctx context.Context, req *pb.DisableUserRequest) (*pb.DisableUserResponse, error) {
	a, _, err := actor(ctx)
	if err != nil {
		return nil, err
	}
	u, err := s.Ops.DisableUser(ctx, a, req.GetUserId(), !req.GetEnable())
	if err != nil {
		return nil, err
	}
	return &pb.DisableUserResponse{User: userPB(&u)}, nil
}

// CreateTeam adds a team with its first owner.
func (s *Server) CreateTeam(ctx context.Context, req *pb.CreateTeamRequest) (*pb.CreateTeamResponse, error) {
	a, _, err := actor(ctx)
	if err != nil {
		return nil, err
	}
	t, err := s.Ops.CreateTeam(ctx, a, req.GetId(), req.GetOwnerUserId())
	if err != nil {
		return nil, err
	}
	return &pb.CreateTeamResponse{Team: teamPB(&t)}, nil
}

// ListTeams lists the caller's teams (every team for administrators).
func (s *Server) ListTeams(ctx context.Context, _ *pb.ListTeamsRequest) (*pb.ListTeamsResponse, error) {
	a, _, err := actor(ctx)
	if err != nil {
		return nil, err
	}
	teams, err := s.Ops.ListTeams(ctx, a)
	if err != nil {
		return nil, err
	}
	resp := &pb.ListTeamsResponse{}
	for i := range teams {
		resp.Teams = append(resp.Teams, teamPB(&teams[i]))
	}
	return resp, nil
}

// AddTeamMember adds a member or changes a role.
func (s *Server) AddTeamMember(ctx context.Context, req *pb.AddTeamMemberRequest) (*pb.AddTeamMemberResponse, error) {
	a, _, err := actor(ctx)
	if err != nil {
		return nil, err
	}
	role, err := roleFromPB(req.GetRole())
	if err != nil {
		return nil, err
	}
	m, err := s.Ops.AddMember(ctx, a, req.GetTeamId(), req.GetUserId(), role)
	if err != nil {
		return nil, err
	}
	return &pb.AddTeamMemberResponse{Member: memberPB(m)}, nil
}

// RemoveTeamMember removes a member.
func (s *Server) RemoveTeamMember(ctx context.Context, req *pb.RemoveTeamMemberRequest) (*pb.RemoveTeamMemberResponse, error) {
	a, _, err := actor(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.Ops.RemoveMember(ctx, a, req.GetTeamId(), req.GetUserId()); err != nil {
		return nil, err
	}
	return &pb.RemoveTeamMemberResponse{}, nil
}

// CreateToken creates a client token and returns its secret once.
func (s *Server) CreateToken(ctx context.Context, req *pb.CreateTokenRequest) (*pb.CreateTokenResponse, error) {
	a, _, err := actor(ctx)
	if err != nil {
		return nil, err
	}
	ttl, err := seconds("ttl_seconds", req.GetTtlSeconds())
	if err != nil {
		return nil, err
	}
	secret, t, err := s.Ops.CreateToken(ctx, a, req.GetUserId(), req.GetName(), ttl)
	if err != nil {
		return nil, err
	}
	return &pb.CreateTokenResponse{Token: secret, Info: tokenPB(&t)}, nil
}

// ListTokens lists tokens without their secrets.
func (s *Server) ListTokens(ctx context.Context, req *pb.ListTokensRequest) (*pb.ListTokensResponse, error) {
	a, _, err := actor(ctx)
	if err != nil {
		return nil, err
	}
	toks, err := s.Ops.ListTokens(ctx, a, req.GetUserId())
	if err != nil {
		return nil, err
	}
	resp := &pb.ListTokensResponse{}
	for i := range toks {
		resp.Tokens = append(resp.Tokens, tokenPB(&toks[i]))
	}
	return resp, nil
}

// RevokeToken revokes a token.
func (s *Server) RevokeToken(ctx context.Context, req *pb.RevokeTokenRequest) (*pb.RevokeTokenResponse, error) {
	a, _, err := actor(ctx)
	if err != nil {
		return nil, err
	}
	t, err := s.Ops.RevokeToken(ctx, a, req.GetTokenId())
	if err != nil {
		return nil, err
	}
	return &pb.RevokeTokenResponse{Info: tokenPB(&t)}, nil
}

// CreateEnrollToken creates a join token for a team or the caller and
// returns its secret once.
func (s *Server) CreateEnrollToken(ctx context.Context, req *pb.CreateEnrollTokenRequest) (*pb.CreateEnrollTokenResponse, error) {
	a, _, err := actor(ctx)
	if err != nil {
		return nil, err
	}
	ttl, err := seconds("ttl_seconds", req.GetTtlSeconds())
	if err != nil {
		return nil, err
	}
	secret, t, err := s.Ops.CreateEnrollToken(ctx, a, req.GetTeamId(), "", ttl)
	if err != nil {
		return nil, err
	}
	return &pb.CreateEnrollTokenResponse{Token: secret, TokenId: t.ID, ExpiresAt: ts(t.ExpiresAt)}, nil
}

// ListAdminMachines lists the machines the caller manages.
func (s *Server) ListAdminMachines(ctx context.Context, _ *pb.ListAdminMachinesRequest) (*pb.ListAdminMachinesResponse, error) {
	a, _, err := actor(ctx)
	if err != nil {
		return nil, err
	}
	ms, err := s.Ops.ListMachines(ctx, a)
	if err != nil {
		return nil, err
	}
	resp := &pb.ListAdminMachinesResponse{}
	for i := range ms {
		m := &ms[i]
		resp.Machines = append(resp.Machines, &pb.AdminMachine{
			Id: m.ID, Name: m.Name, OwnerUserId: m.OwnerID, TeamId: m.TeamID,
			RegisteredAt: ts(m.RegisteredAt), LastSeen: ts(m.LastSeen), RevokedAt: ts(m.RevokedAt),
			Online: m.RevokedAt.IsZero() && s.Online != nil && s.Online(m),
		})
	}
	return resp, nil
}

// RevokeMachine revokes a machine.
func (s *Server) RevokeMachine(ctx context.Context, req *pb.RevokeMachineRequest) (*pb.RevokeMachineResponse, error) {
	a, _, err := actor(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.Ops.RevokeMachine(ctx, a, req.GetMachineId()); err != nil {
		return nil, err
	}
	return &pb.RevokeMachineResponse{}, nil
}

// DeleteMachine revokes and forgets a machine.
func (s *Server) DeleteMachine(ctx context.Context, req *pb.DeleteMachineRequest) (*pb.DeleteMachineResponse, error) {
	a, _, err := actor(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.Ops.DeleteMachine(ctx, a, req.GetMachineId()); err != nil {
		return nil, err
	}
	return &pb.DeleteMachineResponse{}, nil
}

// ListAudit lists audit events.
func (s *Server) ListAudit(ctx context.Context, req *pb.ListAuditRequest) (*pb.ListAuditResponse, error) {
	a, _, err := actor(ctx)
	if err != nil {
		return nil, err
	}
	q := admin.AuditQuery{UserID: req.GetUserId(), Limit: int(req.GetLimit())}
	if req.GetSince() != nil {
		if err := req.GetSince().CheckValid(); err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "since: %v", err)
		}
		q.Since = req.GetSince().AsTime()
	}
	evs, err := s.Ops.Audit(ctx, a, q)
	if err != nil {
		return nil, err
	}
	resp := &pb.ListAuditResponse{}
	for _, e := range evs {
		resp.Events = append(resp.Events, &pb.AuditEvent{
			Id: e.ID, At: ts(e.At), Actor: e.Actor, Action: e.Action, Target: e.Target,
			Remote: e.Remote, Outcome: e.Outcome, Detail: e.Detail,
		})
	}
	return resp, nil
}

// seconds converts a request's lifetime in seconds.
func seconds(field string, n int64) (time.Duration, error) {
	if n < 0 || n > math.MaxInt64/int64(time.Second) {
		return 0, status.Errorf(codes.InvalidArgument, "%s: want 0 (the default) or a positive number of seconds, got %d", field, n)
	}
	return time.Duration(n) * time.Second, nil
}
