package tunnelsvc

import (
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/betcode-dev/betcode/relay/registry"
	"github.com/betcode-dev/betcode/relay/store"
	"github.com/betcode-dev/betcode/relay/store/sqlite"
	"github.com/betcode-dev/betcode/shared/authtoken"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// TestShareTokens: a machine gets a share's token for a teammate: owned
// by the teammate, scoped to the machine, expiring with the share; it can
// revoke it (another machine cannot); bad requests are refused with their
// codes.
func TestShareTokens(t *testing.T) {
	m1, m2 := machineCtx(t, "m1"), machineCtx(t, "m2")
	st, err := sqlite.Open(m1, filepath.Join(t.TempDir(), "relay.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, u := range []store.User{{ID: "alice"}, {ID: "bob"}, {ID: "gone", Disabled: true}} {
		if err := st.CreateUser(m1, u); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range []store.Machine{{ID: "m1", OwnerID: "alice"}, {ID: "m2", OwnerID: "bob"}} {
		if err := st.UpsertMachine(m1, m); err != nil {
			t.Fatal(err)
		}
	}
	svc := &Service{Store: st, Registry: registry.New(), Log: slog.New(slog.DiscardHandler), Audit: func(store.AuditEvent) {}}
	exp := time.Now().Add(2 * time.Hour).Truncate(time.Second)
	resp, err := svc.IssueDeviceToken(m1, &pb.IssueDeviceTokenRequest{DeviceName: "sh-1", ShareUser: "bob", ExpiresAt: timestamppb.New(exp)})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := st.TokenByHash(m1, authtoken.Hash(resp.Token))
	if err != nil {
		t.Fatal(err)
	}
	if tok.UserID != "bob" || tok.MachineID != "m1" || tok.Scope != store.ScopeShare || !tok.ExpiresAt.Equal(exp) || tok.Name != "share:sh-1" {
		t.Fatalf("share token %+v", tok)
	}
	for _, tc := range []struct {
		name string
		req  *pb.IssueDeviceTokenRequest
		code codes.Code
	}{
		{"no expiry", &pb.IssueDeviceTokenRequest{DeviceName: "x", ShareUser: "bob"}, codes.InvalidArgument},
		{"expired", &pb.IssueDeviceTokenRequest{DeviceName: "x", ShareUser: "bob", ExpiresAt: timestamppb.New(time.Now().Add(-time.Second))}, codes.InvalidArgument},
		{"too long", &pb.IssueDeviceTokenRequest{DeviceName: "x", ShareUser: "bob", ExpiresAt: timestamppb.New(time.Now().Add(MaxShareTTL + time.Hour))}, codes.InvalidArgument},
		{"the owner", &pb.IssueDeviceTokenRequest{DeviceName: "x", ShareUser: "alice", ExpiresAt: timestamppb.New(exp)}, codes.InvalidArgument},
		{"no such user", &pb.IssueDeviceTokenRequest{DeviceName: "x", ShareUser: "nobody", ExpiresAt: timestamppb.New(exp)}, codes.NotFound},
		{"a disabled user", &pb.IssueDeviceTokenRequest{DeviceName: "x", ShareUser: "gone", ExpiresAt: timestamppb.New(exp)}, codes.NotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := svc.IssueDeviceToken(m1, tc.req); status.Code(err) != tc.code {
				t.Fatalf("IssueDeviceToken: %v; want %s", err, tc.code)
			}
		})
	}
	if _, err := svc.RevokeDeviceToken(m2, &pb.RevokeDeviceTokenRequest{TokenId: resp.TokenId}); status.Code(err) != codes.NotFound {
		t.Fatalf("another machine revoking the share token: %v", err)
	}
	if _, err := svc.RevokeDeviceToken(m1, &pb.RevokeDeviceTokenRequest{TokenId: resp.TokenId}); err != nil {
		t.Fatalf("the machine revoking its share token: %v", err)
	}
	if tok, err := st.TokenByHash(m1, authtoken.Hash(resp.Token)); err != nil || tok.RevokedAt.IsZero() {
		t.Fatalf("after revoke: %+v %v", tok, err)
	}
}
