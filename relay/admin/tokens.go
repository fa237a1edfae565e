package admin

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/betcode-dev/betcode/relay/store"
	"github.com/betcode-dev/betcode/shared/authtoken"
)

// AllUsers asks ListTokens for every user's tokens (relay administrators).
const AllUsers = "*"

// CreateToken creates a client token for user (empty: the caller) named
// name, living ttl (0: DefaultTokenTTL; at most MaxTokenTTL). It returns the
// secret, which exists nowhere else (the store keeps its hash), and the
// token without its hash. Users create tokens for themselves, relay
// administrators for anyone.
func (o *Ops) CreateToken(ctx context.Context, a Actor, user, name string, ttl time.Duration) (secret string, _ store.Token, err error) {
	p := o.begin(a, ActionTokenCreated, user, true)
	defer func() { p.end(ctx, err) }()
	c, err := o.resolve(ctx, a)
	if err != nil {
		return "", store.Token{}, err
	}
	if user, err = c.subject(user, "tokens"); err != nil {
		return "", store.Token{}, err
	}
	p.target = user
	if err := checkTokenName(name); err != nil {
		return "", store.Token{}, err
	}
	d, err := checkTTL("ttl", ttl, DefaultTokenTTL, MaxTokenTTL)
	if err != nil {
		return "", store.Token{}, err
	}
	if _, err := o.activeUser(ctx, user); err != nil {
		return "", store.Token{}, err
	}
	secret, err = authtoken.New(authtoken.Client)
	if err != nil {
		return "", store.Token{}, status.Errorf(codes.Internal, "create token: %v", err)
	}
	now := o.now()
	hash := authtoken.Hash(secret)
	t := store.Token{ID: authtoken.ID(hash), UserID: user, Name: name, Hash: hash, CreatedAt: now, ExpiresAt: now.Add(d)}
	if err := o.Store.CreateToken(ctx, t); err != nil {
		return "", store.Token{}, storeErr(err, "store token for %q", user)
	}
	p.target = tokenTarget(t.ID)
	p.detail = fmt.Sprintf("client token %s %q for %s, expires %s", t.ID, name, user, t.ExpiresAt.UTC().Format(time.RFC3339))
	t.Hash = nil
	return secret, t, nil
}

// ListTokens returns user's tokens (empty: the caller's; for the CLI and
// AllUsers: everyone's), newest first, without their hashes. Users list
// their own, relay administrators anyone's.
func (o *Ops) ListTokens(ctx context.Context, a Actor, user string) (_ []store.Token, err error) {
	p := o.begin(a, "token.list", user, false)
	defer func() { p.end(ctx, err) }()
	c, err := o.resolve(ctx, a)
	if err != nil {
		return nil, err
	}
	switch {
	case user == AllUsers || user == "" && c.CLI:
		if !c.admin {
			return nil, errOnlyAdmins("listing everyone's tokens")
		}
		user = ""
	case user == "":
		user = c.UserID
	case !c.admin && user != c.UserID:
		return nil, refuse(codes.PermissionDenied, "you may list only your own tokens")
	default:
		if err := checkUser("user_id", user); err != nil {
			return nil, err
		}
	}
	ts, err := o.Store.ListTokens(ctx, user)
	if err != nil {
		return nil, storeErr(err, "list tokens")
	}
	for i := range ts {
		ts[i].Hash = nil
	}
	return ts, nil
}

// RevokeToken revokes token id and returns it without its hash. Users
// revoke their own, relay administrators anyone's; another user's token is
// not found. Every replica refuses the token within a second (the store
// publishes the revocation). Revoking twice keeps the first time.
func (o *Ops) RevokeToken(ctx context.Context, a Actor, id string) (_ store.Token, err error) {
	p := o.begin(a, ActionTokenRevoked, tokenTarget(id), true)
	defer func() { p.end(ctx, err) }()
	c, err := o.resolve(ctx, a)
	if err != nil {
		return store.Token{}, err
	}
	if err := required("token_id", id); err != nil {
		return store.Token{}, err
	}
	// The store looks tokens up by hash only; listing the scope the caller
	// may see finds the token and authorizes in one step.
	scope := c.UserID
	if c.admin {
		scope = ""
	}
	ts, err := o.Store.ListTokens(ctx, scope)
	if err != nil {
		return store.Token{}, storeErr(err, "list tokens")
	}
	found := false
	for _, t := range ts {
		found = found || t.ID == id
	}
	if !found {
		if c.admin {
			return store.Token{}, status.Errorf(codes.NotFound, "token %q not found", id)
		}
		return store.Token{}, refuse(codes.NotFound, "token %q not found", id)
	}
	t, err := o.Store.RevokeToken(ctx, id, o.now())
	if err != nil {
		return store.Token{}, storeErr(err, "revoke token %q", id)
	}
	p.detail = fmt.Sprintf("revoked client token %s %q of %s", t.ID, t.Name, t.UserID)
	t.Hash = nil
	return t, nil
}

