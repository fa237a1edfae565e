package sqlite

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/betcode-dev/betcode/relay/store"
	"github.com/betcode-dev/betcode/relay/store/internal/rules"
)

// Web Push subscriptions, claims and the VAPID key (store.Push).

const pushColumns = `id, user_id, endpoint, p256dh, auth, name, kinds, created_at, last_status, last_at, last_error`

func scanPush(row scanner) (store.PushSubscription, error) {
	var (
		p               store.PushSubscription
		kinds           string
		created, lastAt int64
	)
	if err := row.Scan(&p.ID, &p.UserID, &p.Endpoint, &p.P256dh, &p.Auth, &p.Name, &kinds, &created, &p.LastStatus, &lastAt, &p.LastError); err != nil {
		return p, err
	}
	p.CreatedAt, p.LastAt = fromUnixNano(created), fromUnixNano(lastAt)
	if err := json.Unmarshal([]byte(kinds), &p.Kinds); err != nil {
		return p, fmt.Errorf("push subscription %q kinds: %w", p.ID, err)
	}
	return p, nil
}

// AddPushSubscription implements store.Push.
func (s *Store) AddPushSubscription(ctx context.Context, sub store.PushSubscription) (store.PushSubscription, error) {
	if err := s.live(); err != nil {
		return store.PushSubscription{}, err
	}
	if err := rules.PushSubscription(&sub, s.opt.Now()); err != nil {
		return store.PushSubscription{}, fmt.Errorf("add push subscription: %w", err)
	}
	kinds, err := json.Marshal(sub.Kinds)
	if err != nil {
		return store.PushSubscription{}, fmt.Errorf("add push subscription: %w", err)
	}
	got, err := scanPush(s.wdb.QueryRowContext(ctx, `INSERT INTO push_subscriptions (id, user_id, endpoint, p256dh, auth, name, kinds, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (endpoint) DO UPDATE SET user_id = excluded.user_id, p256dh = excluded.p256dh, auth = excluded.auth,
			name = excluded.name, kinds = excluded.kinds, last_status = '', last_at = 0, last_error = ''
		RETURNING `+pushColumns, sub.ID, sub.UserID, sub.Endpoint, sub.P256dh, sub.Auth, sub.Name, string(kinds), unixNano(sub.CreatedAt)))
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
	rows, err := s.rdb.QueryContext(ctx, `SELECT `+pushColumns+` FROM push_subscriptions WHERE user_id = ? ORDER BY created_at, id`, userID)
	subs, err := collect(rows, err, scanPush)
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
	err := s.write(ctx, func(tx *writeTx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM push_subscriptions WHERE id = ? AND user_id = ?`, id, userID)
		if err != nil {
			return err
		}
		if err := affected(res, store.ErrNotFound); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `DELETE FROM push_claims WHERE subscription_id = ?`, id)
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
	if err := s.exec(ctx, store.ErrNotFound, `UPDATE push_subscriptions SET
			last_status = CASE WHEN last_status = 'expired' THEN last_status ELSE ? END,
			last_at = ?, last_error = CASE WHEN last_status = 'expired' THEN last_error ELSE ? END
		WHERE id = ?`, status, unixNano(at), errText, id); err != nil {
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
	res, err := s.wdb.ExecContext(ctx, `INSERT INTO push_claims (subscription_id, key, created_at) VALUES (?, ?, ?)
		ON CONFLICT DO NOTHING`, subID, key, unixNano(rules.Time(at, s.opt.Now())))
	if err != nil {
		return false, fmt.Errorf("claim push key: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("claim push key: %w", err)
	}
	return n == 1, nil
}

// PrunePush implements store.Push.
func (s *Store) PrunePush(ctx context.Context, before time.Time) (int, error) {
	if err := s.live(); err != nil {
		return 0, err
	}
	var n int64
	b := unixNano(before)
	err := s.write(ctx, func(tx *writeTx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM push_claims WHERE created_at < ? OR subscription_id IN (
			SELECT id FROM push_subscriptions WHERE last_status = 'expired' AND last_at < ?)`, b, b)
		if err != nil {
			return err
		}
		k, _ := res.RowsAffected()
		n += k
		res, err = tx.ExecContext(ctx, `DELETE FROM push_subscriptions WHERE last_status = 'expired' AND last_at < ?`, b)
		if err != nil {
			return err
		}
		k, _ = res.RowsAffected()
		n += k
		return nil
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
	var (
		k       store.VAPIDKey
		created int64
	)
	err := s.write(ctx, func(tx *writeTx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO vapid_keys (id, private_key, public_key, created_at) VALUES (1, ?, ?, ?)
			ON CONFLICT DO NOTHING`, candidate.Private, candidate.Public, unixNano(candidate.CreatedAt)); err != nil {
			return err
		}
		return tx.QueryRowContext(ctx, `SELECT private_key, public_key, created_at FROM vapid_keys WHERE id = 1`).Scan(&k.Private, &k.Public, &created)
	})
	if err != nil {
		return store.VAPIDKey{}, fmt.Errorf("vapid key: %w", err)
	}
	k.CreatedAt = fromUnixNano(created)
	return k, nil
}
