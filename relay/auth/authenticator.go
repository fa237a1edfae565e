package auth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/singleflight"
	"google.golang.org/grpc/codes"

	"github.com/betcode-dev/betcode/relay/internal/grpcerr"
	"github.com/betcode-dev/betcode/relay/store"
	"github.com/betcode-dev/betcode/shared/authtoken"
	"github.com/betcode-dev/betcode/shared/callpark"
	"github.com/betcode-dev/betcode/shared/mtls"
)

// Open calls need no token: enrolling a machine (its join token
// authenticates it), OpenID Connect sign-in (the ID token authenticates
// it; it is how a client gets a token) and the standard health check.
var openMethods = map[string]bool{
	"/betcode.v1.EnrollService/Enroll":          true,
	"/betcode.v1.OIDCService/GetOIDCConfig":     true,
	"/betcode.v1.OIDCService/ExchangeOIDCToken": true,
	"/grpc.health.v1.Health/Check":              true,
}

// maxEntryAge bounds how long a cached token or user is trusted without
// a change notification: a safety net should one be lost. Revocation
// itself reaches every replica through store.Identity.Watch within a
// second.
const maxEntryAge = 30 * time.Second

// touchEvery is how often a token's last use is written to the store.
const touchEvery = time.Minute

// maxCachedMisses bounds the cache of unknown token hashes (a flood of
// random tokens must not grow memory without bound).
const maxCachedMisses = 10000

// Options configure an Authenticator.
type Options struct {
	Log *slog.Logger
	Now func() time.Time
	// OnMachineChange, if set, is called (from the watch loop) with the id
	// of a machine that was revoked or deleted, e.g. to close its tunnel.
	OnMachineChange func(machineID string)
	// Registerer, if set, gets betcode_relay_security_events_total
	// {action, outcome}: every event Audit records (refused tokens,
	// denied machines, rate limits, refused machines).
	Registerer prometheus.Registerer
	// Limit, if set, is asked before each call from a client (not those
	// forwarded by another replica, which counted them) whether it may be
	// made; a refusal answers the call itself and returns false. Calls of
	// the open methods carry no token id.
	Limit func(w http.ResponseWriter, r *http.Request, id Identity) bool
}

// Authenticator authenticates clients' bearer tokens against the store,
// authorizes machine access by ownership and team membership, and ends what
// a revocation forbids. Its caches are invalidated by the store's change
// notifications (Run), so revoking a token, disabling a user, removing a
// team member or revoking a machine holds on every replica within a second
// and ends the streams already open.
type Authenticator struct {
	store  store.Store
	opt    Options
	audit  *auditor
	events *prometheus.CounterVec // nil without a Registerer

	mu      sync.RWMutex
	tokens  map[string]*tokenEntry // string(hash) -> entry
	byID    map[string]string      // token id -> string(hash)
	misses  map[string]struct{}    // hashes the store does not know
	users   map[string]*principal  // user id -> principal
	revoked map[string]struct{}    // revoked machine ids and certificate serials ("serial:"+hex)
	calls   map[*call]struct{}     // open calls
	flight  singleflight.Group     // one store lookup per key at a time
	ready   chan struct{}          // closed once Run loaded revocations
	loaded  atomic.Bool            // revocations loaded
	gen     atomic.Uint64          // bumped by every invalidation
	touched map[string]time.Time   // token id -> last touch written
	addrs   map[string]string      // token id -> last seen client IP
}

type tokenEntry struct {
	tok     store.Token
	fetched time.Time
}

// principal is a user and the teams they belong to.
type principal struct {
	user    store.User
	teams   map[string]store.Role
	fetched time.Time
}

// call is one open call, ended with UNAUTHENTICATED or NOT_FOUND if what
// admitted it is revoked.
type call struct {
	tokenID, userID string
	machineID       atomic.Pointer[string]
	end             context.CancelCauseFunc
}

