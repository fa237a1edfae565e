package share

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/betcode-dev/betcode/agent/pairing"
	"github.com/betcode-dev/betcode/agent/server"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/e2ee"
)

// Bounds of a share's life.
const (
	DefaultTTL = 24 * time.Hour
	MaxTTL     = 30 * 24 * time.Hour
)

// maxUser bounds a teammate's user id.
const maxUser = 128

// Relay is what sharing needs of the agent's relay link.
type Relay interface {
	// Addr is the relay's host:port, as devices dial it.
	Addr() string
	// IssueShareToken gets user's credential scoped to this machine,
	// expiring at expires.
	IssueShareToken(ctx context.Context, name, user string, expires time.Time) (token, tokenID string, err error)
	// RevokeDeviceToken revokes it.
	RevokeDeviceToken(ctx context.Context, tokenID string) error
}

// Service serves ShareService and ends shares when they expire (Run).
type Service struct {
	pb.UnimplementedShareServiceServer

	Grants    *Store
	Devices   *pairing.Store
	MachineID string
	// Relay is nil when the agent has no relay: sharing is then refused.
	Relay Relay
	// SessionExists reports whether session id exists (an error if not).
	SessionExists func(ctx context.Context, id string) error
	Log           *slog.Logger
	// Now is the clock (nil: time.Now).
	Now func() time.Time

	mu     sync.Mutex
	offers map[string]*pairing.Offer // share id -> its code's offer, until used or expired
}

func (s *Service) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// ModeOf maps the API's mode to a grant's.
func ModeOf(m pb.ShareMode) (string, error) {
	switch m {
	case pb.ShareMode_SHARE_MODE_UNSPECIFIED, pb.ShareMode_SHARE_MODE_READ:
		return ModeRead, nil
	case pb.ShareMode_SHARE_MODE_ANSWER:
		return ModeAnswer, nil
	}
	return "", fmt.Errorf("unknown share mode %d", m)
}

// checkUser accepts a relay user id that fits a share code: 1 to 128
// printable ASCII characters without spaces.
func checkUser(u string) error {
	if u == "" || len(u) > maxUser {
		return errors.New("a teammate's user id is 1 to 128 characters")
	}
	for i := range len(u) {
		if u[i] <= ' ' || u[i] > '~' {
			return errors.New("a teammate's user id is printable ASCII without spaces")
		}
	}
	return nil
}

// CreateShare shares a session with a teammate and returns the share code.
func (s *Service) CreateShare(ctx context.Context, req *pb.CreateShareRequest) (*pb.CreateShareResponse, error) {
	if req.SessionId == "" {
		return nil, server.Status(codes.InvalidArgument, "INVALID_ARGUMENT", "name the session to share")
	}
	if err := checkUser(req.User); err != nil {
		return nil, server.Status(codes.InvalidArgument, "INVALID_ARGUMENT", err.Error())
	}
	mode, err := ModeOf(req.Mode)
	if err != nil {
		return nil, server.Status(codes.InvalidArgument, "INVALID_ARGUMENT", err.Error())
	}
	now := s.now()
	expires := now.Add(DefaultTTL)
	if req.ExpiresAt != nil {
		expires = req.ExpiresAt.AsTime()
	}
	switch {
	case !expires.After(now):
		return nil, server.Status(codes.InvalidArgument, "INVALID_ARGUMENT", "a share must end in the future")
	case expires.Sub(now) > MaxTTL:
		return nil, server.Status(codes.InvalidArgument, "INVALID_ARGUMENT", fmt.Sprintf("a share lasts at most %s", MaxTTL))
	}
	if s.SessionExists != nil {
		if err := s.SessionExists(ctx, req.SessionId); err != nil {
			return nil, server.Status(codes.NotFound, "SESSION_NOT_FOUND", "no session "+req.SessionId+" on this machine")
		}
	}
	if s.Relay == nil {
		return nil, server.Status(codes.FailedPrecondition, "NO_RELAY",
			"this agent is not connected to a relay: a teammate reaches a shared session through one (betcode-agent enroll)")
	}
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, server.Status(codes.Internal, "", err.Error())
	}
	g := Grant{ID: "sh-" + hex.EncodeToString(b[:]), SessionID: req.SessionId, User: req.User, Mode: mode,
		CreatedAt: now.UTC(), ExpiresAt: expires.UTC()}
	token, tokenID, err := s.Relay.IssueShareToken(ctx, g.ID, g.User, g.ExpiresAt)
	if err != nil {
		if st, ok := status.FromError(err); ok && st.Code() != codes.Unknown {
			return nil, st.Err() // the relay's code and reason (USER_NOT_FOUND, ...)
		}
		return nil, server.Status(codes.Unavailable, "RELAY_UNAVAILABLE", "get the teammate's credential from the relay: "+err.Error())
	}
	g.TokenID = tokenID
	undo := func() {
		if err := s.Relay.RevokeDeviceToken(context.WithoutCancel(ctx), tokenID); err != nil {
			s.Log.Warn("revoke an unused share credential", "share", g.ID, "err", err)
		}
	}
	o, err := s.Devices.NewShareOffer(pairing.ShareOffer{ID: g.ID, Expires: g.ExpiresAt, Token: token, TokenID: tokenID,
		SessionID: g.SessionID, Mode: g.Mode})
	if err != nil {
		undo()
		if errors.Is(err, pairing.ErrOfferLimit) {
			return nil, server.Status(codes.ResourceExhausted, "PAIRING_LIMIT", err.Error())
		}
		return nil, server.Status(codes.Internal, "", err.Error())
	}
	if err := s.Grants.Add(g); err != nil {
		s.Devices.Withdraw(o)
		undo()
		return nil, server.Status(codes.Internal, "", err.Error())
	}
	s.mu.Lock()
	if s.offers == nil {
		s.offers = map[string]*pairing.Offer{}
	}
	s.offers[g.ID] = o
	s.mu.Unlock()
	code := e2ee.PairingCode{Relay: s.Relay.Addr(), MachineID: s.MachineID, Fingerprint: s.Devices.Fingerprint(),
		Offer: o.ID, Secret: o.Secret, Ticket: e2ee.ShareTicket(g.User)}
	s.Log.Info("session shared", "share", g.ID, "session", g.SessionID, "user", g.User, "mode", g.Mode, "expires", g.ExpiresAt)
	return &pb.CreateShareResponse{Share: s.toProto(g), Code: code.String(), CodeExpiresAt: timestamppb.New(o.Expires)}, nil
}

