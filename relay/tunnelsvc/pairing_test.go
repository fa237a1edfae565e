package tunnelsvc

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/betcode-dev/betcode/relay/registry"
	"github.com/betcode-dev/betcode/relay/store"
	"github.com/betcode-dev/betcode/relay/store/sqlite"
	"github.com/betcode-dev/betcode/relay/store/storetest"
	"github.com/betcode-dev/betcode/shared/authtoken"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/tunnel"
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
		time.Until(tok.ExpiresAt) > PairingTicketTTL || tok.ExpiresAt.Before(time.Now()) {
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

// reasonOf returns the BetCode error code in err's ErrorInfo.
func reasonOf(err error) string {
	for _, d := range status.Convert(err).Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.Domain == "betcode.dev" {
			return info.Reason
		}
	}
	return ""
}

// pairingService is a Service over a fresh store where machine m1 belongs
// to alice and m2 to bob, with a settable clock and a recorded audit.
type pairingService struct {
	*Service
	st    store.Store
	mu    sync.Mutex
	now   time.Time
	audit []store.AuditEvent
}

func newPairingService(t *testing.T) *pairingService {
	t.Helper()
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "relay.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	for _, m := range []store.Machine{{ID: "m1", OwnerID: "alice"}, {ID: "m2", OwnerID: "bob"}} {
		if err := st.UpsertMachine(t.Context(), m); err != nil {
			t.Fatal(err)
		}
	}
	p := &pairingService{st: st, now: time.Now()}
	p.Service = &Service{Store: st, Registry: registry.New(), Log: slog.New(slog.DiscardHandler),
		Now:   func() time.Time { p.mu.Lock(); defer p.mu.Unlock(); return p.now },
		Audit: func(e store.AuditEvent) { p.mu.Lock(); defer p.mu.Unlock(); p.audit = append(p.audit, e) }}
	return p
}

func (p *pairingService) advance(d time.Duration) { p.mu.Lock(); p.now = p.now.Add(d); p.mu.Unlock() }

// TestPairingTicketLimit: at most 5 unexpired unspent tickets per machine,
// even when asked for all at once; a spent or expired one frees its place;
// another machine has its own 5.
func TestPairingTicketLimit(t *testing.T) {
	p := newPairingService(t)
	m1 := machineCtx(t, "m1")
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		issued  []string
		refused []error
	)
	for range 20 {
		wg.Go(func() {
			resp, err := p.IssuePairingTicket(m1, &pb.IssuePairingTicketRequest{})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				refused = append(refused, err)
				return
			}
			issued = append(issued, resp.Ticket)
		})
	}
	wg.Wait()
	if len(issued) != maxLiveTickets {
		t.Fatalf("%d of 20 concurrent IssuePairingTicket calls got a ticket; want %d", len(issued), maxLiveTickets)
	}
	for _, err := range refused {
		if status.Code(err) != codes.ResourceExhausted || reasonOf(err) != CodePairingLimit || !strings.Contains(err.Error(), "wait") {
			t.Fatalf("refused ticket: %v (%s); want RESOURCE_EXHAUSTED / PAIRING_LIMIT saying to wait", err, reasonOf(err))
		}
	}
	if _, err := p.IssuePairingTicket(machineCtx(t, "m2"), &pb.IssuePairingTicketRequest{}); err != nil {
		t.Fatalf("another machine's first ticket: %v", err)
	}
	// Spending one frees its place.
	tok, err := p.st.TokenByHash(t.Context(), authtoken.Hash(issued[0]))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.st.SpendToken(t.Context(), tok.ID, p.now); err != nil {
		t.Fatal(err)
	}
	if _, err := p.IssuePairingTicket(m1, &pb.IssuePairingTicketRequest{}); err != nil {
		t.Fatalf("a ticket after one was spent: %v", err)
	}
	if _, err := p.IssuePairingTicket(m1, &pb.IssuePairingTicketRequest{}); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("a 6th live ticket: %v", err)
	}
	// Expired ones do not count.
	p.advance(PairingTicketTTL + time.Second)
	for i := range maxLiveTickets {
		if _, err := p.IssuePairingTicket(m1, &pb.IssuePairingTicketRequest{}); err != nil {
			t.Fatalf("ticket %d after the others expired: %v", i, err)
		}
	}
}

