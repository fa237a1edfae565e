package admin

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/betcode-dev/betcode/relay/store"
)

// TeamInfo is a team and its members.
type TeamInfo struct {
	store.Team
	// Members ordered by user id.
	Members []store.Member
}

// CreateTeam adds team id with owner as its first owner (relay
// administrators). An empty owner is the caller.
func (o *Ops) CreateTeam(ctx context.Context, a Actor, id, owner string) (_ TeamInfo, err error) {
	p := o.begin(a, ActionTeamCreated, teamTarget(id), true)
	defer func() { p.end(ctx, err) }()
	c, err := o.resolve(ctx, a)
	if err != nil {
		return TeamInfo{}, err
	}
	if !c.admin {
		return TeamInfo{}, errOnlyAdmins("creating teams")
	}
	if err := checkTeam("id", id); err != nil {
		return TeamInfo{}, err
	}
	if owner == "" {
		if c.CLI {
			return TeamInfo{}, invalid("owner_user_id", "required (the admin command acts for no user)")
		}
		owner = c.UserID
	}
	if err := checkUser("owner_user_id", owner); err != nil {
		return TeamInfo{}, err
	}
	if _, err := o.activeUser(ctx, owner); err != nil {
		return TeamInfo{}, err
	}
	t := store.Team{ID: id, CreatedAt: o.now()}
	if err := o.Store.CreateTeam(ctx, t); err != nil {
		if errors.Is(err, store.ErrExists) {
			return TeamInfo{}, status.Errorf(codes.AlreadyExists, "team %q already exists", id)
		}
		return TeamInfo{}, storeErr(err, "create team %q", id)
	}
	m := store.Member{TeamID: id, UserID: owner, Role: store.RoleOwner, AddedAt: t.CreatedAt}
	if err := o.Store.SetMember(ctx, m); err != nil {
		return TeamInfo{}, storeErr(err, "team %q was created without an owner (add one with add-member --role owner)", id)
	}
	p.detail = fmt.Sprintf("created team %s with owner %s", id, owner)
	return TeamInfo{Team: t, Members: []store.Member{m}}, nil
}

// ListTeams returns teams ordered by id with their members: every team for
// relay administrators, the caller's own for anyone else.
func (o *Ops) ListTeams(ctx context.Context, a Actor) (_ []TeamInfo, err error) {
	p := o.begin(a, "team.list", "", false)
	defer func() { p.end(ctx, err) }()
	c, err := o.resolve(ctx, a)
	if err != nil {
		return nil, err
	}
	var teams []store.Team
	if c.admin {
		if teams, err = o.Store.ListTeams(ctx); err != nil {
			return nil, storeErr(err, "list teams")
		}
	} else {
		for _, m := range c.teams {
			t, err := o.Store.GetTeam(ctx, m.TeamID)
			if err != nil {
				return nil, storeErr(err, "read team %q", m.TeamID)
			}
			teams = append(teams, t)
		}
	}
	out := make([]TeamInfo, 0, len(teams))
	for _, t := range teams {
		ms, err := o.Store.Members(ctx, t.ID)
		if err != nil {
			return nil, storeErr(err, "list members of team %q", t.ID)
		}
		out = append(out, TeamInfo{Team: t, Members: ms})
	}
	return out, nil
}

