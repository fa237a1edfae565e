package auth

import (
	"net/http"
	"strings"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/betcode-dev/betcode/relay/internal/grpcerr"
	"github.com/betcode-dev/betcode/relay/store"
)

// Scoped tokens (store.Token.Scope, docs/auth.md): a paired device's token
// opens end-to-end channels to its machine and does nothing else; a pairing
// ticket opens one ChannelService.Pair call to its machine, once. Both are
// checked here, at the relay's door, so that no later layer needs to know.

// machineHeader names a call's machine (router.MachineHeader).
const machineHeader = "X-Betcode-Machine-Id"

const (
	channelPrefix = "/betcode.v1.ChannelService/"
	pairMethod    = "/betcode.v1.ChannelService/Pair"
	healthCheck   = "/grpc.health.v1.Health/Check"
)

// admitScoped checks a scoped token's call (method and machine), points it
// at the token's machine, spends a pairing ticket, or answers the call and
// reports false.
func (a *Authenticator) admitScoped(w http.ResponseWriter, r *http.Request, tok store.Token) bool {
	path := r.URL.Path
	allowed := path == healthCheck
	switch tok.Scope {
	case store.ScopeDevice:
		allowed = allowed || strings.HasPrefix(path, channelPrefix)
	case store.ScopePair:
		allowed = allowed || path == pairMethod
	}
	if !allowed {
		a.Audit(store.AuditEvent{Actor: tok.UserID, Action: "access.denied", Target: "token:" + tok.ID, Remote: r.RemoteAddr,
			Outcome: "denied", Detail: "scoped token (" + tok.Scope + ", machine " + tok.MachineID + ") used for " + path})
		grpcerr.Write(w, codes.PermissionDenied, "TOKEN_SCOPE",
			"this token is scoped to machine "+tok.MachineID+": it opens end-to-end channels to that machine only", nil)
		return false
	}
	switch m := r.Header.Get(machineHeader); {
	case m == "":
		r.Header.Set(machineHeader, tok.MachineID)
	case m != tok.MachineID:
		// Answered as the router answers a machine the caller cannot see.
		a.Audit(store.AuditEvent{Actor: tok.UserID, Action: "access.denied", Target: "machine:" + m, Remote: r.RemoteAddr,
			Outcome: "denied", Detail: "token " + tok.ID + " is scoped to machine " + tok.MachineID})
		grpcerr.Write(w, codes.NotFound, "MACHINE_NOT_FOUND", `no machine "`+m+`"`, nil)
		return false
	}
	if tok.Scope == store.ScopePair && path == pairMethod {
		// Single use: the first call spends it on every replica.
		now := a.opt.Now()
		got, err := a.store.RevokeToken(r.Context(), tok.ID, now)
		if err != nil {
			a.opt.Log.Error("auth: spend a pairing ticket", "err", err)
			grpcerr.Write(w, codes.Unavailable, "", "cannot check the pairing code now; retry", nil)
			return false
		}
		if d := got.RevokedAt.Sub(now); d > time.Microsecond || d < -time.Microsecond {
			a.Audit(store.AuditEvent{Actor: tok.UserID, Action: "auth.refused", Target: "token:" + tok.ID, Remote: r.RemoteAddr,
				Outcome: "denied", Detail: "pairing ticket used twice"})
			grpcerr.Write(w, codes.Unauthenticated, "", "this pairing code was already used: make a new one (betcode-agent pair)", nil)
			return false
		}
		a.Audit(store.AuditEvent{Actor: tok.UserID, Action: "pairing.ticket_used", Target: "machine:" + tok.MachineID,
			Remote: r.RemoteAddr, Outcome: "ok", Detail: "token:" + tok.ID})
	}
	return true
}