// New returns an Authenticator over st. Run must be running for
// revocations to reach it (and for machine certificates to be checked).
func New(st store.Store, opt Options) *Authenticator {
	if opt.Log == nil {
		opt.Log = slog.Default()
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	var events *prometheus.CounterVec
	if opt.Registerer != nil {
		events = prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "betcode_relay_security_events_total",
			Help: "Security events (the audit log's actions: auth.refused, access.denied, rate_limited, machine.refused, ...) by outcome.",
		}, []string{"action", "outcome"})
		opt.Registerer.MustRegister(events)
	}
	return &Authenticator{
		store: st, opt: opt, audit: newAuditor(st, opt.Log, opt.Now), events: events,
		tokens: map[string]*tokenEntry{}, byID: map[string]string{}, misses: map[string]struct{}{},
		users: map[string]*principal{}, revoked: map[string]struct{}{}, calls: map[*call]struct{}{},
		ready: make(chan struct{}), touched: map[string]time.Time{}, addrs: map[string]string{},
	}
}

// Audit records a security event without blocking the caller (events are
// written in the background; a flood is summarised, never queued without
// bound).
func (a *Authenticator) Audit(e store.AuditEvent) {
	if a.events != nil {
		a.events.WithLabelValues(e.Action, e.Outcome).Inc()
	}
	a.audit.add(e)
}

// FlushAudit writes the audit events queued so far and returns once they
// are stored (also those the background writer is writing).
func (a *Authenticator) FlushAudit(ctx context.Context) { a.audit.flush(ctx) }

// Ready is closed once the first revocation list is loaded.
func (a *Authenticator) Ready() <-chan struct{} { return a.ready }

