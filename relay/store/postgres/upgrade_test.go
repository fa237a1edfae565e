package postgres

import (
	"crypto/sha256"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/betcode-dev/betcode/relay/internal/pgtest"
)

// TestUpgradeKeepsTokensUnscoped: a token stored before migration 6 (scoped
// tokens) reads back, after the upgrade, as an ordinary token: no machine,
// no scope.
func TestUpgradeKeepsTokensUnscoped(t *testing.T) {
	ctx := t.Context()
	url := pgtest.URL(t)
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	if err := migrateTo(ctx, pool, migrations[:5]); err != nil {
		pool.Close()
		t.Fatal(err)
	}
	h := sha256.Sum256([]byte("old token"))
	_, err = pool.Exec(ctx, `INSERT INTO tokens (id, user_id, name, hash, created_at) VALUES ('t-old', 'alice', 'laptop', $1, $2)`,
		h[:], time.Now())
	pool.Close()
	if err != nil {
		t.Fatal(err)
	}
	s, err := Open(ctx, url, Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.TokenByHash(ctx, h[:])
	if err != nil || got.ID != "t-old" || got.MachineID != "" || got.Scope != "" || !got.Live(time.Now()) {
		t.Fatalf("token stored before the upgrade = %+v, %v; want t-old, live, unscoped", got, err)
	}
}
