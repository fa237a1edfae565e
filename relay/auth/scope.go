package auth

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"google.golang.org/grpc/codes"

	"github.com/betcode-dev/betcode/relay/internal/grpcerr"
	"github.com/betcode-dev/betcode/relay/store"
)

// Scoped tokens (store.Token.Scope, docs/auth.md): a paired device's token
// opens end-to-end channels to its machine and does nothing else; a pairing
// ticket opens one ChannelService.Pair call to its machine, once. Which
// methods a scope may call is checked here, at the relay's door; which
// machine it reaches, by the router (Identity.ScopeMachine), which also
// sends calls that name no machine to the token's.

// ScopeHeader carries a forwarded call's token scope and machine
// ("device:m-1") from the replica that authenticated it, which checked
// them, to the replica holding the machine's tunnel, which checks them
// again: a hop between replicas never widens a scope. Believed, like the
// other forwarding headers, only from another relay.
const ScopeHeader = "X-Betcode-Scope"

// CodeTokenScope is the BetCode error code (PERMISSION_DENIED) of a call a
// scoped token may not make.
const CodeTokenScope = "TOKEN_SCOPE"

const (
	channelService = "/betcode.v1.ChannelService/"
	pairMethod     = "/betcode.v1.ChannelService/Pair"
	openMethod     = "/betcode.v1.ChannelService/Open"
	deliverMethod  = "/betcode.v1.ChannelService/Deliver"
	healthCheck    = "/grpc.health.v1.Health/Check"
)

// ScopeAllows reports whether a token of scope may call path: an ordinary
// token ("") anything; a device token ChannelService's Open, Pair and
// Deliver (a sealed envelope); a pairing ticket Pair only; a share's token
// (a teammate's) Open only. All may call the standard health check.
func ScopeAllows(scope, path string) bool {
	switch scope {
	case "":
		return true
	case store.ScopeDevice:
		return path == openMethod || path == pairMethod || path == deliverMethod || path == healthCheck
	case store.ScopePair:
		return path == pairMethod || path == healthCheck
	case store.ScopeShare:
		return path == openMethod || path == healthCheck
	}
	return false // a scope this relay does not know reaches nothing
}

// scopeHeader is the ScopeHeader value of id ("" for an ordinary token).
func scopeHeader(id Identity) string {
	if id.Scope == "" {
		return ""
	}
	return id.Scope + ":" + id.ScopeMachine
}

// ForwardHeaders returns the headers that carry id's scope to the replica
// a call is forwarded to (nil for an ordinary token).
func ForwardHeaders(id Identity) http.Header {
	if v := scopeHeader(id); v != "" {
		return http.Header{ScopeHeader: {v}}
	}
	return nil
}

// admitScope answers a call id's scope does not allow (PERMISSION_DENIED /
// TOKEN_SCOPE, audited) and reports false.
func (a *Authenticator) admitScope(w http.ResponseWriter, r *http.Request, id Identity) bool {
	if ScopeAllows(id.Scope, r.URL.Path) {
		return true
	}
	target := "token:" + id.TokenID
	if id.TokenID == "" {
		target = "user:" + id.UserID
	}
	a.Audit(store.AuditEvent{Actor: id.UserID, Action: "access.denied", Target: target, Remote: id.Remote, Outcome: "denied",
		Detail: "token scoped to " + id.Scope + " on machine " + id.ScopeMachine + " used for " + r.URL.Path + forwardedDetail(id)})
	grpcerr.Write(w, codes.PermissionDenied, CodeTokenScope,
		"this token is scoped to machine "+id.ScopeMachine+": it opens end-to-end channels to that machine only", nil)
	return false
}

func forwardedDetail(id Identity) string {
	if id.ForwardedBy == "" {
		return ""
	}
	return " (forwarded by " + id.ForwardedBy + ")"
}

// forwardedScope parses a forwarded call's ScopeHeader into id; false if
// it is malformed (the call is then refused).
func forwardedScope(r *http.Request, id *Identity) bool {
	v := r.Header.Get(ScopeHeader)
	if v == "" {
		return true
	}
	scope, machine, ok := strings.Cut(v, ":")
	if !ok || machine == "" || (scope != store.ScopeDevice && scope != store.ScopePair && scope != store.ScopeShare) {
		return false
	}
	id.Scope, id.ScopeMachine = scope, machine
	return true
}

// spendTicket spends the pairing ticket that admitted a Pair call, on every
// replica at once (store.SpendToken): a second call with it, anywhere, is
// refused. It answers the call and reports false when the ticket was spent
// before (or expired, or was revoked, since it was read).
func (a *Authenticator) spendTicket(ctx context.Context, w http.ResponseWriter, id Identity) bool {
	_, err := a.store.SpendToken(ctx, id.TokenID, a.opt.Now())
	switch {
	case err == nil:
		// This replica applies its own change at once (the store's
		// notification of it reaches every replica a moment later): the
		// ticket's next use here is refused as spent, not judged by the
		// cached, live ticket.
		a.apply(store.Change{Kind: store.ChangeToken, ID: id.TokenID})
		a.Audit(store.AuditEvent{Actor: id.UserID, Action: "pairing.ticket_used", Target: "machine:" + id.ScopeMachine,
			Remote: id.Remote, Outcome: "ok", Detail: "token:" + id.TokenID})
		return true
	case errors.Is(err, store.ErrTokenSpent), errors.Is(err, store.ErrExpired), errors.Is(err, store.ErrNotFound):
		a.Audit(store.AuditEvent{Actor: id.UserID, Action: "auth.refused", Target: "token:" + id.TokenID, Remote: id.Remote,
			Outcome: "denied", Detail: "pairing ticket used again: " + err.Error()})
		grpcerr.Write(w, codes.Unauthenticated, "", ticketRefusal, nil)
		return false
	default:
		a.opt.Log.Error("auth: spend a pairing ticket", "token_id", id.TokenID, "err", err)
		grpcerr.Write(w, codes.Unavailable, "", "cannot check the pairing code now; retry", nil)
		return false
	}
}

// ticketRefusal answers a spent or expired pairing ticket.
const ticketRefusal = "this pairing code was already used, or expired: make a new one on the machine (betcode-agent pair)"
