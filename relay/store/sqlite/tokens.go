package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/betcode-dev/betcode/relay/store"
	"github.com/betcode-dev/betcode/relay/store/internal/rules"
)

// Client access tokens and single-use join tokens. Both are looked up by
// the SHA-256 of the secret (a unique index); the secret is never stored.

const tokenColumns = `id, user_id, name, hash, created_at, expires_at, last_used_at, last_used_addr, revoked_at, machine_id, scope`

// tokenByHashSQL is TokenByHash's query, prepared once on the read pool:
// it authenticates every request whose token is not cached, and parsing
// it again each time doubled its cost (docs/relay-store.md).
const tokenByHashSQL = `SELECT ` + tokenColumns + ` FROM tokens WHERE hash = ?`

func scanToken(row scanner) (store.Token, error) {
	var (
		t                               store.Token
		created, expires, used, revoked int64
	)
	err := row.Scan(&t.ID, &t.UserID, &t.Name, &t.Hash, &created, &expires, &used, &t.LastUsedAddr, &revoked, &t.MachineID, &t.Scope)
	t.CreatedAt, t.ExpiresAt = fromUnixNano(created), fromUnixNano(expires)
	t.LastUsedAt, t.RevokedAt = fromUnixNano(used), fromUnixNano(revoked)
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
	if err := s.exec(ctx, store.ErrExists, `INSERT INTO tokens (`+tokenColumns+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
		t.ID, t.UserID, t.Name, t.Hash, unixNano(t.CreatedAt), unixNano(t.ExpiresAt), unixNano(t.LastUsedAt),
		t.LastUsedAddr, unixNano(t.RevokedAt), t.MachineID, t.Scope); err != nil {
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
	t, err := scanToken(s.tokenByHash.QueryRowContext(ctx, hash))
	if err != nil {
		return store.Token{}, fmt.Errorf("token by hash: %w", noRows(err))
	}
	return t, nil
}

// ListTokens implements store.Identity.
func (s *Store) ListTokens(ctx context.Context, userID string) ([]store.Token, error) {
	if err := s.live(); err != nil {
		return nil, err
	}
	q, args := `SELECT `+tokenColumns+` FROM tokens ORDER BY created_at DESC, id DESC`, []any{}
	if userID != "" {
		q, args = `SELECT `+tokenColumns+` FROM tokens WHERE user_id = ? ORDER BY created_at DESC, id DESC`, []any{userID}
	}
	rows, err := s.rdb.QueryContext(ctx, q, args...)
	ts, err := collect(rows, err, scanToken)
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
	err := s.write(ctx, func(tx *writeTx) error {
		var err error
		t, err = scanToken(tx.QueryRowContext(ctx, `UPDATE tokens
			SET revoked_at = CASE WHEN revoked_at = 0 THEN ? ELSE revoked_at END
			WHERE id = ? RETURNING `+tokenColumns, unixNano(rules.Time(at, s.opt.Now())), id))
		if err != nil {
			return noRows(err)
		}
		return tx.publish(ctx, store.ChangeToken, id)
	})
	if err != nil {
		return store.Token{}, fmt.Errorf("revoke token %q: %w", id, err)
	}
	return t, nil
}

// SpendToken implements store.Identity. A zero now means now. Writes are
// serialised on the one write connection, so only one spender matches.
func (s *Store) SpendToken(ctx context.Context, id string, now time.Time) (store.Token, error) {
	if err := s.live(); err != nil {
		return store.Token{}, err
	}
	ns := unixNano(rules.Time(now, s.opt.Now()))
	var t store.Token
	err := s.write(ctx, func(tx *writeTx) error {
		var err error
		t, err = scanToken(tx.QueryRowContext(ctx, `UPDATE tokens SET revoked_at = ?1
			WHERE id = ?2 AND revoked_at = 0 AND (expires_at = 0 OR expires_at > ?1)
			RETURNING `+tokenColumns, ns, id))
		if errors.Is(err, sql.ErrNoRows) {
			t, err = scanToken(tx.QueryRowContext(ctx, `SELECT `+tokenColumns+` FROM tokens WHERE id = ?`, id))
			switch {
			case err != nil:
				return noRows(err)
			case !t.RevokedAt.IsZero():
				return store.ErrTokenSpent
			default:
				return store.ErrExpired
			}
		}
		if err != nil {
			return err
		}
		return tx.publish(ctx, store.ChangeToken, id)
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
	if err := s.exec(ctx, store.ErrNotFound, `UPDATE tokens SET last_used_at = ?, last_used_addr = ? WHERE id = ?`,
		unixNano(rules.Time(at, s.opt.Now())), addr, id); err != nil {
		return fmt.Errorf("touch token %q: %w", id, err)
	}
	return nil
}

const enrollColumns = `id, hash, team_id, user_id, created_at, expires_at, used_at, machine_id`

func scanEnrollToken(row scanner) (store.EnrollToken, error) {
	var (
		t                      store.EnrollToken
		created, expires, used int64
	)
	err := row.Scan(&t.ID, &t.Hash, &t.TeamID, &t.UserID, &created, &expires, &used, &t.MachineID)
	t.CreatedAt, t.ExpiresAt, t.UsedAt = fromUnixNano(created), fromUnixNano(expires), fromUnixNano(used)
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
	if err := s.exec(ctx, store.ErrExists, `INSERT INTO enroll_tokens (id, hash, team_id, user_id, created_at, expires_at)
		VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
		t.ID, t.Hash, t.TeamID, t.UserID, unixNano(t.CreatedAt), unixNano(t.ExpiresAt)); err != nil {
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
	t, err := scanEnrollToken(s.rdb.QueryRowContext(ctx, `SELECT `+enrollColumns+` FROM enroll_tokens WHERE hash = ?`, hash))
	if err != nil {
		return store.EnrollToken{}, fmt.Errorf("get join token: %w", noRows(err))
	}
	return t, nil
}

// ConsumeEnrollToken implements store.Identity. The conditional UPDATE is
// the decision; the write lock makes it atomic across processes. Only when
// it updates nothing is the row read, in the same transaction, to say why.
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
	ns := unixNano(rules.Time(now, s.opt.Now()))
	var t store.EnrollToken
	err := s.write(ctx, func(tx *writeTx) error {
		var err error
		t, err = scanEnrollToken(tx.QueryRowContext(ctx, `UPDATE enroll_tokens SET used_at = ?1, machine_id = ?2
			WHERE hash = ?3 AND used_at = 0 AND (expires_at = 0 OR expires_at > ?1)
			RETURNING `+enrollColumns, ns, machineID, hash))
		if !errors.Is(err, sql.ErrNoRows) {
			return err // nil: consumed
		}
		t, err = scanEnrollToken(tx.QueryRowContext(ctx, `SELECT `+enrollColumns+` FROM enroll_tokens WHERE hash = ?`, hash))
		switch {
		case err != nil:
			return noRows(err)
		case !t.UsedAt.IsZero():
			return store.ErrTokenUsed
		default:
			return store.ErrExpired
		}
	})
	if err != nil {
		return store.EnrollToken{}, fmt.Errorf("consume join token for machine %q: %w", machineID, err)
	}
	return t, nil
}