// Run follows the store's changes until ctx ends, invalidating caches and
// ending what a change forbids. It retries a failing watch with backoff.
func (a *Authenticator) Run(ctx context.Context) error {
	auditDone := make(chan struct{})
	go func() {
		defer close(auditDone)
		a.audit.run(ctx) // writes what is queued before it returns
	}()
	defer func() { <-auditDone }()
	for {
		err := a.store.Watch(ctx, a.apply)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		a.opt.Log.Warn("auth: watching identity changes failed; retrying", "err", err)
		t := time.NewTimer(time.Second)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// apply handles one change.
func (a *Authenticator) apply(c store.Change) {
	a.gen.Add(1)
	switch c.Kind {
	case store.ChangeAll:
		a.mu.Lock()
		a.tokens, a.byID, a.users = map[string]*tokenEntry{}, map[string]string{}, map[string]*principal{}
		a.misses = map[string]struct{}{}
		a.mu.Unlock()
		a.reloadRevocations()
		a.recheckCalls(func(*call) bool { return true })
	case store.ChangeToken:
		a.mu.Lock()
		if h, ok := a.byID[c.ID]; ok {
			delete(a.tokens, h)
			delete(a.byID, c.ID)
		}
		a.mu.Unlock()
		a.recheckCalls(func(k *call) bool { return k.tokenID == c.ID })
	case store.ChangeUser, store.ChangeMembership:
		a.mu.Lock()
		delete(a.users, c.ID)
		for h, e := range a.tokens {
			if e.tok.UserID == c.ID {
				delete(a.tokens, h)
				delete(a.byID, e.tok.ID)
			}
		}
		a.mu.Unlock()
		a.recheckCalls(func(k *call) bool { return k.userID == c.ID })
	case store.ChangeMachine:
		a.reloadRevocations()
		if a.opt.OnMachineChange != nil {
			a.opt.OnMachineChange(c.ID)
		}
		a.recheckCalls(func(k *call) bool { m := k.machineID.Load(); return m != nil && *m == c.ID })
	}
}

func (a *Authenticator) reloadRevocations() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ids, serials, err := a.store.Revocations(ctx)
	if err != nil {
		// Keep the old set (and refuse nothing new) rather than forget
		// revocations: the next change or ChangeAll retries.
		a.opt.Log.Error("auth: load machine revocations", "err", err)
		return
	}
	set := make(map[string]struct{}, len(ids)+len(serials))
	for _, id := range ids {
		set[id] = struct{}{}
	}
	for _, s := range serials {
		set["serial:"+strings.ToLower(s)] = struct{}{}
	}
	a.mu.Lock()
	a.revoked = set
	a.mu.Unlock()
	if a.loaded.CompareAndSwap(false, true) {
		close(a.ready)
	}
}

// MachineRevoked reports whether machine id, or the certificate with serial
// (lower-case hex; "" skips it), was revoked.
func (a *Authenticator) MachineRevoked(machineID, serial string) bool {
	a.mu.RLock()
	defer a.mu.RUnlock()
	if _, ok := a.revoked[machineID]; ok {
		return true
	}
	if serial != "" {
		_, ok := a.revoked["serial:"+serial]
		return ok
	}
	return false
}

// endCause is why the relay ended a call, and the status it answers.
type endCause struct {
	code    codes.Code
	betcode string
	msg     string
}

func (e *endCause) Error() string { return e.msg }

// recheckCalls re-authorizes the open calls that match, in the background,
// ending those no longer allowed.
func (a *Authenticator) recheckCalls(match func(*call) bool) {
	a.mu.RLock()
	var todo []*call
	for k := range a.calls {
		if match(k) {
			todo = append(todo, k)
		}
	}
	a.mu.RUnlock()
	if len(todo) == 0 {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for _, k := range todo {
			if cause := a.stillAllowed(ctx, k); cause != nil {
				a.opt.Log.Info("auth: ending a call whose access was revoked", "user", k.userID, "token_id", k.tokenID, "reason", cause.msg)
				k.end(cause)
			}
		}
	}()
}

// stillAllowed reports why call k may no longer continue, or nil.
func (a *Authenticator) stillAllowed(ctx context.Context, k *call) *endCause {
	if k.tokenID != "" {
		tok, err := a.tokenByID(ctx, k.userID, k.tokenID)
		if err != nil {
			return nil // cannot tell: leave it, the safety-net age recheck applies to new calls
		}
		if reason := a.refusal(tok); reason != "" {
			return &endCause{codes.Unauthenticated, "", reason}
		}
	}
	p, err := a.principal(ctx, k.userID)
	if err != nil {
		return nil
	}
	if p.user.Disabled {
		return &endCause{codes.Unauthenticated, "", "user " + k.userID + " is disabled"}
	}
	if m := k.machineID.Load(); m != nil {
		mach, err := a.store.GetMachine(ctx, *m)
		if errors.Is(err, store.ErrNotFound) || err == nil && (!mach.RevokedAt.IsZero() || !p.reaches(mach.OwnerID, mach.TeamID)) {
			return &endCause{codes.NotFound, "MACHINE_NOT_FOUND", fmt.Sprintf("no machine %q", *m)}
		}
	}
	return nil
}

// tokenByID finds user's token by its public id (for rechecks).
func (a *Authenticator) tokenByID(ctx context.Context, user, id string) (store.Token, error) {
	a.mu.RLock()
	h, ok := a.byID[id]
	a.mu.RUnlock()
	if ok {
		return a.token(ctx, []byte(h))
	}
	// Not cached (invalidated): the owner's list has it.
	toks, err := a.store.ListTokens(ctx, user)
	if err != nil {
		return store.Token{}, err
	}
	for _, t := range toks {
		if t.ID == id {
			return t, nil
		}
	}
	return store.Token{}, store.ErrNotFound
}

// refusal says why tok may not authenticate now ("" when it may).
func (a *Authenticator) refusal(tok store.Token) string {
	now := a.opt.Now()
	live := tok.Live(now)
	switch {
	case !live && tok.Scope == store.ScopePair:
		return ticketRefusal
	case !live && tok.Scope == store.ScopeShare:
		// Short: a browser sees it as a WebSocket close reason (123 bytes).
		return "this session share has ended: ask its owner for a new one"
	case !live && tok.Scope == store.ScopeDevice:
		return "this device's credential for machine " + tok.MachineID + " was revoked: pair the device again (betcode-agent pair on the machine, then betcode pair CODE)"
	case tok.MachineID != "" && a.MachineRevoked(tok.MachineID, ""):
		// A revoked (or deleted) machine's device tokens and tickets die
		// with it, on every replica (the revocations follow the store).
		return "machine " + tok.MachineID + " was revoked: this token, scoped to it, no longer works"
	case !tok.RevokedAt.IsZero():
		return "token " + tok.ID + " was revoked: log in with a new one (betcode login)"
	case !tok.ExpiresAt.IsZero() && !now.Before(tok.ExpiresAt):
		return "token " + tok.ID + " expired at " + tok.ExpiresAt.UTC().Format(time.RFC3339) + ": log in with a new one (betcode login)"
	}
	return ""
}

// token returns the token with hash h, from the cache when fresh.
func (a *Authenticator) token(ctx context.Context, h []byte) (store.Token, error) {
	key := string(h)
	now := a.opt.Now()
	a.mu.RLock()
	e, ok := a.tokens[key]
	_, miss := a.misses[key]
	a.mu.RUnlock()
	if ok && now.Sub(e.fetched) < maxEntryAge {
		return e.tok, nil
	}
	if miss {
		return store.Token{}, store.ErrNotFound
	}
	gen := a.gen.Load()
	v, err, _ := a.flight.Do("t"+key, func() (any, error) { return a.store.TokenByHash(ctx, h) })
	if errors.Is(err, store.ErrNotFound) {
		a.mu.Lock()
		if len(a.misses) >= maxCachedMisses {
			a.misses = map[string]struct{}{}
		}
		a.misses[key] = struct{}{}
		a.mu.Unlock()
		return store.Token{}, err
	}
	if err != nil {
		return store.Token{}, err
	}
	tok := v.(store.Token)
	a.mu.Lock()
	if a.gen.Load() == gen { // nothing was invalidated while we read
		a.tokens[key] = &tokenEntry{tok: tok, fetched: now}
		a.byID[tok.ID] = key
	}
	a.mu.Unlock()
	return tok, nil
}

// principal returns user id and their teams, from the cache when fresh.
func (a *Authenticator) principal(ctx context.Context, id string) (*principal, error) {
	now := a.opt.Now()
	a.mu.RLock()
	p, ok := a.users[id]
	a.mu.RUnlock()
	if ok && now.Sub(p.fetched) < maxEntryAge {
		return p, nil
	}
	gen := a.gen.Load()
	v, err, _ := a.flight.Do("u"+id, func() (any, error) {
		u, err := a.store.GetUser(ctx, id)
		if err != nil {
			return nil, err
		}
		ms, err := a.store.Memberships(ctx, id)
		if err != nil {
			return nil, err
		}
		p := &principal{user: u, teams: make(map[string]store.Role, len(ms)), fetched: now}
		for _, m := range ms {
			p.teams[m.TeamID] = m.Role
		}
		return p, nil
	})
	if err != nil {
		return nil, err
	}
	p = v.(*principal)
	a.mu.Lock()
	if a.gen.Load() == gen {
		a.users[id] = p
	}
	a.mu.Unlock()
	return p, nil
}

// reaches reports whether the principal may use a machine owned by user
// owner or, when team is set, by team.
func (p *principal) reaches(owner, team string) bool {
	if team != "" {
		_, ok := p.teams[team]
		return ok
	}
	return owner == p.user.ID
}

// SharedWith reports whether userID holds a live share of machineID: a
// token of scope store.ScopeShare for that machine, which only the machine
// itself can have issued (tunnelsvc.IssueDeviceToken). A disabled user
// holds none.
func (a *Authenticator) SharedWith(ctx context.Context, userID, machineID string) (bool, error) {
	if userID == "" || machineID == "" {
		return false, nil
	}
	p, err := a.principal(ctx, userID)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if p.user.Disabled || a.MachineRevoked(machineID, "") {
		return false, nil
	}
	toks, err := a.store.ListTokens(ctx, userID)
	if err != nil {
		return false, fmt.Errorf("list %s's tokens: %w", userID, err)
	}
	now := a.opt.Now()
	for _, t := range toks {
		if t.Scope == store.ScopeShare && t.MachineID == machineID && t.Live(now) {
			return true, nil
		}
	}
	return false, nil
}

// CanReach reports whether user userID may use a machine owned by owner
// (or by team, when set). Unknown and disabled users reach nothing.
func (a *Authenticator) CanReach(ctx context.Context, userID, owner, team string) (bool, error) {
	p, err := a.principal(ctx, userID)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return !p.user.Disabled && p.reaches(owner, team), nil
}

// End ends the call in ctx with the given status (answered by the
// middleware once the handler returns), e.g. when its request carries a
// message over the size limit.
func End(ctx context.Context, code codes.Code, betcode, msg string) {
	if k, ok := ctx.Value(callKey{}).(*call); ok {
		k.end(&endCause{code: code, betcode: betcode, msg: msg})
	}
}

// Machine records that the call in ctx uses machine id, so that revoking
// the machine or the caller's access to it ends the call.
func Machine(ctx context.Context, id string) {
	if k, ok := ctx.Value(callKey{}).(*call); ok {
		k.machineID.Store(&id)
	}
}

type callKey struct{}

// Middleware authenticates each call and stores the identity in its
// context; a call that cannot be authenticated is answered UNAUTHENTICATED
// here. A call forwarded by another replica (over mTLS with a relay
// certificate) keeps the user that replica authenticated; the forwarding
// headers of any other caller are dropped, so no client can claim a user or
// pose as a forwarded call.
func (a *Authenticator) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gen := a.gen.Load()
		id, ok := a.authenticate(w, r)
		if !ok {
			return
		}
		if a.opt.Limit != nil && id.ForwardedBy == "" && !a.opt.Limit(w, r, id) {
			return
		}
		spent := false
		if id.Scope == store.ScopePair && id.TokenID != "" && r.URL.Path == pairMethod {
			// Admitted: the ticket is spent now, before the call goes on.
			if !a.spendTicket(r.Context(), w, id) {
				return
			}
			spent = true
		}
		ctx, end := context.WithCancelCause(WithIdentity(r.Context(), id))
		k := &call{tokenID: id.TokenID, userID: id.UserID, end: end}
		if spent {
			// Spending revoked the ticket: that must not end the one call
			// it admitted (revoking its machine still does).
			k.tokenID = ""
		}
		ctx = context.WithValue(ctx, callKey{}, k)
		if id.UserID != "" {
			a.mu.Lock()
			a.calls[k] = struct{}{}
			a.mu.Unlock()
			if a.gen.Load() != gen {
				// A change arrived while this call was being admitted,
				// maybe before it was registered: check it again.
				a.recheckCalls(func(c *call) bool { return c == k })
			}
		}
		var expiry *time.Timer
		if !id.expires.IsZero() {
			// A stream outliving its token ends when the token expires.
			expiry = time.AfterFunc(id.expires.Sub(a.opt.Now()), func() {
				end(&endCause{codes.Unauthenticated, "", "token " + id.TokenID + " expired at " + id.expires.UTC().Format(time.RFC3339) + ": log in with a new one (betcode login)"})
			})
		}
		tw := grpcerr.TrackHeaders(w)
		next.ServeHTTP(tw, r.WithContext(ctx))
		// At the call's end, which for a parked stream is later.
		callpark.Then(tw, func() {
			if expiry != nil {
				expiry.Stop()
			}
			if id.UserID != "" {
				a.mu.Lock()
				delete(a.calls, k)
				a.mu.Unlock()
			}
			var cause *endCause
			if errors.As(context.Cause(ctx), &cause) {
				grpcerr.Write(tw, cause.code, cause.betcode, cause.msg, nil)
			}
			end(nil)
		})
	})
}

