// Package oidcsvc implements the gRPC OIDCService: OpenID Connect sign-in.
// A client runs the OAuth 2.0 device flow against the identity provider the
// relay names (GetOIDCConfig) and trades the ID token it gets for a relay
// client token (ExchangeOIDCToken). The relay verifies the token with the
// provider's keys, maps its verified email to the BetCode user with that
// email, optionally adds the user to the teams its groups claim names, and
// creates the token through relay/admin, so it is audited like any other.
//
// Both RPCs are open (they are how a client gets a token); the relay's
// per-address limits apply to them.
//
// For the web app, which cannot reach the provider itself, Handler runs
// the device flow on the relay (POST /api/oidc/device and .../poll, see
// device.go) and ends it with the same exchange.
package oidcsvc

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/betcode-dev/betcode/relay/admin"
	"github.com/betcode-dev/betcode/relay/auth"
	"github.com/betcode-dev/betcode/relay/store"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// maxIDTokenBytes bounds the ID token a caller may send; real ones are a
// few KiB.
const maxIDTokenBytes = 64 << 10

// Audit actions of sign-in; token creation and team membership are
// audited by relay/admin (token.created, team.member_added).
const (
	// ActionRefused: an ExchangeOIDCToken was refused (bad token,
	// unverified or unknown email, disabled user).
	ActionRefused = "oidc.refused"
	// SystemActor is the audit actor of the team memberships sign-in adds.
	SystemActor = "oidc"
)

// Store is what sign-in reads: users by email, teams and memberships.
type Store interface {
	ListUsers(ctx context.Context) ([]store.User, error)
	ListTeams(ctx context.Context) ([]store.Team, error)
	Memberships(ctx context.Context, userID string) ([]store.Member, error)
}

var _ pb.OIDCServiceServer = (*Service)(nil)

// Service implements OIDCService.
type Service struct {
	pb.UnimplementedOIDCServiceServer
	cfg   Config
	store Store
	ops   *admin.Ops
	audit func(store.AuditEvent)
	log   *slog.Logger
	now   func() time.Time
	v     *verifier
	flows *flows // the web device flows in progress
}

// Options are a Service's collaborators.
type Options struct {
	// Store is read for users, teams and memberships.
	Store Store
	// Ops creates tokens and memberships (and audits them).
	Ops *admin.Ops
	// Audit records refusals (e.g. auth.Authenticator.Audit); nil drops
	// them.
	Audit func(store.AuditEvent)
	Log   *slog.Logger
	// Now is the clock (default time.Now), also for ID token expiry.
	Now func() time.Time
	// FlowKey (32 bytes), shared by every replica, seals web device flows
	// into their ids so that a poll may reach any replica; empty binds
	// each flow to the replica that started it.
	FlowKey []byte
}

// New returns the service for cfg, which must be valid; a disabled cfg
// answers GetOIDCConfig with enabled = false and refuses exchanges.
func New(cfg Config, o Options) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	fl, err := newFlows(o.FlowKey)
	if err != nil {
		return nil, err
	}
	s := &Service{store: o.Store, ops: o.Ops, audit: o.Audit, log: o.Log, flows: fl}
	if s.audit == nil {
		s.audit = func(store.AuditEvent) {}
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	now := o.Now
	if now == nil {
		now = time.Now
	}
	s.now = now
	if cfg.Enabled() {
		s.cfg = cfg.withDefaults()
		s.v = newVerifier(s.cfg, now)
	}
	return s, nil
}

// GetOIDCConfig names the identity provider and client to sign in with.
func (s *Service) GetOIDCConfig(context.Context, *pb.GetOIDCConfigRequest) (*pb.GetOIDCConfigResponse, error) {
	if s.v == nil {
		return &pb.GetOIDCConfigResponse{}, nil
	}
	return &pb.GetOIDCConfigResponse{Enabled: true, Issuer: s.cfg.Issuer, ClientId: s.cfg.ClientID, Scopes: s.cfg.Scopes}, nil
}

// ExchangeOIDCToken verifies an ID token and creates a client token for the
// user it maps to.
func (s *Service) ExchangeOIDCToken(ctx context.Context, req *pb.ExchangeOIDCTokenRequest) (*pb.ExchangeOIDCTokenResponse, error) {
	if s.v == nil {
		return nil, status.Error(codes.FailedPrecondition, "this relay has no OIDC sign-in; log in with a token (betcode login --relay HOST:PORT)")
	}
	remote := ""
	if id, ok := auth.FromContext(ctx); ok {
		remote = id.Remote
	}
	secret, t, user, err := s.exchange(ctx, req.GetIdToken(), req.GetTokenName(), remote)
	if err != nil {
		return nil, err
	}
	return &pb.ExchangeOIDCTokenResponse{Token: secret, Info: tokenPB(&t), UserId: user}, nil
}

