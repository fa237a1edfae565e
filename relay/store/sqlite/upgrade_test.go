package sqlite

import (
	"crypto/sha256"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	schema "github.com/betcode-dev/betcode/shared/migrate"
)

// TestUpgradeKeepsTokensUnscoped: a token stored before migration 5 (scoped
// tokens) reads back, after the upgrade, as an ordinary token: no machine,
// no scope.
func TestUpgradeKeepsTokensUnscoped(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "relay.db")
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	if err := schema.Apply(ctx, db, migrations[:4]); err != nil {
		db.Close()
		t.Fatal(err)
	}
	h := sha256.Sum256([]byte("old token"))
	_, err = db.ExecContext(ctx, `INSERT INTO tokens (id, user_id, name, hash, created_at) VALUES ('t-old', 'alice', 'laptop', ?, ?)`,
		h[:], time.Now().UnixNano())
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	s, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.TokenByHash(ctx, h[:])
	if err != nil || got.ID != "t-old" || got.MachineID != "" || got.Scope != "" || !got.Live(time.Now()) {
		t.Fatalf("token stored before the upgrade = %+v, %v; want t-old, live, unscoped", got, err)
	}
}
