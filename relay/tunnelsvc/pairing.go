package tunnelsvc

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/betcode-dev/betcode/relay/internal/grpcerr"
	"github.com/betcode-dev/betcode/relay/store"
	"github.com/betcode-dev/betcode/shared/authtoken"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// Pairing (docs/security.md): a machine asks, over its own mTLS
// connection, for the relay credentials of the devices it pairs. The relay
// never sees the devices' keys or the pairing secret; it only issues
// tokens that reach the calling machine and nothing else.

// PairingTicketTTL is how long a pairing ticket works.
const PairingTicketTTL = 10 * time.Minute

// Limits per machine.
const (
	maxLiveTickets = 5
	maxLiveDevices = 100
)

// BetCode error codes of the limits (RESOURCE_EXHAUSTED).
const (
	CodePairingLimit = "PAIRING_LIMIT"
	CodeDeviceLimit  = "DEVICE_LIMIT"
)

// lockMachine serialises the calls of one machine that count its tokens
// before issuing one, so that concurrent calls cannot pass a limit
// together (on this replica; a machine has one connection, so one replica,
// at a time).
func (s *Service) lockMachine(id string) func() {
	mu, _ := s.issuing.LoadOrStore(id, &sync.Mutex{})
	mu.(*sync.Mutex).Lock()
	return mu.(*sync.Mutex).Unlock
}

// tokenUser is whose name a machine's scoped tokens carry: the machine's
// owner, or for a team machine without one, the team's owner. A revoked
// machine gets nothing (nor would its tokens work: auth refuses them).
func (s *Service) tokenUser(ctx context.Context, id, action string) (string, error) {
	m, err := s.Store.GetMachine(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return "", statusErr(codes.FailedPrecondition, "", "machine "+id+" is not registered: connect its tunnel first")
	}
	if err != nil {
		return "", statusErr(codes.Internal, "", "look up machine: "+err.Error())
	}
	if !m.RevokedAt.IsZero() || s.Revoked != nil && s.Revoked(id) {
		s.audit(ctx, id, action, "denied", "revoked machine")
		return "", statusErr(codes.PermissionDenied, "", "machine "+id+" was revoked")
	}
	if m.OwnerID != "" {
		return m.OwnerID, nil
	}
	members, err := s.Store.Members(ctx, m.TeamID)
	if err != nil {
		return "", statusErr(codes.Internal, "", "look up team: "+err.Error())
	}
	for _, mb := range members {
		if mb.Role == store.RoleOwner {
			return mb.UserID, nil
		}
	}
	return "", statusErr(codes.FailedPrecondition, "", "machine "+id+" has no owner to issue tokens for")
}

// scopedTokens counts the calling machine's live tokens of scope.
func (s *Service) scopedTokens(ctx context.Context, user, machine, scope string) (int, error) {
	toks, err := s.Store.ListTokens(ctx, user)
	if err != nil {
		return 0, statusErr(codes.Internal, "", "list tokens: "+err.Error())
	}
	n, now := 0, s.now()
	for _, t := range toks {
		if t.MachineID == machine && t.Scope == scope && t.Live(now) {
			n++
		}
	}
	return n, nil
}

// issue stores a new scoped token and returns its secret.
func (s *Service) issue(ctx context.Context, t store.Token) (string, store.Token, error) {
	secret, err := authtoken.New(authtoken.Client)
	if err != nil {
		return "", t, statusErr(codes.Internal, "", err.Error())
	}
	t.Hash = authtoken.Hash(secret)
	t.ID = authtoken.ID(t.Hash)
	if err := s.Store.CreateToken(ctx, t); err != nil {
		return "", t, statusErr(codes.Internal, "", "store token: "+err.Error())
	}
	return secret, t, nil
}

