package relaylink

import (
	"context"
	"errors"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// errNotConnected is the machine's own relay calls' error while the tunnel
// is down.
var errNotConnected = errors.New("not connected to the relay now (betcode-agent status shows the tunnel); retry once it is")

// Addr is the relay's host:port (--relay), as devices dial it.
func (l *Link) Addr() string { return l.cfg.Relay }

func (l *Link) tunnelClient() (pb.TunnelServiceClient, error) {
	cc := l.cc.Load()
	if cc == nil {
		return nil, errNotConnected
	}
	return pb.NewTunnelServiceClient(cc), nil
}

// IssuePairingTicket asks the relay for the credential of one pairing call
// to this machine (the relay half of a pairing code).
func (l *Link) IssuePairingTicket(ctx context.Context) (string, time.Time, error) {
	tc, err := l.tunnelClient()
	if err != nil {
		return "", time.Time{}, err
	}
	resp, err := tc.IssuePairingTicket(ctx, &pb.IssuePairingTicketRequest{})
	if err != nil {
		return "", time.Time{}, err
	}
	return resp.Ticket, resp.ExpiresAt.AsTime(), nil
}

// IssueDeviceToken asks the relay for a client token scoped to this
// machine, for a device just paired.
func (l *Link) IssueDeviceToken(ctx context.Context, deviceName string) (token, tokenID string, err error) {
	tc, err := l.tunnelClient()
	if err != nil {
		return "", "", err
	}
	resp, err := tc.IssueDeviceToken(ctx, &pb.IssueDeviceTokenRequest{DeviceName: deviceName})
	if err != nil {
		return "", "", err
	}
	return resp.Token, resp.TokenId, nil
}

// RevokeDeviceToken revokes a device's relay credential.
func (l *Link) RevokeDeviceToken(ctx context.Context, tokenID string) error {
	tc, err := l.tunnelClient()
	if err != nil {
		return err
	}
	_, err = tc.RevokeDeviceToken(ctx, &pb.RevokeDeviceTokenRequest{TokenId: tokenID})
	return err
}

// IssueShareToken asks the relay for a credential of user, a teammate of
// the machine's owner, scoped to this machine and expiring at expires: the
// relay half of a session share (docs/security.md, "Sharing a session").
func (l *Link) IssueShareToken(ctx context.Context, name, user string, expires time.Time) (token, tokenID string, err error) {
	tc, err := l.tunnelClient()
	if err != nil {
		return "", "", err
	}
	resp, err := tc.IssueDeviceToken(ctx, &pb.IssueDeviceTokenRequest{DeviceName: name, ShareUser: user, ExpiresAt: timestamppb.New(expires)})
	if err != nil {
		return "", "", err
	}
	return resp.Token, resp.TokenId, nil
}
