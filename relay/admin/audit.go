package admin

import (
	"context"
	"errors"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/betcode-dev/betcode/relay/store"
)

// Audit actions appended by Ops, and their outcomes.
const (
	ActionUserCreated       = "user.created"
	ActionUserDisabled      = "user.disabled"
	ActionUserEnabled       = "user.enabled"
	ActionTeamCreated       = "team.created"
	ActionMemberAdded       = "team.member_added"
	ActionMemberRemoved     = "team.member_removed"
	ActionTokenCreated      = "token.created"
	ActionTokenRevoked      = "token.revoked"
	ActionEnrollTokenCreate = "enroll_token.created"
	ActionMachineRevoked    = "machine.revoked"
	ActionMachineDeleted    = "machine.deleted"
	// ActionAccessDenied records a refusal; its Detail starts with the
	// action that was refused (e.g. "token.revoked: token … not found").
	ActionAccessDenied = "access.denied"

	OutcomeOK     = "ok"
	OutcomeDenied = "denied"
	OutcomeError  = "error"
)

// Audit limits.
const (
	DefaultAuditLimit = 1000
	MaxAuditLimit     = 10000
)

// Audit targets name what was acted on. A user is its bare id, so that
// AuditFilter.Actor (which matches Actor or Target) finds the events about
// a user; everything else carries a kind prefix that no user id can have
// (user ids have no ':'), so a team or machine named like a user never
// shows up among that user's events.
func teamTarget(id string) string    { return "team:" + id }
func tokenTarget(id string) string   { return "token:" + id }
func machineTarget(id string) string { return "machine:" + id }

// op is one operation being audited.
type op struct {
	o              *Ops
	a              Actor
	action, target string
	// mutates: the operation changes state, so its success and failure
	// are recorded too (a read records only refusals).
	mutates bool
	// detail is the event's Detail on success. Never a secret.
	detail string
}

func (o *Ops) begin(a Actor, action, target string, mutates bool) *op {
	return &op{o: o, a: a, action: action, target: target, mutates: mutates}
}

// end appends p's audit event for the operation's result err. A failure to
// write it is logged: the operation itself is done.
func (p *op) end(ctx context.Context, err error) {
	e := store.AuditEvent{At: p.o.now(), Actor: p.a.name(), Action: p.action, Target: p.target, Remote: p.a.Remote}
	var r *refusal
	switch {
	case errors.As(err, &r):
		e.Action, e.Outcome, e.Detail = ActionAccessDenied, OutcomeDenied, p.action+": "+r.st.Message()
	case !p.mutates:
		return
	case err != nil:
		e.Outcome, e.Detail = OutcomeError, status.Convert(err).Message()
	default:
		e.Outcome, e.Detail = OutcomeOK, p.detail
		if p.a.Via != "" {
			e.Detail += ", via " + p.a.Via
		}
	}
	// The caller may have gone: the event is written regardless.
	if aerr := p.o.Store.AppendAudit(context.WithoutCancel(ctx), e); aerr != nil {
		p.o.log().Error("admin: append audit event", "action", e.Action, "target", e.Target, "outcome", e.Outcome, "err", aerr)
	}
}

// AuditQuery selects audit events.
type AuditQuery struct {
	// Since: events at or after it (zero: all).
	Since time.Time
	// UserID: events by or about that user. Only relay administrators
	// choose; anyone else always gets their own.
	UserID string
	// Limit: at most this many, the newest (0: DefaultAuditLimit; at most
	// MaxAuditLimit).
	Limit int
}

// Audit lists audit events, oldest first: any for relay administrators,
// the caller's own (by or about them) for anyone else.
func (o *Ops) Audit(ctx context.Context, a Actor, q AuditQuery) (_ []store.AuditEvent, err error) {
	p := o.begin(a, "audit.list", q.UserID, false)
	defer func() { p.end(ctx, err) }()
	c, err := o.resolve(ctx, a)
	if err != nil {
		return nil, err
	}
	switch {
	case q.Limit < 0 || q.Limit > MaxAuditLimit:
		return nil, invalid("limit", "want 0 to %d, got %d", MaxAuditLimit, q.Limit)
	case q.Limit == 0:
		q.Limit = DefaultAuditLimit
	}
	if !c.admin {
		q.UserID = c.UserID
	}
	evs, err := o.Store.ListAudit(ctx, store.AuditFilter{Since: q.Since, Actor: q.UserID, Limit: q.Limit})
	if err != nil {
		return nil, storeErr(err, "list audit events")
	}
	return evs, nil
}

// errOnlyAdmins refuses an operation reserved to relay administrators.
func errOnlyAdmins(what string) error {
	return refuse(codes.PermissionDenied, "%s is reserved to relay administrators", what)
}
