package admin_test

import (
	"path/filepath"
	"sync"
	"testing"

	"github.com/betcode-dev/betcode/relay/admin"
	"github.com/betcode-dev/betcode/relay/store"
	"github.com/betcode-dev/betcode/relay/store/sqlite"
	"github.com/betcode-dev/betcode/shared/authtoken"
)

func TestBootstrap(t *testing.T) {
	tests := []struct {
		name       string
		existing   []string // users before the relay starts
		wantSecret bool
	}{
		{name: "empty store", wantSecret: true},
		{name: "a user made by the admin command", existing: []string{"alice"}},
		{name: "the bootstrapped administrator already there", existing: []string{"admin"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := t.Context()
			st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "relay.db"), sqlite.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			for _, u := range tt.existing {
				if err := st.CreateUser(ctx, store.User{ID: u}); err != nil {
					t.Fatal(err)
				}
			}
			ops := &admin.Ops{Store: st}
			secret, tok, err := ops.Bootstrap(ctx, "admin")
			if err != nil {
				t.Fatal(err)
			}
			if got := secret != ""; got != tt.wantSecret {
				t.Fatalf("secret %q, want one: %v", secret, tt.wantSecret)
			}
			users, err := st.ListUsers(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if !tt.wantSecret {
				if len(users) != len(tt.existing) {
					t.Errorf("users %+v: Bootstrap changed a store that had users", users)
				}
				return
			}
			if len(users) != 1 || users[0].ID != "admin" || !users[0].Admin {
				t.Fatalf("users %+v, want the administrator admin", users)
			}
			stored, err := st.TokenByHash(ctx, authtoken.Hash(secret))
			if err != nil || stored.ID != tok.ID || stored.UserID != "admin" || stored.Name != admin.BootstrapTokenName || tok.ExpiresAt.IsZero() {
				t.Fatalf("token %+v (%v), want admin's %q with an expiry, stored by hash", stored, err, admin.BootstrapTokenName)
			}
			if err := authtoken.Check(authtoken.Client, secret); err != nil {
				t.Errorf("the secret is no client token: %v", err)
			}
			if again, _, err := ops.Bootstrap(ctx, "admin"); err != nil || again != "" {
				t.Errorf("a second start: %q, %v; want nothing", again, err)
			}
			evs, err := st.ListAudit(ctx, store.AuditFilter{})
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range evs {
				if e.Actor != admin.BootstrapActor {
					t.Errorf("audit %+v: want actor %s", e, admin.BootstrapActor)
				}
			}
		})
	}
}

// TestBootstrapConcurrent: relays starting together on one store; exactly
// one gets the secret.
func TestBootstrapConcurrent(t *testing.T) {
	ctx := t.Context()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "relay.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	const n = 8
	secrets := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			secrets[i], _, errs[i] = (&admin.Ops{Store: st}).Bootstrap(ctx, "admin")
		})
	}
	wg.Wait()
	got := 0
	for i := range n {
		if errs[i] != nil {
			t.Errorf("relay %d: %v", i, errs[i])
		}
		if secrets[i] != "" {
			got++
		}
	}
	if got != 1 {
		t.Fatalf("%d of %d relays got the secret, want exactly 1", got, n)
	}
}