// AddMember adds user to team with role (empty: member), or changes the
// role of a member. Team owners and admins may; only owners grant or take
// the owner role, and the last owner keeps it.
func (o *Ops) AddMember(ctx context.Context, a Actor, team, user string, role store.Role) (_ store.Member, err error) {
	p := o.begin(a, ActionMemberAdded, user, true)
	defer func() { p.end(ctx, err) }()
	c, err := o.resolve(ctx, a)
	if err != nil {
		return store.Member{}, err
	}
	if role == "" {
		role = store.RoleMember
	}
	if err := checkTeam("team_id", team); err != nil {
		return store.Member{}, err
	}
	if err := checkUser("user_id", user); err != nil {
		return store.Member{}, err
	}
	if !role.Valid() {
		return store.Member{}, invalid("role", "want owner, admin or member, got %q", role)
	}
	mine, err := o.teamRole(ctx, c, team, "adding members")
	if err != nil {
		return store.Member{}, err
	}
	members, err := o.Store.Members(ctx, team)
	if err != nil {
		return store.Member{}, storeErr(err, "list members of team %q", team)
	}
	current := roleOf(members, user)
	if (role == store.RoleOwner || current == store.RoleOwner) && mine != store.RoleOwner {
		return store.Member{}, refuse(codes.PermissionDenied, "team %q: only owners may grant or remove the owner role", team)
	}
	if current == store.RoleOwner && role != store.RoleOwner && owners(members) == 1 {
		return store.Member{}, lastOwner(team, user)
	}
	if _, err := o.activeUser(ctx, user); err != nil {
		return store.Member{}, err
	}
	m := store.Member{TeamID: team, UserID: user, Role: role, AddedAt: o.now()}
	if err := o.Store.SetMember(ctx, m); err != nil {
		return store.Member{}, storeErr(err, "add %q to team %q", user, team)
	}
	if current == "" {
		p.detail = fmt.Sprintf("added %s to team %s as %s", user, team, role)
	} else {
		p.detail = fmt.Sprintf("changed the role of %s in team %s from %s to %s", user, team, current, role)
	}
	return m, nil
}

// RemoveMember removes user from team. Team owners and admins may; only
// owners remove an owner, and never the last one.
func (o *Ops) RemoveMember(ctx context.Context, a Actor, team, user string) (err error) {
	p := o.begin(a, ActionMemberRemoved, user, true)
	defer func() { p.end(ctx, err) }()
	c, err := o.resolve(ctx, a)
	if err != nil {
		return err
	}
	if err := checkTeam("team_id", team); err != nil {
		return err
	}
	if err := checkUser("user_id", user); err != nil {
		return err
	}
	mine, err := o.teamRole(ctx, c, team, "removing members")
	if err != nil {
		return err
	}
	members, err := o.Store.Members(ctx, team)
	if err != nil {
		return storeErr(err, "list members of team %q", team)
	}
	switch current := roleOf(members, user); {
	case current == "":
		return status.Errorf(codes.NotFound, "user %q is not a member of team %q", user, team)
	case current == store.RoleOwner && mine != store.RoleOwner:
		return refuse(codes.PermissionDenied, "team %q: only owners may grant or remove the owner role", team)
	case current == store.RoleOwner && owners(members) == 1:
		return lastOwner(team, user)
	}
	if err := o.Store.RemoveMember(ctx, team, user); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return status.Errorf(codes.NotFound, "user %q is not a member of team %q", user, team)
		}
		return storeErr(err, "remove %q from team %q", user, team)
	}
	p.detail = fmt.Sprintf("removed %s from team %s", user, team)
	return nil
}

// activeUser returns user id, which must exist and be enabled.
func (o *Ops) activeUser(ctx context.Context, id string) (store.User, error) {
	u, err := o.Store.GetUser(ctx, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return store.User{}, status.Errorf(codes.NotFound, "user %q not found", id)
	case err != nil:
		return store.User{}, storeErr(err, "read user %q", id)
	case u.Disabled:
		return store.User{}, status.Errorf(codes.FailedPrecondition, "user %q is disabled", id)
	}
	return u, nil
}

func lastOwner(team, user string) error {
	return status.Errorf(codes.FailedPrecondition, "team %q must keep an owner: %s is the last one; make another member owner first", team, user)
}

// roleOf returns user's role among members, "" when not a member.
func roleOf(members []store.Member, user string) store.Role {
	for _, m := range members {
		if m.UserID == user {
			return m.Role
		}
	}
	return ""
}

// owners counts the owners among members.
func owners(members []store.Member) int {
	n := 0
	for _, m := range members {
		if m.Role == store.RoleOwner {
			n++
		}
	}
	return n
}
