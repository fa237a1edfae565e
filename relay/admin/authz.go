package admin

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/betcode-dev/betcode/relay/store"
)

// caller is an Actor with its rights read from the store.
type caller struct {
	Actor
	// admin: a relay administrator or the CLI.
	admin bool
	// user is the caller's account (zero for the CLI).
	user store.User
	// teams are the caller's memberships ordered by team id, roles the
	// same by team id.
	teams []store.Member
	roles map[string]store.Role
}

// resolve reads a's rights. A user that no longer exists is
// unauthenticated and a disabled one refused: the authenticating middleware
// refuses both already, but its identities are cached.
func (o *Ops) resolve(ctx context.Context, a Actor) (*caller, error) {
	if a.CLI {
		return &caller{Actor: a, admin: true}, nil
	}
	if a.UserID == "" {
		return nil, status.Error(codes.Unauthenticated, "no authenticated user")
	}
	u, err := o.Store.GetUser(ctx, a.UserID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, status.Errorf(codes.Unauthenticated, "user %q does not exist", a.UserID)
	case err != nil:
		return nil, storeErr(err, "read user %q", a.UserID)
	case u.Disabled:
		return nil, refuse(codes.PermissionDenied, "user %q is disabled", a.UserID)
	}
	ms, err := o.Store.Memberships(ctx, a.UserID)
	if err != nil {
		return nil, storeErr(err, "read teams of %q", a.UserID)
	}
	c := &caller{Actor: a, admin: a.Admin && u.Admin, user: u, teams: ms, roles: make(map[string]store.Role, len(ms))}
	for _, m := range ms {
		c.roles[m.TeamID] = m.Role
	}
	return c, nil
}

// teamRole returns the role c acts with in team id: owner for relay
// administrators, else c's membership. A team c is not in is not found, as
// if it did not exist; a member without the owner or admin role is refused
// doing what (e.g. "adding members").
func (o *Ops) teamRole(ctx context.Context, c *caller, id, what string) (store.Role, error) {
	if c.admin {
		if _, err := o.Store.GetTeam(ctx, id); err != nil {
			return "", storeErr(err, "team %q", id)
		}
		return store.RoleOwner, nil
	}
	r, ok := c.roles[id]
	switch {
	case !ok:
		return "", refuse(codes.NotFound, "team %q not found", id)
	case !r.Manages():
		return "", refuse(codes.PermissionDenied, "team %q: %s needs the owner or admin role; you are a %s", id, what, r)
	}
	return r, nil
}

// machine returns machine id if c manages it: relay administrators every
// machine, a user their own, team owners and admins their team's. A
// machine c cannot see is not found; a team machine c uses as a member is
// refused doing what (e.g. "revoking it").
func (o *Ops) machine(ctx context.Context, c *caller, id, what string) (store.Machine, error) {
	m, err := o.Store.GetMachine(ctx, id)
	if errors.Is(err, store.ErrNotFound) && !c.admin {
		return store.Machine{}, refuse(codes.NotFound, "machine %q not found", id)
	}
	if err != nil {
		return store.Machine{}, storeErr(err, "machine %q", id)
	}
	if c.manages(&m) {
		return m, nil
	}
	if r, ok := c.roles[m.TeamID]; ok && m.TeamID != "" {
		return store.Machine{}, refuse(codes.PermissionDenied, "machine %q belongs to team %q: %s needs the owner or admin role; you are a %s", id, m.TeamID, what, r)
	}
	return store.Machine{}, refuse(codes.NotFound, "machine %q not found", id)
}

// manages reports whether c manages m.
func (c *caller) manages(m *store.Machine) bool {
	switch {
	case c.admin:
		return true
	case m.TeamID == "":
		return m.OwnerID == c.UserID
	default:
		return c.roles[m.TeamID].Manages()
	}
}

// refusal is an authorization refusal: audited as access.denied.
type refusal struct{ st *status.Status }

func (r *refusal) Error() string { return r.st.Err().Error() }

// GRPCStatus lets status.FromError and status.Code see the status.
func (r *refusal) GRPCStatus() *status.Status { return r.st }

// refuse returns a refusal with code and message.
func refuse(code codes.Code, format string, args ...any) error {
	return &refusal{st: status.Newf(code, format, args...)}
}

// invalid returns INVALID_ARGUMENT for field.
func invalid(field, format string, args ...any) error {
	return status.Errorf(codes.InvalidArgument, "%s: %s", field, fmt.Sprintf(format, args...))
}

// storeErr turns a store error into a status: its sentinels into their
// codes, anything else into INTERNAL, prefixed with what was being done.
// A status passes through.
func storeErr(err error, format string, args ...any) error {
	if _, ok := status.FromError(err); ok {
		return err
	}
	code := codes.Internal
	switch {
	case errors.Is(err, store.ErrNotFound):
		code = codes.NotFound
	case errors.Is(err, store.ErrExists):
		code = codes.AlreadyExists
	case errors.Is(err, store.ErrInvalid):
		code = codes.InvalidArgument
	case errors.Is(err, context.Canceled):
		code = codes.Canceled
	case errors.Is(err, context.DeadlineExceeded):
		code = codes.DeadlineExceeded
	}
	return status.Errorf(code, "%s: %v", fmt.Sprintf(format, args...), err)
}