// ListShares lists the shares, newest first.
func (s *Service) ListShares(_ context.Context, req *pb.ListSharesRequest) (*pb.ListSharesResponse, error) {
	out := &pb.ListSharesResponse{}
	for _, g := range s.Grants.List() {
		if req.SessionId == "" || g.SessionID == req.SessionId {
			out.Shares = append(out.Shares, s.toProto(g))
		}
	}
	return out, nil
}

// RevokeShare ends a share now.
func (s *Service) RevokeShare(ctx context.Context, req *pb.RevokeShareRequest) (*pb.RevokeShareResponse, error) {
	g, err := s.Grants.Revoke(req.ShareId, s.now())
	if errors.Is(err, ErrNoShare) {
		return nil, server.Status(codes.NotFound, "SHARE_NOT_FOUND", "no share "+req.ShareId)
	}
	if err != nil {
		return nil, server.Status(codes.Internal, "", err.Error())
	}
	n := s.end(ctx, g, "revoked")
	return &pb.RevokeShareResponse{Share: s.toProto(g), ChannelsClosed: uint32(n)}, nil
}

// end ends a revoked share: what cut ends, and its relay credential. It
// returns how many channels it closed.
func (s *Service) end(ctx context.Context, g Grant, why string) int {
	n := s.cut(g, why)
	if s.Relay != nil && g.TokenID != "" {
		if err := s.Relay.RevokeDeviceToken(ctx, g.TokenID); err != nil {
			// The machine refuses the device either way.
			s.Log.Warn("revoke a share's relay credential", "share", g.ID, "err", err)
		}
	}
	return n
}

// Run ends shares as they expire, until ctx ends: their devices' channels
// close at the moment of expiry.
func (s *Service) Run(ctx context.Context) error {
	for {
		now := s.now()
		for _, g := range s.Grants.ended(now) {
			if g.RevokedAt.IsZero() { // RevokeShare ends the revoked ones itself
				s.cut(g, "expired")
			}
		}
		at, changed := s.Grants.next(now)
		t := time.NewTimer(time.Hour)
		if !at.IsZero() {
			t.Reset(at.Sub(now))
		}
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-changed:
		case <-t.C:
		}
		t.Stop()
	}
}

// cut ends what is left of an ended share on the machine: its unused code
// and its device's channels (its relay credential expires with it; end
// revokes it sooner). It returns how many channels it closed.
func (s *Service) cut(g Grant, why string) int {
	s.mu.Lock()
	o := s.offers[g.ID]
	delete(s.offers, g.ID)
	s.mu.Unlock()
	if o != nil {
		s.Devices.Withdraw(o)
	}
	d, ok := s.Devices.ByShare(g.ID)
	if !ok || d.Revoked() {
		return 0
	}
	_, n, err := s.Devices.Revoke(d.ID)
	if err != nil {
		s.Log.Warn("revoke an ended share's device", "share", g.ID, "device", d.ID, "err", err)
		return 0
	}
	s.Log.Info("session share ended", "share", g.ID, "session", g.SessionID, "user", g.User, "why", why, "channels_closed", n)
	return n
}

// toProto converts a grant for the API.
func (s *Service) toProto(g Grant) *pb.Share {
	m := pb.ShareMode_SHARE_MODE_READ
	if g.Mode == ModeAnswer {
		m = pb.ShareMode_SHARE_MODE_ANSWER
	}
	out := &pb.Share{Id: g.ID, SessionId: g.SessionID, User: g.User, Mode: m, CreatedAt: timestamppb.New(g.CreatedAt),
		ExpiresAt: timestamppb.New(g.ExpiresAt)}
	if !g.RevokedAt.IsZero() {
		out.RevokedAt = timestamppb.New(g.RevokedAt)
	}
	if d, ok := s.Devices.ByShare(g.ID); ok {
		out.DeviceId, out.DeviceName = d.ID, d.Name
	}
	return out
}