// exchange verifies the ID token raw, maps it to its user, adds them to
// the teams its groups name and creates a client token named name (default
// DefaultTokenName) for them. Refusals are audited with remote; errors are
// gRPC statuses. Both ExchangeOIDCToken and the web device flow use it.
func (s *Service) exchange(ctx context.Context, raw, name, remote string) (string, store.Token, string, error) {
	var none store.Token
	refuse := func(target string, err error) error {
		s.audit(store.AuditEvent{Action: ActionRefused, Target: target, Remote: remote, Outcome: admin.OutcomeDenied, Detail: status.Convert(err).Message()})
		return err
	}
	switch {
	case raw == "":
		return "", none, "", status.Error(codes.InvalidArgument, "id_token: required")
	case len(raw) > maxIDTokenBytes:
		return "", none, "", refuse("", status.Errorf(codes.InvalidArgument, "id_token: %d bytes is too long (at most %d)", len(raw), maxIDTokenBytes))
	}
	payload, err := s.v.verify(ctx, raw)
	if errors.Is(err, errDiscovery) {
		s.log.Warn("oidc: cannot reach the identity provider", "issuer", s.cfg.Issuer, "err", err)
		return "", none, "", status.Errorf(codes.Unavailable, "the relay cannot reach its identity provider (%s); try again later", s.cfg.Issuer)
	}
	if err != nil {
		return "", none, "", refuse("", status.Errorf(codes.Unauthenticated, "the ID token was refused: %v", err))
	}
	c, err := ParseClaims(payload, s.cfg.GroupsClaim)
	if err != nil {
		return "", none, "", refuse("", status.Errorf(codes.PermissionDenied, "the ID token's claims cannot be used: %v", err))
	}
	users, err := s.store.ListUsers(ctx)
	if err != nil {
		return "", none, "", status.Errorf(codes.Internal, "list users: %v", err)
	}
	u, err := MatchUser(c, users)
	if err != nil {
		return "", none, "", refuse(u.ID, err)
	}
	via := "OIDC from " + s.cfg.Issuer
	s.joinTeams(ctx, u.ID, c.Groups, via)
	if name == "" {
		name = DefaultTokenName
	}
	// The user creates their own token: the relay/admin rules for a user
	// apply (an enabled user, a valid name and lifetime).
	secret, t, err := s.ops.CreateToken(ctx, admin.Actor{UserID: u.ID, Remote: remote, Via: via}, u.ID, name, s.cfg.TokenTTL)
	if err != nil {
		return "", none, "", err
	}
	s.log.Info("oidc: signed in", "user", u.ID, "token_id", t.ID, "remote", remote)
	return secret, t, u.ID, nil
}

// joinTeams adds user as a member to each team groups names that they are
// not in yet. It never changes a role nor removes anyone: a group the
// provider stops listing leaves the membership to the team's managers. A
// failure is logged (and audited by relay/admin) but does not refuse the
// sign-in: the user is who they are, in whichever teams they are.
func (s *Service) joinTeams(ctx context.Context, user string, groups []string, via string) {
	if s.cfg.GroupsClaim == "" || len(groups) == 0 {
		return
	}
	teams, err := s.store.ListTeams(ctx)
	if err != nil {
		s.log.Error("oidc: list teams for the groups claim", "user", user, "err", err)
		return
	}
	ms, err := s.store.Memberships(ctx, user)
	if err != nil {
		s.log.Error("oidc: read memberships for the groups claim", "user", user, "err", err)
		return
	}
	actor := admin.System(SystemActor)
	actor.Via = via
	// A role granted between the read above and AddMember would be
	// overwritten with member; the window is one store round trip, and an
	// administrator who just granted it sees the change in the audit log.
	for _, team := range TeamsToJoin(groups, teams, ms) {
		if _, err := s.ops.AddMember(ctx, actor, team, user, store.RoleMember); err != nil {
			s.log.Error("oidc: add a member from the groups claim", "user", user, "team", team, "err", err)
		}
	}
}

func tokenPB(t *store.Token) *pb.TokenInfo {
	return &pb.TokenInfo{Id: t.ID, UserId: t.UserID, Name: t.Name, CreatedAt: ts(t.CreatedAt), ExpiresAt: ts(t.ExpiresAt)}
}

func ts(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}