// CreateEnrollToken creates a single-use join token living ttl (0:
// DefaultJoinTTL; at most MaxJoinTTL) and returns its secret, shown once,
// and the token without its hash. With team set the machine it enrolls
// belongs to team (its owners and admins may); otherwise to user (empty:
// the caller; users create join tokens only for themselves). user is also
// recorded as the token's creator; for a team token made by the CLI
// without one, that is the team's first enabled owner.
func (o *Ops) CreateEnrollToken(ctx context.Context, a Actor, team, user string, ttl time.Duration) (secret string, _ store.EnrollToken, err error) {
	p := o.begin(a, ActionEnrollTokenCreate, teamTarget(team), true)
	if team == "" {
		p.target = user
	}
	defer func() { p.end(ctx, err) }()
	c, err := o.resolve(ctx, a)
	if err != nil {
		return "", store.EnrollToken{}, err
	}
	d, err := checkTTL("ttl", ttl, DefaultJoinTTL, MaxJoinTTL)
	if err != nil {
		return "", store.EnrollToken{}, err
	}
	if team != "" {
		if err := checkTeam("team_id", team); err != nil {
			return "", store.EnrollToken{}, err
		}
		if _, err := o.teamRole(ctx, c, team, "creating join tokens"); err != nil {
			return "", store.EnrollToken{}, err
		}
		if user == "" && c.CLI {
			if user, err = o.firstOwner(ctx, team); err != nil {
				return "", store.EnrollToken{}, err
			}
		}
	}
	if user, err = c.subject(user, "join tokens"); err != nil {
		return "", store.EnrollToken{}, err
	}
	if _, err := o.activeUser(ctx, user); err != nil {
		return "", store.EnrollToken{}, err
	}
	secret, err = authtoken.New(authtoken.Join)
	if err != nil {
		return "", store.EnrollToken{}, status.Errorf(codes.Internal, "create join token: %v", err)
	}
	now := o.now()
	hash := authtoken.Hash(secret)
	t := store.EnrollToken{ID: authtoken.ID(hash), Hash: hash, TeamID: team, UserID: user, CreatedAt: now, ExpiresAt: now.Add(d)}
	if err := o.Store.CreateEnrollToken(ctx, t); err != nil {
		return "", store.EnrollToken{}, storeErr(err, "store join token")
	}
	p.target = tokenTarget(t.ID)
	owner := "user " + user
	if team != "" {
		owner = "team " + team + " (by " + user + ")"
	}
	p.detail = fmt.Sprintf("join token %s for a machine of %s, expires %s", t.ID, owner, t.ExpiresAt.UTC().Format(time.RFC3339))
	t.Hash = nil
	return secret, t, nil
}

// subject returns the user an operation on what (e.g. "tokens") is for:
// user, or the caller when empty. Only relay administrators name another
// user; the CLI must name one.
func (c *caller) subject(user, what string) (string, error) {
	switch {
	case user == "" && c.CLI:
		return "", invalid("user_id", "required (the admin command acts for no user)")
	case user == "":
		return c.UserID, nil
	case !c.admin && user != c.UserID:
		return "", refuse(codes.PermissionDenied, "you may create %s only for yourself", what)
	}
	return user, checkUser("user_id", user)
}

// firstOwner returns the enabled owner of team first in user id order.
func (o *Ops) firstOwner(ctx context.Context, team string) (string, error) {
	ms, err := o.Store.Members(ctx, team)
	if err != nil {
		return "", storeErr(err, "list members of team %q", team)
	}
	for _, m := range ms {
		if m.Role != store.RoleOwner {
			continue
		}
		u, err := o.Store.GetUser(ctx, m.UserID)
		if err != nil {
			return "", storeErr(err, "read user %q", m.UserID)
		}
		if !u.Disabled {
			return u.ID, nil
		}
	}
	return "", status.Errorf(codes.FailedPrecondition, "team %q has no enabled owner to record as the join token's creator; pass a user", team)
}
