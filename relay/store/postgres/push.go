package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/betcode-dev/betcode/relay/store"
	"github.com/betcode-dev/betcode/relay/store/internal/rules"
)

// Web Push subscriptions, claims and the VAPID key (store.Push).

const pushColumns = `id, user_id, endpoint, p256dh, auth, name, kinds, created_at, last_status, last_at, last_error`

func scanPush(row pgx.CollectableRow) (store.PushSubscription, error) {
	var (
		p    store.PushSubscription
		last pgtype.Timestamptz
	)
	err := row.Scan(&p.ID, &p.UserID, &p.Endpoint, &p.P256dh, &p.Auth, &p.Name, &p.Kinds, &p.CreatedAt, &p.LastStatus, &last, &p.LastError)
	if last.Valid {
		p.LastAt = last.Time
	}
	return p, err
}

// AddPushSubscription implements store.Push.
func (s *Store) AddPushSubscription(ctx context.Context, sub store.PushSubscription) (store.PushSubscription, error) {
	if err := s.live(); err != nil {
		return store.PushSubscription{}, err
	}
	if err := rules.PushSubscription(&sub, s.opt.Now()); err != nil {
		return store.PushSubscription{}, fmt.Errorf("add push subscription: %w", err)
	}
	rows, _ := s.pool.Query(ctx, `INSERT INTO push_subscriptions (id, user_id, endpoint, p256dh, auth, name, kinds, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
		ON CONFLICT (endpoint) DO UPDATE SET user_id = EXCLUDED.user_id, p256dh = EXCLUDED.p256dh, auth = EXCLUDED.auth,
			name = EXCLUDED.name, kinds = EXCLUDED.kinds, last_status = '', last_at = NULL, last_error = ''
		RETURNING `+pushColumns, sub.ID, sub.UserID, sub.Endpoint, sub.P256dh, sub.Auth, sub.Name, sub.Kinds, sub.CreatedAt)
	got, err := pgx.CollectExactlyOneRow(rows, scanPush)
	if err != nil {
		return store.PushSubscription{}, fmt.Errorf("add push subscription: %w", err)
	}
	return got, nil
}

// PushSubscriptions implements store.Push.
func (s *Store) PushSubscriptions(ctx context.Context, userID string) ([]store.PushSubscription, error) {
	if err := s.live(); err != nil {
		return nil, err
	}
	rows, _ := s.pool.Query(ctx, `SELECT `+pushColumns+` FROM push_subscriptions WHERE user_id = $1 ORDER BY created_at, id`, userID)
	subs, err := pgx.CollectRows(rows, scanPush)
	if err != nil {
		return nil, fmt.Errorf("list push subscriptions of %q: %w", userID, err)
	}
	return subs, nil
}

// DeletePushSubscription implements store.Push; the subscription's claims
// go with it.
func (s *Store) DeletePushSubscription(ctx context.Context, userID, id string) error {
	if err := s.live(); err != nil {
		return err
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `DELETE FROM push_subscriptions WHERE id = $1 AND user_id = $2`, id, userID)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return store.ErrNotFound
		}
		_, err = tx.Exec(ctx, `DELETE FROM push_claims WHERE subscription_id = $1`, id)
		return err
	})
	if err != nil {
		return fmt.Errorf("delete push subscription %q: %w", id, err)
	}
	return nil
}

// RecordPushOutcome implements store.Push.
func (s *Store) RecordPushOutcome(ctx context.Context, id, status string, at time.Time, errText string) error {
	if err := s.live(); err != nil {
		return err
	}
	if err := rules.PushOutcome(status, errText); err != nil {
		return fmt.Errorf("record push outcome: %w", err)
	}
	at = rules.Time(at, s.opt.Now())
	tag, err := s.pool.Exec(ctx, `UPDATE push_subscriptions SET
			last_status = CASE WHEN last_status = 'expired' THEN last_status ELSE $2 END,
			last_at = $3, last_error = CASE WHEN last_status = 'expired' THEN last_error ELSE $4 END
		WHERE id = $1`, id, status, at, errText)
	if err == nil && tag.RowsAffected() == 0 {
		err = store.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("record push outcome of %q: %w", id, err)
	}
	return nil
}

// ClaimPushKey implements store.Push: the primary key picks the winner.
func (s *Store) ClaimPushKey(ctx context.Context, subID, key string, at time.Time) (bool, error) {
	if err := s.live(); err != nil {
		return false, err
	}
	if err := rules.PushKey(subID, key); err != nil {
		return false, fmt.Errorf("claim push key: %w", err)
	}
	tag, err := s.pool.Exec(ctx, `INSERT INTO push_claims (subscription_id, key, created_at) VALUES ($1, $2, $3)
		ON CONFLICT DO NOTHING`, subID, key, rules.Time(at, s.opt.Now()))
	if err != nil {
		return false, fmt.Errorf("claim push key: %w", err)
	}
	return tag.RowsAffected() == 1, nil
}

// PrunePush implements store.Push.
func (s *Store) PrunePush(ctx context.Context, before time.Time) (int, error) {
	if err := s.live(); err != nil {
		return 0, err
	}
	var n int64
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `DELETE FROM push_claims WHERE created_at < $1 OR subscription_id IN (
			SELECT id FROM push_subscriptions WHERE last_status = 'expired' AND last_at < $1)`, before)
		if err != nil {
			return err
		}
		n += tag.RowsAffected()
		tag, err = tx.Exec(ctx, `DELETE FROM push_subscriptions WHERE last_status = 'expired' AND last_at < $1`, before)
		n += tag.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("prune push: %w", err)
	}
	return int(n), nil
}

// VAPIDKey implements store.Push: the first insert wins, later ones read it.
func (s *Store) VAPIDKey(ctx context.Context, candidate store.VAPIDKey) (store.VAPIDKey, error) {
	if err := s.live(); err != nil {
		return store.VAPIDKey{}, err
	}
	if err := rules.VAPIDKey(&candidate, s.opt.Now()); err != nil {
		return store.VAPIDKey{}, fmt.Errorf("vapid key: %w", err)
	}
	if _, err := s.pool.Exec(ctx, `INSERT INTO vapid_keys (id, private_key, public_key, created_at) VALUES (1, $1, $2, $3)
		ON CONFLICT DO NOTHING`, candidate.Private, candidate.Public, candidate.CreatedAt); err != nil {
		return store.VAPIDKey{}, fmt.Errorf("vapid key: %w", err)
	}
	var k store.VAPIDKey
	if err := s.pool.QueryRow(ctx, `SELECT private_key, public_key, created_at FROM vapid_keys WHERE id = 1`).Scan(&k.Private, &k.Public, &k.CreatedAt); err != nil {
		return store.VAPIDKey{}, fmt.Errorf("vapid key: %w", err)
	}
	return k, nil
}