// authenticate returns the caller's identity, or answers the call and
// reports false.
func (a *Authenticator) authenticate(w http.ResponseWriter, r *http.Request) (Identity, bool) {
	by, user := r.Header.Get(ForwardedByHeader), r.Header.Get(UserHeader)
	if _, relay := mtls.PeerRelay(r.TLS); relay && by != "" && user != "" {
		id := Identity{UserID: user, ForwardedBy: by, Remote: r.RemoteAddr}
		if !forwardedScope(r, &id) {
			a.Audit(store.AuditEvent{Actor: user, Action: "auth.refused", Remote: r.RemoteAddr, Outcome: "denied",
				Detail: "malformed token scope from replica " + by, Target: r.URL.Path})
			grpcerr.Write(w, codes.Unauthenticated, "", "malformed forwarded token scope", nil)
			return Identity{}, false
		}
		r.Header.Del(ScopeHeader) // read into id; the machine need not see it
		return id, a.admitScope(w, r, id)
	}
	r.Header.Del(ForwardedByHeader)
	r.Header.Del(UserHeader)
	r.Header.Del(ScopeHeader)
	authz := r.Header.Get("Authorization")
	// The token must not travel on to a machine.
	r.Header.Del("Authorization")
	if authz == "" && openMethods[r.URL.Path] {
		return Identity{Remote: r.RemoteAddr}, true
	}
	refuse := func(msg, detail string) (Identity, bool) {
		a.Audit(store.AuditEvent{Action: "auth.refused", Remote: r.RemoteAddr, Outcome: "denied", Detail: detail, Target: r.URL.Path})
		grpcerr.Write(w, codes.Unauthenticated, "", msg, nil)
		return Identity{}, false
	}
	scheme, secret, _ := strings.Cut(authz, " ")
	if authz == "" {
		return refuse("this relay needs a token: log in with `betcode login --relay HOST:PORT` (authorization: Bearer bct_…)", "no token")
	}
	if !strings.EqualFold(scheme, "bearer") {
		return refuse("authorization must be `Bearer <token>`", "not a bearer token")
	}
	h, err := authtoken.Parse(authtoken.Client, strings.TrimSpace(secret))
	if err != nil {
		return refuse(err.Error(), "malformed token")
	}
	tok, err := a.token(r.Context(), h)
	if errors.Is(err, store.ErrNotFound) {
		return refuse("token not recognised: log in with a valid token (betcode login)", "unknown token "+authtoken.ID(h))
	}
	if err != nil {
		a.opt.Log.Error("auth: look up token", "err", err)
		grpcerr.Write(w, codes.Unavailable, "", "cannot check the token now; retry", nil)
		return Identity{}, false
	}
	if reason := a.refusal(tok); reason != "" {
		a.Audit(store.AuditEvent{Actor: tok.UserID, Action: "auth.refused", Target: "token:" + tok.ID, Remote: r.RemoteAddr, Outcome: "denied", Detail: reason})
		grpcerr.Write(w, codes.Unauthenticated, "", reason, nil)
		return Identity{}, false
	}
	p, err := a.principal(r.Context(), tok.UserID)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		a.opt.Log.Error("auth: look up user", "err", err)
		grpcerr.Write(w, codes.Unavailable, "", "cannot check the token now; retry", nil)
		return Identity{}, false
	}
	if err != nil || p.user.Disabled {
		return refuse("user "+tok.UserID+" is disabled", "disabled user")
	}
	// A scoped token is never an administrator's, whoever owns it.
	id := Identity{UserID: tok.UserID, TokenID: tok.ID, Admin: p.user.Admin && tok.Scope == "", Remote: r.RemoteAddr, expires: tok.ExpiresAt,
		Scope: tok.Scope, ScopeMachine: tok.MachineID}
	if !a.admitScope(w, r, id) {
		return Identity{}, false
	}
	a.touch(tok, r.RemoteAddr)
	markConn(r.Context())
	return id, true
}

// touch records the token's use: last_used every touchEvery, and an audit
// event when it is used from a new address.
func (a *Authenticator) touch(tok store.Token, remote string) {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	now := a.opt.Now()
	a.mu.Lock()
	last, seen := a.addrs[tok.ID]
	if !seen {
		last, _, _ = net.SplitHostPort(tok.LastUsedAddr)
		if last == "" {
			last = tok.LastUsedAddr
		}
	}
	newAddr := last != host
	a.addrs[tok.ID] = host
	due := now.Sub(a.touched[tok.ID]) >= touchEvery || newAddr
	if due {
		a.touched[tok.ID] = now
	}
	if len(a.touched) > 100000 { // bounded: forget, the next use writes again
		a.touched, a.addrs = map[string]time.Time{}, map[string]string{}
	}
	a.mu.Unlock()
	if newAddr {
		a.Audit(store.AuditEvent{Actor: tok.UserID, Action: "token.used_from_new_address", Target: "token:" + tok.ID, Remote: remote, Outcome: "ok",
			Detail: "previous address " + orNone(last)})
	}
	if due {
		a.audit.touch(tok.ID, now, remote)
	}
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
