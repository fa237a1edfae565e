package store

import (
	"context"
	"errors"
	"time"
)

// Identity errors; test with errors.Is.
var (
	// ErrExists: a user, team or token with that id already exists.
	ErrExists = errors.New("already exists")
	// ErrTokenUsed: a join token was already used to enroll a machine.
	ErrTokenUsed = errors.New("join token already used")
	// ErrTokenSpent: a single-use client token (a pairing ticket) was
	// already used, or revoked.
	ErrTokenSpent = errors.New("token already used or revoked")
	// ErrExpired: a join token is past its expiry.
	ErrExpired = errors.New("expired")
	// ErrRevoked: the machine was revoked (or deleted) and may not register
	// again.
	ErrRevoked = errors.New("machine revoked")
)

// Role is a user's role in a team. Owners and admins manage the team's
// members, join tokens and machines; members use the team's machines.
type Role string

// Team roles, strongest first.
const (
	RoleOwner  Role = "owner"
	RoleAdmin  Role = "admin"
	RoleMember Role = "member"
)

// Valid reports whether r is one of the three roles.
func (r Role) Valid() bool { return r == RoleOwner || r == RoleAdmin || r == RoleMember }

// Manages reports whether r may manage its team (owner or admin).
func (r Role) Manages() bool { return r == RoleOwner || r == RoleAdmin }

// User is an account on the relay. ID is the login name.
type User struct {
	ID    string
	Email string
	// Admin marks a relay administrator: manages every user, team and
	// machine (the first owner is created with the admin CLI; docs/auth.md).
	Admin     bool
	Disabled  bool
	CreatedAt time.Time
}

// Team is a group of users sharing machines.
type Team struct {
	ID        string
	CreatedAt time.Time
}

// Member is a user's membership in a team.
type Member struct {
	TeamID, UserID string
	Role           Role
	AddedAt        time.Time
}

// Token is a client access token. Only the SHA-256 of its secret is
// stored; ID is public (shown in listings, used to revoke).
type Token struct {
	ID     string
	UserID string
	Name   string
	Hash   []byte // SHA-256 of the whole token string
	// CreatedAt, ExpiresAt (zero: never expires), LastUsedAt (zero: never
	// used), RevokedAt (zero: not revoked).
	CreatedAt, ExpiresAt, LastUsedAt, RevokedAt time.Time
	// LastUsedAddr is the client address of the last recorded use.
	LastUsedAddr string
	// MachineID, when set, is the one machine the token reaches, and Scope
	// what it may do there: ScopeDevice (a paired device: end-to-end
	// channels only) or ScopePair (a pairing ticket: one Pair call). An
	// ordinary token has neither.
	MachineID, Scope string
}

// Token scopes (Token.Scope).
const (
	// ScopeDevice: ChannelService only, on Token.MachineID.
	ScopeDevice = "device"
	// ScopePair: ChannelService.Pair only, on Token.MachineID, once.
	ScopePair = "pair"
	// ScopeShare: a teammate's credential for a session its owner's
	// machine shared with it (docs/security.md, "Sharing a session"):
	// ChannelService.Open only, on Token.MachineID, whoever owns the
	// machine; while it is live, its user's own login may also make
	// ChannelService.Pair calls to that machine (the share code's).
	ScopeShare = "share"
)

// Live reports whether t may authenticate at now.
func (t *Token) Live(now time.Time) bool {
	return t.RevokedAt.IsZero() && (t.ExpiresAt.IsZero() || now.Before(t.ExpiresAt))
}

// EnrollToken is a single-use join token that enrolls one machine, owned
// by TeamID or, when TeamID is empty, by UserID (who created the token in
// either case).
type EnrollToken struct {
	ID                   string
	Hash                 []byte // SHA-256 of the whole token string
	TeamID, UserID       string
	CreatedAt, ExpiresAt time.Time
	// UsedAt and MachineID are set when the token is consumed.
	UsedAt    time.Time
	MachineID string
}

// AuditEvent is one security-relevant event. Nothing secret goes here.
type AuditEvent struct {
	ID int64
	At time.Time
	// Actor is who acted: a user id, "machine:<id>", "admin-cli", or ""
	// for an unauthenticated caller.
	Actor string
	// Action, e.g. "token.created", "auth.refused", "machine.revoked"
	// (docs/auth.md lists them).
	Action string
	// Target is what was acted on (a token id, user, team, machine).
	Target string
	// Remote is the caller's address ("" for the admin CLI).
	Remote string
	// Outcome is "ok", "denied" or "error".
	Outcome string
	// Detail is a short free-text explanation.
	Detail string
}

// AuditFilter selects audit events. Zero fields match everything.
type AuditFilter struct {
	Since time.Time
	// Actor matches Actor or Target exactly (a user's own events and the
	// events about them).
	Actor string
	// Limit caps the number returned (default 1000), newest last.
	Limit int
}

// ChangeKind says what changed in a Change.
type ChangeKind string

// Change kinds.
const (
	// ChangeToken: token ID was revoked.
	ChangeToken ChangeKind = "token"
	// ChangeUser: user ID was disabled, enabled or changed.
	ChangeUser ChangeKind = "user"
	// ChangeMembership: user ID's teams or roles changed.
	ChangeMembership ChangeKind = "member"
	// ChangeMachine: machine ID was revoked, deleted or changed owner.
	ChangeMachine ChangeKind = "machine"
	// ChangeAll: changes may have been missed (the listener reconnected):
	// forget every cached identity.
	ChangeAll ChangeKind = "all"
)