// IssuePairingTicket gives the calling machine a ticket for one Pair call
// to it.
func (s *Service) IssuePairingTicket(ctx context.Context, _ *pb.IssuePairingTicketRequest) (*pb.IssuePairingTicketResponse, error) {
	id, err := s.machineID(ctx)
	if err != nil {
		return nil, err
	}
	user, err := s.tokenUser(ctx, id, "pairing.ticket")
	if err != nil {
		return nil, err
	}
	defer s.lockMachine(id)()
	n, err := s.scopedTokens(ctx, user, id, store.ScopePair)
	if err != nil {
		return nil, err
	}
	if n >= maxLiveTickets {
		s.audit(ctx, id, "pairing.ticket", "denied", "limit")
		return nil, statusErr(codes.ResourceExhausted, CodePairingLimit,
			fmt.Sprintf("machine %s has %d unused pairing codes: use one, or wait up to %s for them to expire", id, n, PairingTicketTTL))
	}
	now := s.now()
	secret, t, err := s.issue(ctx, store.Token{UserID: user, Name: "pairing", MachineID: id, Scope: store.ScopePair,
		CreatedAt: now, ExpiresAt: now.Add(PairingTicketTTL)})
	if err != nil {
		return nil, err
	}
	s.audit(ctx, id, "pairing.ticket", "ok", "token:"+t.ID)
	return &pb.IssuePairingTicketResponse{Ticket: secret, ExpiresAt: timestamppb.New(t.ExpiresAt)}, nil
}

// IssueDeviceToken gives the calling machine a token scoped to it for a
// device it has just paired.
func (s *Service) IssueDeviceToken(ctx context.Context, req *pb.IssueDeviceTokenRequest) (*pb.IssueDeviceTokenResponse, error) {
	id, err := s.machineID(ctx)
	if err != nil {
		return nil, err
	}
	if !validDeviceName(req.DeviceName) {
		return nil, statusErr(codes.InvalidArgument, "INVALID_ARGUMENT", "a device name is 1 to 64 printable characters")
	}
	user, err := s.tokenUser(ctx, id, "device_token.issue")
	if err != nil {
		return nil, err
	}
	if req.ShareUser != "" {
		return s.issueShareToken(ctx, id, user, req)
	}
	defer s.lockMachine(id)()
	n, err := s.scopedTokens(ctx, user, id, store.ScopeDevice)
	if err != nil {
		return nil, err
	}
	if n >= maxLiveDevices {
		s.audit(ctx, id, "device_token.issue", "denied", "limit")
		return nil, statusErr(codes.ResourceExhausted, CodeDeviceLimit,
			fmt.Sprintf("machine %s has %d paired devices' tokens: revoke one (betcode-agent devices revoke ID)", id, n))
	}
	secret, t, err := s.issue(ctx, store.Token{UserID: user, Name: "device:" + req.DeviceName, MachineID: id,
		Scope: store.ScopeDevice, CreatedAt: s.now()})
	if err != nil {
		return nil, err
	}
	s.audit(ctx, id, "device_token.issue", "ok", "token:"+t.ID)
	return &pb.IssueDeviceTokenResponse{Token: secret, TokenId: t.ID}, nil
}

// MaxShareTTL bounds how long a share's token lives.
const MaxShareTTL = 30 * 24 * time.Hour

// maxLiveShares bounds a machine's live share tokens.
const maxLiveShares = 100