// TestDeviceTokenLimit: at most 100 live device tokens per machine;
// revoking one (twice: it is idempotent) frees its place.
func TestDeviceTokenLimit(t *testing.T) {
	p := newPairingService(t)
	m1 := machineCtx(t, "m1")
	var first string
	for i := range maxLiveDevices {
		resp, err := p.IssueDeviceToken(m1, &pb.IssueDeviceTokenRequest{DeviceName: fmt.Sprint("phone ", i)})
		if err != nil {
			t.Fatalf("device token %d: %v", i, err)
		}
		if i == 0 {
			first = resp.TokenId
		}
	}
	_, err := p.IssueDeviceToken(m1, &pb.IssueDeviceTokenRequest{DeviceName: "one too many"})
	if status.Code(err) != codes.ResourceExhausted || reasonOf(err) != CodeDeviceLimit {
		t.Fatalf("device token %d: %v; want RESOURCE_EXHAUSTED / DEVICE_LIMIT", maxLiveDevices+1, err)
	}
	for range 2 {
		if _, err := p.RevokeDeviceToken(m1, &pb.RevokeDeviceTokenRequest{TokenId: first}); err != nil {
			t.Fatalf("RevokeDeviceToken: %v", err)
		}
	}
	if _, err := p.IssueDeviceToken(m1, &pb.IssueDeviceTokenRequest{DeviceName: "replacement"}); err != nil {
		t.Fatalf("a device token after one was revoked: %v", err)
	}
	// Pairing tickets have their own count.
	if _, err := p.IssuePairingTicket(m1, &pb.IssuePairingTicketRequest{}); err != nil {
		t.Fatalf("a ticket with 100 devices: %v", err)
	}
}

// TestPairingRefusals: only a machine, over its own verified certificate,
// and not a revoked one, gets or revokes tokens; another machine's device
// token, an ordinary token and an unknown id are not found; nothing
// audited holds a secret.
func TestPairingRefusals(t *testing.T) {
	p := newPairingService(t)
	m1, m2 := machineCtx(t, "m1"), machineCtx(t, "m2")
	dev, err := p.IssueDeviceToken(m1, &pb.IssueDeviceTokenRequest{DeviceName: "phone"})
	if err != nil {
		t.Fatal(err)
	}
	ticket, err := p.IssuePairingTicket(m1, &pb.IssuePairingTicketRequest{})
	if err != nil {
		t.Fatal(err)
	}
	alice := storetest.UserToken(t, p.st, "alice")
	aliceID := authtoken.ID(authtoken.Hash(alice))

	// A client over TLS without a machine certificate (a user's token
	// does not make it a machine).
	client := peer.NewContext(t.Context(), &peer.Peer{Addr: tunnel.Addr("client"), AuthInfo: credentials.TLSInfo{State: tls.ConnectionState{}}})
	calls := map[string]func(context.Context) error{
		"IssuePairingTicket": func(ctx context.Context) error {
			_, err := p.IssuePairingTicket(ctx, &pb.IssuePairingTicketRequest{})
			return err
		},
		"IssueDeviceToken": func(ctx context.Context) error {
			_, err := p.IssueDeviceToken(ctx, &pb.IssueDeviceTokenRequest{DeviceName: "x"})
			return err
		},
		"RevokeDeviceToken": func(ctx context.Context) error {
			_, err := p.RevokeDeviceToken(ctx, &pb.RevokeDeviceTokenRequest{TokenId: dev.TokenId})
			return err
		},
	}
	for name, call := range calls {
		if err := call(client); status.Code(err) != codes.Unauthenticated {
			t.Errorf("%s from a client without a machine certificate: %v; want UNAUTHENTICATED", name, err)
		}
	}
	for name, id := range map[string]string{
		"another machine's device token": dev.TokenId,
		"a pairing ticket":               authtoken.ID(authtoken.Hash(ticket.Ticket)),
		"its owner's ordinary token":     aliceID,
		"an unknown id":                  "nope",
		"no id":                          "",
	} {
		ctx := m1
		if name == "another machine's device token" {
			ctx = m2
		}
		if _, err := p.RevokeDeviceToken(ctx, &pb.RevokeDeviceTokenRequest{TokenId: id}); status.Code(err) != codes.NotFound {
			t.Errorf("revoking %s: %v; want NOT_FOUND", name, err)
		}
	}
	for _, secret := range []string{dev.Token, alice} {
		if tok, err := p.st.TokenByHash(t.Context(), authtoken.Hash(secret)); err != nil || !tok.RevokedAt.IsZero() {
			t.Errorf("a refused revocation revoked %+v (%v)", tok, err)
		}
	}

	// A machine the revocation set names (revoked through another
	// replica, its row not yet read) gets nothing.
	p.Revoked = func(id string) bool { return id == "m1" }
	for name, call := range calls {
		if err := call(m1); status.Code(err) != codes.PermissionDenied {
			t.Errorf("%s from a revoked machine: %v; want PERMISSION_DENIED", name, err)
		}
	}
	p.Revoked = nil

	p.mu.Lock()
	defer p.mu.Unlock()
	actions := map[string]int{}
	for _, e := range p.audit {
		actions[e.Action+" "+e.Outcome]++
		if !strings.HasPrefix(e.Actor, "machine:") {
			t.Errorf("audit actor %q; want machine:ID", e.Actor)
		}
		for _, secret := range []string{dev.Token, ticket.Ticket, alice} {
			if strings.Contains(e.Detail+e.Target, secret) {
				t.Errorf("audit event %+v holds a secret", e)
			}
		}
	}
	for _, want := range []string{"device_token.issue ok", "pairing.ticket ok", "device_token.revoke denied", "pairing.ticket denied", "device_token.issue denied"} {
		if actions[want] == 0 {
			t.Errorf("no %q audited: %v", want, actions)
		}
	}
}
