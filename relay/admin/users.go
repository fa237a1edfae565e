package admin

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/betcode-dev/betcode/relay/store"
)

// Me describes the caller.
type Me struct {
	User store.User
	// Teams are the caller's memberships ordered by team id.
	Teams []store.Member
	// Token is the token the call carried, without its hash (nil when the
	// call named none or it is gone).
	Token *store.Token
}

// WhoAmI describes a, a user, and tokenID, the token of its call.
func (o *Ops) WhoAmI(ctx context.Context, a Actor, tokenID string) (_ Me, err error) {
	p := o.begin(a, "user.whoami", a.UserID, false)
	defer func() { p.end(ctx, err) }()
	c, err := o.resolve(ctx, a)
	if err != nil {
		return Me{}, err
	}
	if c.CLI {
		return Me{}, status.Error(codes.FailedPrecondition, "the admin command acts for no user")
	}
	me := Me{User: c.user, Teams: c.teams}
	if tokenID != "" {
		ts, err := o.Store.ListTokens(ctx, c.UserID)
		if err != nil {
			return Me{}, storeErr(err, "list tokens of %q", c.UserID)
		}
		for _, t := range ts {
			if t.ID == tokenID {
				t.Hash = nil
				me.Token = &t
				break
			}
		}
	}
	return me, nil
}

// CreateUser adds user u (its ID, Email and Admin; relay administrators).
func (o *Ops) CreateUser(ctx context.Context, a Actor, u store.User) (_ store.User, err error) {
	p := o.begin(a, ActionUserCreated, u.ID, true)
	defer func() { p.end(ctx, err) }()
	c, err := o.resolve(ctx, a)
	if err != nil {
		return store.User{}, err
	}
	if !c.admin {
		return store.User{}, errOnlyAdmins("creating users")
	}
	if err := checkUser("id", u.ID); err != nil {
		return store.User{}, err
	}
	if err := checkEmail(u.Email); err != nil {
		return store.User{}, err
	}
	u = store.User{ID: u.ID, Email: u.Email, Admin: u.Admin, CreatedAt: o.now()}
	if err := o.Store.CreateUser(ctx, u); err != nil {
		if errors.Is(err, store.ErrExists) {
			return store.User{}, status.Errorf(codes.AlreadyExists, "user %q already exists", u.ID)
		}
		return store.User{}, storeErr(err, "create user %q", u.ID)
	}
	p.detail = "created user " + u.ID
	if u.Admin {
		p.detail += ", a relay administrator"
	}
	return u, nil
}

// ListUsers returns every user ordered by id (relay administrators).
func (o *Ops) ListUsers(ctx context.Context, a Actor) (_ []store.User, err error) {
	p := o.begin(a, "user.list", "", false)
	defer func() { p.end(ctx, err) }()
	c, err := o.resolve(ctx, a)
	if err != nil {
		return nil, err
	}
	if !c.admin {
		return nil, errOnlyAdmins("listing users")
	}
	us, err := o.Store.ListUsers(ctx)
	if err != nil {
		return nil, storeErr(err, "list users")
	}
	return us, nil
}

// DisableUser disables user id, or enables it again (relay
// administrators). A disabled user's tokens stop working at once: the
// store publishes the change to every replica. Administrators cannot
// disable themselves, so a relay always keeps the one who could undo it.
func (o *Ops) DisableUser(ctx context.Context, a Actor, id string, disabled bool) (_ store.User, err error) {
	action, verb := ActionUserDisabled, "disabled"
	if !disabled {
		action, verb = ActionUserEnabled, "enabled"
	}
	p := o.begin(a, action, id, true)
	defer func() { p.end(ctx, err) }()
	c, err := o.resolve(ctx, a)
	if err != nil {
		return store.User{}, err
	}
	if !c.admin {
		return store.User{}, errOnlyAdmins("disabling users")
	}
	if err := checkUser("user_id", id); err != nil {
		return store.User{}, err
	}
	if disabled && !c.CLI && id == c.UserID {
		return store.User{}, status.Error(codes.FailedPrecondition, "you cannot disable yourself")
	}
	if err := o.Store.SetUserDisabled(ctx, id, disabled); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return store.User{}, status.Errorf(codes.NotFound, "user %q not found", id)
		}
		return store.User{}, storeErr(err, "set user %q disabled=%t", id, disabled)
	}
	u, err := o.Store.GetUser(ctx, id)
	if err != nil {
		return store.User{}, storeErr(err, "read user %q", id)
	}
	p.detail = verb + " user " + id
	return u, nil
}
