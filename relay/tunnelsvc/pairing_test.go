package tunnelsvc

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/betcode-dev/betcode/relay/registry"
	"github.com/betcode-dev/betcode/relay/store"
	"github.com/betcode-dev/betcode/relay/store/sqlite"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/authtoken"
)

// TestPairingTokens: a machine gets pairing tickets and device tokens
// scoped to itself, owned by its owner, within limits; it can revoke only
// its own device tokens; a caller without a machine certificate gets
// nothing.
func TestPairingTokens(t *testing.T) {
	m1, m2 := machineCtx(t, "m1"), machineCtx(t, "m2")
	st, err := sqlite.Open(m1, filepath.Join(t.TempDir(), "relay.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, m := range []store.Machine{{ID: "m1", OwnerID: "alice"}, {ID: "m2", OwnerID: "bob"}} {
		if err := st.UpsertMachine(m1, m); err != nil {
			t.Fatal(err)
		}
	}
	var audit []store.AuditEvent
	svc := &Service{Store: st, Registry: registry.New(), Log: slog.New(slog.DiscardHandler),
		Audit: func(e store.AuditEvent) { audit = append(audit, e) }}

	lookup := func(secret string) store.Token {
		t.Helper()
		tok, err := st.TokenByHash(m1, authtoken.Hash(secret))
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	ticket, err := svc.IssuePairingTicket(m1, &pb.IssuePairingTicketRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if tok := lookup(ticket.Ticket); tok.UserID != "alice" || tok.MachineID != "m1" || tok.Scope != store.ScopePair ||
		tok.ExpiresAt.Sub(time.Now()) > PairingTicketTTL || tok.ExpiresAt.Before(time.Now()) {
		t.Fatalf("pairing ticket %+v", tok)
	}
	dev, err := svc.IssueDeviceToken(m1, &pb.IssueDeviceTokenRequest{DeviceName: "phone"})
	if err != nil {
		t.Fatal(err)
	}
	if tok := lookup(dev.Token); tok.ID != dev.TokenId || tok.Scope != store.ScopeDevice || tok.MachineID != "m1" ||
		tok.Name != "device:phone" || !tok.ExpiresAt.IsZero() {
		t.Fatalf("device token %+v", tok)
	}

	t.Run("another machine cannot revoke it", func(t *testing.T) {
		_, err := svc.RevokeDeviceToken(m2, &pb.RevokeDeviceTokenRequest{TokenId: dev.TokenId})
		if status.Code(err) != codes.NotFound {
			t.Fatalf("m2 revoking m1's device token: %v", err)
		}
		if tok := lookup(dev.Token); !tok.RevokedAt.IsZero() {
			t.Fatal("m2 revoked m1's device token")
		}
	})
	t.Run("not a ticket", func(t *testing.T) {
		tok := lookup(ticket.Ticket)
		if _, err := svc.RevokeDeviceToken(m1, &pb.RevokeDeviceTokenRequest{TokenId: tok.ID}); status.Code(err) != codes.NotFound {
			t.Fatalf("revoking a pairing ticket as a device token: %v", err)
		}
	})
	t.Run("its machine revokes it", func(t *testing.T) {
		if _, err := svc.RevokeDeviceToken(m1, &pb.RevokeDeviceTokenRequest{TokenId: dev.TokenId}); err != nil {
			t.Fatal(err)
		}
		if tok := lookup(dev.Token); tok.RevokedAt.IsZero() {
			t.Fatal("the device token is still live")
		}
	})
	t.Run("no machine certificate", func(t *testing.T) {
		for name, call := range map[string]func(context.Context) error{
			"ticket": func(ctx context.Context) error {
				_, err := svc.IssuePairingTicket(ctx, &pb.IssuePairingTicketRequest{})
				return err
			},
			"device": func(ctx context.Context) error {
				_, err := svc.IssueDeviceToken(ctx, &pb.IssueDeviceTokenRequest{DeviceName: "x"})
				return err
			},
		} {
			if err := call(context.Background()); status.Code(err) != codes.Unauthenticated {
				t.Errorf("%s without a machine certificate: %v", name, err)
			}
		}
	})
	t.Run("bad device names", func(t *testing.T) {
		for _, name := range []string{"", "a\x00b", string(make([]byte, 65))} {
			if _, err := svc.IssueDeviceToken(m1, &pb.IssueDeviceTokenRequest{DeviceName: name}); status.Code(err) != codes.InvalidArgument {
				t.Errorf("device name %q: %v", name, err)
			}
		}
	})
	t.Run("ticket limit", func(t *testing.T) {
		var err error
		for i := 1; i <= maxLiveTickets && err == nil; i++ {
			_, err = svc.IssuePairingTicket(m1, &pb.IssuePairingTicketRequest{})
		}
		if status.Code(err) != codes.ResourceExhausted {
			t.Fatalf("ticket %d: %v, want RESOURCE_EXHAUSTED", maxLiveTickets+1, err)
		}
	})
	t.Run("unknown or revoked machine", func(t *testing.T) {
		if _, err := svc.IssuePairingTicket(machineCtx(t, "m3"), &pb.IssuePairingTicketRequest{}); status.Code(err) != codes.FailedPrecondition {
			t.Errorf("unregistered machine: %v", err)
		}
		if err := st.RevokeMachine(m1, "m2", time.Now()); err != nil {
			t.Fatalf("revoke machine: %v", err)
		}
		if _, err := svc.IssueDeviceToken(m2, &pb.IssueDeviceTokenRequest{DeviceName: "x"}); status.Code(err) != codes.PermissionDenied {
			t.Errorf("revoked machine: %v", err)
		}
	})
	issued := 0
	for _, e := range audit {
		if e.Action == "device_token.issue" || e.Action == "pairing.ticket" {
			issued++
		}
	}
	if issued < 2 {
		t.Errorf("audit: %d issue events, want at least 2: %+v", issued, audit)
	}
}