// Change is one committed change that invalidates cached identities.
type Change struct {
	Kind ChangeKind
	ID   string
}

// Identity is the relay's accounts: users, teams, tokens, join tokens,
// machine certificates and revocations, and the audit log. Every change
// that can narrow what someone may do is published to Watch, across every
// process sharing the store, once committed.
type Identity interface {
	// CreateUser stores u; an existing id gives ErrExists. A zero
	// CreatedAt means now.
	CreateUser(ctx context.Context, u User) error
	// GetUser returns user id, or ErrNotFound.
	GetUser(ctx context.Context, id string) (User, error)
	// ListUsers returns every user ordered by id.
	ListUsers(ctx context.Context) ([]User, error)
	// SetUserDisabled disables or enables user id (publishes ChangeUser).
	SetUserDisabled(ctx context.Context, id string, disabled bool) error

	// CreateTeam stores t; an existing id gives ErrExists.
	CreateTeam(ctx context.Context, t Team) error
	// GetTeam returns team id, or ErrNotFound.
	GetTeam(ctx context.Context, id string) (Team, error)
	// ListTeams returns every team ordered by id.
	ListTeams(ctx context.Context) ([]Team, error)
	// SetMember adds m.UserID to m.TeamID with m.Role, or changes the role
	// of an existing member (publishes ChangeMembership for the user). An
	// unknown team or user gives ErrNotFound.
	SetMember(ctx context.Context, m Member) error
	// RemoveMember removes userID from teamID (publishes ChangeMembership);
	// not a member gives ErrNotFound.
	RemoveMember(ctx context.Context, teamID, userID string) error
	// Members returns teamID's members ordered by user id.
	Members(ctx context.Context, teamID string) ([]Member, error)
	// Memberships returns userID's memberships ordered by team id.
	Memberships(ctx context.Context, userID string) ([]Member, error)

	// CreateToken stores t (Hash and ID unique, else ErrExists).
	CreateToken(ctx context.Context, t Token) error
	// TokenByHash returns the token whose Hash is hash (revoked and expired
	// ones too: the caller decides), or ErrNotFound.
	TokenByHash(ctx context.Context, hash []byte) (Token, error)
	// ListTokens returns userID's tokens ("" for everyone's), newest first.
	ListTokens(ctx context.Context, userID string) ([]Token, error)
	// RevokeToken marks token id revoked at at and returns it (publishes
	// ChangeToken). Revoking twice keeps the first time. Unknown:
	// ErrNotFound.
	RevokeToken(ctx context.Context, id string, at time.Time) (Token, error)
	// SpendToken revokes token id at now if it is live then, for a token
	// that works once (a pairing ticket), and returns it (publishes
	// ChangeToken). Revoked or spent before: ErrTokenSpent; expired at now:
	// ErrExpired; unknown: ErrNotFound. Exactly one of any number of
	// concurrent calls succeeds.
	SpendToken(ctx context.Context, id string, now time.Time) (Token, error)
	// TouchToken records a use of token id at at from addr.
	TouchToken(ctx context.Context, id string, at time.Time, addr string) error

	// CreateEnrollToken stores t.
	CreateEnrollToken(ctx context.Context, t EnrollToken) error
	// GetEnrollToken returns the join token whose Hash is hash, used or
	// not. Unknown: ErrNotFound.
	GetEnrollToken(ctx context.Context, hash []byte) (EnrollToken, error)
	// ConsumeEnrollToken atomically marks the join token whose Hash is
	// hash used by machineID at now and returns it. Unknown: ErrNotFound;
	// used before: ErrTokenUsed; expired at now: ErrExpired. Exactly one
	// of any number of concurrent calls succeeds.
	ConsumeEnrollToken(ctx context.Context, hash []byte, machineID string, now time.Time) (EnrollToken, error)

	// RecordCertificate notes a certificate issued to machineID, so that
	// revoking the machine revokes its serial (hex, lower case).
	RecordCertificate(ctx context.Context, machineID, serial string, notAfter time.Time) error
	// RevokeMachine marks machine id and every certificate recorded for it
	// revoked (publishes ChangeMachine). The revocation outlives the
	// machine's row. Revoking an unknown id records the revocation anyway.
	RevokeMachine(ctx context.Context, id string, at time.Time) error
	// DeleteMachine revokes machine id, then deletes its row, its buffered
	// messages and any user's current-machine record naming it. Unknown:
	// ErrNotFound.
	DeleteMachine(ctx context.Context, id string, at time.Time) error
	// Revocations returns every revoked machine id and certificate serial.
	Revocations(ctx context.Context) (machineIDs, serials []string, err error)
	// AllMachines returns every machine ordered by id (revoked ones too).
	AllMachines(ctx context.Context) ([]Machine, error)

	// AppendAudit stores e (a zero At means now) and assigns its ID.
	AppendAudit(ctx context.Context, e AuditEvent) error
	// ListAudit returns the events f selects, oldest first.
	ListAudit(ctx context.Context, f AuditFilter) ([]AuditEvent, error)

	// Watch subscribes to the Changes committed by any process sharing the
	// store and calls fn with each, in commit order, until ctx ends (it then
	// returns ctx's error). Its first call is fn(Change{Kind: ChangeAll}),
	// made once the subscription is in place, so a caller that drops its
	// cache there misses nothing; it calls that again whenever changes may
	// have been missed (a lost database connection). Changes reach every
	// watcher within a second of commit. fn must not block for long.
	Watch(ctx context.Context, fn func(Change)) error
}
