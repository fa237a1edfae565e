package adminsvc

import (
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/betcode-dev/betcode/relay/admin"
	"github.com/betcode-dev/betcode/relay/store"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// ts is t as a Timestamp, nil for the zero time ("never", "not yet").
func ts(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}

func userPB(u *store.User) *pb.User {
	return &pb.User{Id: u.ID, Email: u.Email, Admin: u.Admin, Disabled: u.Disabled, CreatedAt: ts(u.CreatedAt)}
}

func memberPB(m store.Member) *pb.TeamMember {
	return &pb.TeamMember{TeamId: m.TeamID, UserId: m.UserID, Role: rolePB(m.Role)}
}

func teamPB(t *admin.TeamInfo) *pb.Team {
	out := &pb.Team{Id: t.ID, CreatedAt: ts(t.CreatedAt)}
	for _, m := range t.Members {
		out.Members = append(out.Members, memberPB(m))
	}
	return out
}

func tokenPB(t *store.Token) *pb.TokenInfo {
	return &pb.TokenInfo{
		Id: t.ID, UserId: t.UserID, Name: t.Name, CreatedAt: ts(t.CreatedAt), ExpiresAt: ts(t.ExpiresAt),
		LastUsedAt: ts(t.LastUsedAt), LastUsedAddr: t.LastUsedAddr, RevokedAt: ts(t.RevokedAt),
	}
}

func rolePB(r store.Role) pb.TeamRole {
	switch r {
	case store.RoleOwner:
		return pb.TeamRole_TEAM_ROLE_OWNER
	case store.RoleAdmin:
		return pb.TeamRole_TEAM_ROLE_ADMIN
	case store.RoleMember:
		return pb.TeamRole_TEAM_ROLE_MEMBER
	}
	return pb.TeamRole_TEAM_ROLE_UNSPECIFIED
}

// roleFromPB maps a requested role; unspecified is "" (admin.Ops's
// default, member).
func roleFromPB(r pb.TeamRole) (store.Role, error) {
	switch r {
	case pb.TeamRole_TEAM_ROLE_UNSPECIFIED:
		return "", nil
	case pb.TeamRole_TEAM_ROLE_OWNER:
		return store.RoleOwner, nil
	case pb.TeamRole_TEAM_ROLE_ADMIN:
		return store.RoleAdmin, nil
	case pb.TeamRole_TEAM_ROLE_MEMBER:
		return store.RoleMember, nil
	}
	return "", status.Errorf(codes.InvalidArgument, "role: unknown team role %d", r)
}
