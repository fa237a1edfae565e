package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/betcode-dev/betcode/relay/store"
	"github.com/betcode-dev/betcode/relay/store/internal/rules"
)

// Client access tokens and single-use join tokens. Both are looked up by
// the SHA-256 of the secret (a unique index); the secret is never stored.

const tokenColumns = `id, user_id, name, hash, created_at, expires_at, last_used_at, last_used_addr, revoked_at, machine_id, scope`

func scanToken(row pgx.CollectableRow) (store.Token, error) {
	var (
		t                      store.Token
		expires, used, revoked pgtype.Timestamptz
	)
	err := row.Scan(&t.ID, &t.UserID, &t.Name, &t.Hash, &t.CreatedAt, &expires, &used, &t.LastUsedAddr, &revoked, &t.MachineID, &t.Scope)
	t.ExpiresAt, t.LastUsedAt, t.RevokedAt = expires.Time, used.Time, revoked.Time
	return t, err
}

// CreateToken implements store.Identity.
func (s *Store) CreateToken(ctx context.Context, t store.Token) error {
	if err := s.live(); err != nil {
		return err
	}
	if err := rules.Token(&t, s.opt.Now()); err != nil {
		return fmt.Errorf("create token %q: %w", t.ID, err)
	}
	// DO NOTHING without a target covers both unique keys, id and hash.
	tag, err := s.pool.Exec(ctx, `INSERT INTO tokens (`+tokenColumns+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) ON CONFLICT DO NOTHING`,
		t.ID, t.UserID, t.Name, t.Hash, t.CreatedAt, timeArg(t.ExpiresAt), timeArg(t.LastUsedAt),
		t.LastUsedAddr, timeArg(t.RevokedAt), t.MachineID, t.Scope)
	if err == nil && tag.RowsAffected() == 0 {
		err = store.ErrExists
	}
	if err != nil {
		return fmt.Errorf("create token %q: %w", t.ID, err)
	}
	return nil
}

// TokenByHash implements store.Identity.
func (s *Store) TokenByHash(ctx context.Context, hash []byte) (store.Token, error) {
	if err := s.live(); err != nil {
		return store.Token{}, err
	}
	if err := rules.Hash(hash); err != nil {
		return store.Token{}, fmt.Errorf("token by hash: %w", err)
	}
	rows, _ := s.pool.Query(ctx, `SELECT `+tokenColumns+` FROM tokens WHERE hash = $1`, hash)
	t, err := pgx.CollectExactlyOneRow(rows, scanToken)
	if err != nil {
		return store.Token{}, fmt.Errorf("token by hash: %w", notFound(err))
	}
	return t, nil
}

// ListTokens implements store.Identity.
func (s *Store) ListTokens(ctx context.Context, userID string) ([]store.Token, error) {
	if err := s.live(); err != nil {
		return nil, err
	}
	// Two shapes, so each gets its own plan (a generic plan of
	// "$1 = '' OR user_id = $1" would scan every token).
	q, args := `SELECT `+tokenColumns+` FROM tokens ORDER BY created_at DESC, id DESC`, []any{}
	if userID != "" {
		q, args = `SELECT `+tokenColumns+` FROM tokens WHERE user_id = $1 ORDER BY created_at DESC, id DESC`, []any{userID}
	}
	rows, _ := s.pool.Query(ctx, q, args...)
	ts, err := pgx.CollectRows(rows, scanToken)
	if err != nil {
		return nil, fmt.Errorf("list tokens of user %q: %w", userID, err)
	}
	return ts, nil
}

// RevokeToken implements store.Identity. A zero at means now.
func (s *Store) RevokeToken(ctx context.Context, id string, at time.Time) (store.Token, error) {
	if err := s.live(); err != nil {
		return store.Token{}, err
	}
	var t store.Token
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		rows, _ := tx.Query(ctx, `UPDATE tokens SET revoked_at = coalesce(revoked_at, $2)
			WHERE id = $1 RETURNING `+tokenColumns, id, rules.Time(at, s.opt.Now()))
		var err error
		if t, err = pgx.CollectExactlyOneRow(rows, scanToken); err != nil {
			return notFound(err)
		}
		return publish(ctx, tx, store.ChangeToken, id)
	})
	if err != nil {
		return store.Token{}, fmt.Errorf("revoke token %q: %w", id, err)
	}
	return t, nil
}

// SpendToken implements store.Identity. A zero now means now. The UPDATE's
// condition is re-read after a concurrent one commits (READ COMMITTED), so
// only one spender matches the row.
func (s *Store) SpendToken(ctx context.Context, id string, now time.Time) (store.Token, error) {
	if err := s.live(); err != nil {
		return store.Token{}, err
	}
	now = rules.Time(now, s.opt.Now())
	var t store.Token
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		rows, _ := tx.Query(ctx, `UPDATE tokens SET revoked_at = $2
			WHERE id = $1 AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > $2)
			RETURNING `+tokenColumns, id, now)
		var err error
		t, err = pgx.CollectExactlyOneRow(rows, scanToken)
		if errors.Is(err, pgx.ErrNoRows) {
			rows, _ := tx.Query(ctx, `SELECT `+tokenColumns+` FROM tokens WHERE id = $1`, id)
			t, err = pgx.CollectExactlyOneRow(rows, scanToken)
			switch {
			case err != nil:
				return notFound(err)
			case !t.RevokedAt.IsZero():
				return store.ErrTokenSpent
			default:
				return store.ErrExpired
			}
		}
		if err != nil {
			return err
		}
		return publish(ctx, tx, store.ChangeToken, id)
	})
	if err != nil {
		return store.Token{}, fmt.Errorf("spend token %q: %w", id, err)
	}
	return t, nil
}

// TouchToken implements store.Identity. A zero at means now.
func (s *Store) TouchToken(ctx context.Context, id string, at time.Time, addr string) error {
	if err := s.live(); err != nil {
		return err
	}
	if !rules.Text(addr) {
		return fmt.Errorf("touch token %q: %w: address %q", id, store.ErrInvalid, addr)
	}
	tag, err := s.pool.Exec(ctx, `UPDATE tokens SET last_used_at = $2, last_used_addr = $3 WHERE id = $1`,
		id, rules.Time(at, s.opt.Now()), addr)
	if err == nil && tag.RowsAffected() == 0 {
		err = store.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("touch token %q: %w", id, err)
	}
	return nil
}

const enrollColumns = `id, hash, team_id, user_id, created_at, expires_at, used_at, machine_id`

func scanEnrollToken(row pgx.CollectableRow) (store.EnrollToken, error) {
	var (
		t             store.EnrollToken
		expires, used pgtype.Timestamptz
	)
	err := row.Scan(&t.ID, &t.Hash, &t.TeamID, &t.UserID, &t.CreatedAt, &expires, &used, &t.MachineID)
	t.ExpiresAt, t.UsedAt = expires.Time, used.Time
	return t, err
}

// CreateEnrollToken implements store.Identity. An existing id or hash
// gives ErrExists; a zero ExpiresAt never expires.
func (s *Store) CreateEnrollToken(ctx context.Context, t store.EnrollToken) error {
	if err := s.live(); err != nil {
		return err
	}
	if err := rules.EnrollToken(&t, s.opt.Now()); err != nil {
		return fmt.Errorf("create join token %q: %w", t.ID, err)
	}
	tag, err := s.pool.Exec(ctx, `INSERT INTO enroll_tokens (id, hash, team_id, user_id, created_at, expires_at)
		VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING`,
		t.ID, t.Hash, t.TeamID, t.UserID, t.CreatedAt, timeArg(t.ExpiresAt))
	if err == nil && tag.RowsAffected() == 0 {
		err = store.ErrExists
	}
	if err != nil {
		return fmt.Errorf("create join token %q: %w", t.ID, err)
	}
	return nil
}

// GetEnrollToken implements store.Identity.
func (s *Store) GetEnrollToken(ctx context.Context, hash []byte) (store.EnrollToken, error) {
	if err := s.live(); err != nil {
		return store.EnrollToken{}, err
	}
	if err := rules.Hash(hash); err != nil {
		return store.EnrollToken{}, fmt.Errorf("get join token: %w", err)
	}
	rows, _ := s.pool.Query(ctx, `SELECT `+enrollColumns+` FROM enroll_tokens WHERE hash = $1`, hash)
	t, err := pgx.CollectExactlyOneRow(rows, scanEnrollToken)
	if err != nil {
		return store.EnrollToken{}, fmt.Errorf("get join token: %w", notFound(err))
	}
	return t, nil
}

// ConsumeEnrollToken implements store.Identity. The conditional UPDATE is
// the whole decision: of concurrent callers, the first takes the row lock
// and the others, once it commits, re-check used_at on its version and
// update nothing. Only then is the row read to say why.
func (s *Store) ConsumeEnrollToken(ctx context.Context, hash []byte, machineID string, now time.Time) (store.EnrollToken, error) {
	if err := s.live(); err != nil {
		return store.EnrollToken{}, err
	}
	if err := rules.Hash(hash); err != nil {
		return store.EnrollToken{}, fmt.Errorf("consume join token: %w", err)
	}
	if err := rules.ID("machine id", machineID); err != nil {
		return store.EnrollToken{}, fmt.Errorf("consume join token: %w", err)
	}
	now = rules.Time(now, s.opt.Now())
	rows, _ := s.pool.Query(ctx, `UPDATE enroll_tokens SET used_at = $3, machine_id = $2
		WHERE hash = $1 AND used_at IS NULL AND (expires_at IS NULL OR expires_at > $3)
		RETURNING `+enrollColumns, hash, machineID, now)
	t, err := pgx.CollectExactlyOneRow(rows, scanEnrollToken)
	if err == nil {
		return t, nil
	}
	if errors.Is(err, pgx.ErrNoRows) {
		rows, _ := s.pool.Query(ctx, `SELECT `+enrollColumns+` FROM enroll_tokens WHERE hash = $1`, hash)
		t, err = pgx.CollectExactlyOneRow(rows, scanEnrollToken)
		switch {
		case err != nil:
			err = notFound(err)
		case !t.UsedAt.IsZero():
			err = store.ErrTokenUsed
		default:
			err = store.ErrExpired
		}
	}
	return store.EnrollToken{}, fmt.Errorf("consume join token for machine %q: %w", machineID, err)
}
