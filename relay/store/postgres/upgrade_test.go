package postgres

import (
	"crypto/sha256"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
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

// TestMigrateConcurrently: relay replicas starting together on a fresh
// database each run the migrations; the advisory lock makes exactly one
// apply each migration (a migration here records itself in a table, so
// a second application would show), and all of them start.
func TestMigrateConcurrently(t *testing.T) {
	ctx := t.Context()
	url := pgtest.URL(t)
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	counted := []string{`CREATE TABLE applied (migration integer NOT NULL)`}
	for i := 1; i <= 4; i++ {
		counted = append(counted, fmt.Sprintf(`INSERT INTO applied VALUES (%d); SELECT pg_sleep(0.01)`, i))
	}
	const replicas = 8
	errs := make(chan error, replicas)
	for range replicas {
		go func() {
			p, err := pgxpool.New(ctx, url)
			if err != nil {
				errs <- err
				return
			}
			defer p.Close()
			errs <- migrateTo(ctx, p, counted)
		}()
	}
	for range replicas {
		if err := <-errs; err != nil {
			t.Fatalf("a replica's migration: %v", err)
		}
	}
	rows, err := pool.Query(ctx, `SELECT migration, count(*) FROM applied GROUP BY migration ORDER BY migration`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[struct{ Migration, N int }])
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 4 {
		t.Fatalf("applied = %v, want migrations 1-4 once each", got)
	}
	for _, r := range got {
		if r.N != 1 {
			t.Fatalf("migration %d applied %d times, want once (applied = %v)", r.Migration, r.N, got)
		}
	}
	var version int
	if err := pool.QueryRow(ctx, `SELECT version FROM schema_version`).Scan(&version); err != nil || version != len(counted) {
		t.Fatalf("schema_version = %d, %v; want %d", version, err, len(counted))
	}

	// The relay's own migrations, from several replicas at once too.
	url2 := pgtest.URL(t)
	for range replicas {
		go func() {
			s, err := Open(ctx, url2, Options{Logger: slog.New(slog.DiscardHandler)})
			if err == nil {
				s.Close()
			}
			errs <- err
		}()
	}
	for range replicas {
		if err := <-errs; err != nil {
			t.Fatalf("a replica's Open: %v", err)
		}
	}
}

// TestNewerSchemaRefused: a relay older than the database's schema (a
// newer relay migrated it; someone rolled back the binary) refuses to
// start, saying so, and leaves the schema as it was.
func TestNewerSchemaRefused(t *testing.T) {
	ctx := t.Context()
	url := pgtest.URL(t)
	s, err := Open(ctx, url, Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	newer := len(migrations) + 1
	if _, err := pool.Exec(ctx, `UPDATE schema_version SET version = $1`, newer); err != nil {
		t.Fatal(err)
	}
	_, err = Open(ctx, url, Options{Logger: slog.New(slog.DiscardHandler)})
	want := fmt.Sprintf("database schema v%d is newer than this relay knows (v%d): upgrade betcode-relay", newer, len(migrations))
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Open on a newer schema = %v, want %q", err, want)
	}
	var version int
	if err := pool.QueryRow(ctx, `SELECT version FROM schema_version`).Scan(&version); err != nil || version != newer {
		t.Fatalf("schema_version after the refusal = %d, %v; want %d untouched", version, err, newer)
	}
}