// issueShareToken gives the calling machine a token for a teammate it
// shares a session with: owned by that user (so the relay's audit shows
// the teammate, and a disabled teammate loses it), scoped to the machine
// (ChannelService.Open only; auth/scope.go), expiring with the share.
// While it is live, the teammate's own login may make the share code's
// Pair call to the machine (router.ShareChecker); any other user reaches
// nothing. owner is the machine's owner.
func (s *Service) issueShareToken(ctx context.Context, id, owner string, req *pb.IssueDeviceTokenRequest) (*pb.IssueDeviceTokenResponse, error) {
	now := s.now()
	expires := req.ExpiresAt.AsTime()
	switch {
	case req.ExpiresAt == nil || !expires.After(now):
		return nil, statusErr(codes.InvalidArgument, "INVALID_ARGUMENT", "a share's token needs an expiry in the future")
	case expires.Sub(now) > MaxShareTTL:
		return nil, statusErr(codes.InvalidArgument, "INVALID_ARGUMENT", fmt.Sprintf("a share lasts at most %s", MaxShareTTL))
	case req.ShareUser == owner:
		return nil, statusErr(codes.InvalidArgument, "INVALID_ARGUMENT", "the machine's owner needs no share: pair the device instead")
	}
	u, err := s.Store.GetUser(ctx, req.ShareUser)
	if errors.Is(err, store.ErrNotFound) || err == nil && u.Disabled {
		s.audit(ctx, id, "share_token.issue", "denied", "no such user: "+req.ShareUser)
		return nil, statusErr(codes.NotFound, "USER_NOT_FOUND", "no user "+req.ShareUser+" on this relay")
	}
	if err != nil {
		return nil, statusErr(codes.Internal, "", "look up user: "+err.Error())
	}
	defer s.lockMachine(id)()
	n, err := s.scopedTokens(ctx, "", id, store.ScopeShare) // a share's token is its teammate's: count everyone's
	if err != nil {
		return nil, err
	}
	if n >= maxLiveShares {
		s.audit(ctx, id, "share_token.issue", "denied", "limit")
		return nil, statusErr(codes.ResourceExhausted, CodeDeviceLimit, fmt.Sprintf("machine %s has %d live shares: revoke one", id, n))
	}
	secret, t, err := s.issue(ctx, store.Token{UserID: u.ID, Name: "share:" + req.DeviceName, MachineID: id,
		Scope: store.ScopeShare, CreatedAt: now, ExpiresAt: expires})
	if err != nil {
		return nil, err
	}
	s.audit(ctx, id, "share_token.issue", "ok", "token:"+t.ID+" user:"+u.ID+" owner:"+owner)
	return &pb.IssueDeviceTokenResponse{Token: secret, TokenId: t.ID}, nil
}

// RevokeDeviceToken revokes one of the calling machine's device tokens.
func (s *Service) RevokeDeviceToken(ctx context.Context, req *pb.RevokeDeviceTokenRequest) (*pb.RevokeDeviceTokenResponse, error) {
	id, err := s.machineID(ctx)
	if err != nil {
		return nil, err
	}
	user, err := s.tokenUser(ctx, id, "device_token.revoke")
	if err != nil {
		return nil, err
	}
	// A share's token is its teammate's: look among everyone's.
	toks, err := s.Store.ListTokens(ctx, "")
	if err != nil {
		return nil, statusErr(codes.Internal, "", "list tokens: "+err.Error())
	}
	for _, t := range toks {
		if t.ID == req.TokenId && t.MachineID == id && (t.Scope == store.ScopeDevice && t.UserID == user || t.Scope == store.ScopeShare) {
			if _, err := s.Store.RevokeToken(ctx, t.ID, s.now()); err != nil {
				return nil, statusErr(codes.Internal, "", "revoke token: "+err.Error())
			}
			s.audit(ctx, id, "device_token.revoke", "ok", "token:"+t.ID)
			return &pb.RevokeDeviceTokenResponse{}, nil
		}
	}
	s.audit(ctx, id, "device_token.revoke", "denied", "not this machine's device token: "+req.TokenId)
	return nil, statusErr(codes.NotFound, "", "machine "+id+" has no device token "+req.TokenId)
}

// validDeviceName accepts 1 to 64 printable characters.
func validDeviceName(s string) bool {
	if s == "" || !utf8.ValidString(s) || utf8.RuneCountInString(s) > 64 {
		return false
	}
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}

// statusErr is a status error carrying BetCode error code betcode.
func statusErr(c codes.Code, betcode, msg string) error {
	return grpcerr.Status(c, betcode, msg, nil).Err()
}
