package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/betcode-dev/betcode/relay/store"
	"github.com/betcode-dev/betcode/relay/store/internal/groupcommit"
	"github.com/betcode-dev/betcode/relay/store/internal/rules"
)

// Enqueue implements store.Store. The call waits for the group commit of
// the batch it joins (commit.go).
func (s *Store) Enqueue(ctx context.Context, m store.Message, lim store.Limits) (int64, bool, error) {
	if err := s.live(); err != nil {
		return 0, false, err
	}
	lim, err := rules.Message(&m, lim, s.opt.Now())
	if err != nil {
		return 0, false, fmt.Errorf("enqueue for machine %q: %w", m.MachineID, err)
	}
	out, err := s.queue(m.MachineID).Do(ctx, rules.Item{Msg: m, Lim: lim})
	if errors.Is(err, groupcommit.ErrClosed) {
		err = store.ErrClosed
	}
	if err != nil {
		return 0, false, fmt.Errorf("enqueue for machine %q: %w", m.MachineID, err)
	}
	return out.id, out.dup, nil
}

// Pending implements store.Store.
func (s *Store) Pending(ctx context.Context, machineID string, afterID int64, limit int) ([]store.Message, error) {
	if err := s.live(); err != nil {
		return nil, err
	}
	if limit <= 0 {
		return nil, nil
	}
	rows, _ := s.pool.Query(ctx, `SELECT id, owner_id, coalesce(idempotency_key, ''), service, method,
			metadata, payload, created_at, expires_at
		FROM buffered_messages
		WHERE machine_id = $1 AND id > $2 AND expires_at > $3
		ORDER BY id LIMIT $4`, machineID, afterID, s.opt.Now(), limit)
	msgs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.Message, error) {
		m := store.Message{MachineID: machineID}
		err := row.Scan(&m.ID, &m.OwnerID, &m.IdempotencyKey, &m.Service, &m.Method,
			&m.Metadata, &m.Payload, &m.CreatedAt, &m.ExpiresAt)
		return m, err
	})
	if err != nil {
		return nil, fmt.Errorf("pending messages of machine %q: %w", machineID, err)
	}
	return msgs, nil
}

// Ack implements store.Store: one statement deletes the page and debits the
// machine's usage row.
func (s *Store) Ack(ctx context.Context, machineID string, ids ...int64) error {
	if err := s.live(); err != nil {
		return err
	}
	if len(ids) == 0 {
		return nil
	}
	_, err := s.pool.Exec(ctx, `WITH d AS (
			DELETE FROM buffered_messages WHERE machine_id = $1 AND id = ANY($2) RETURNING size
		), t AS (SELECT count(*) AS n, coalesce(sum(size), 0) AS b FROM d)
		UPDATE machine_buffer_usage u SET messages = u.messages - t.n, bytes = u.bytes - t.b
		FROM t WHERE u.machine_id = $1 AND t.n > 0`, machineID, ids)
	if err != nil {
		return fmt.Errorf("ack %d messages of machine %q: %w", len(ids), machineID, err)
	}
	return nil
}

// Counts implements store.Store.
func (s *Store) Counts(ctx context.Context, machineID string) (int, int64, error) {
	if err := s.live(); err != nil {
		return 0, 0, err
	}
	var n, b int64
	err := s.pool.QueryRow(ctx, `SELECT messages, bytes FROM machine_buffer_usage WHERE machine_id = $1`, machineID).Scan(&n, &b)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, fmt.Errorf("buffer counts of machine %q: %w", machineID, err)
	}
	return int(n), b, nil
}

// PurgeExpired implements store.Store. It locks the affected usage rows in
// machine order first, as the Enqueue writers do, so the two cannot
// deadlock.
func (s *Store) PurgeExpired(ctx context.Context, now time.Time) (int, error) {
	if err := s.live(); err != nil {
		return 0, err
	}
	var n int64
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT 1 FROM machine_buffer_usage WHERE machine_id IN (
				SELECT DISTINCT machine_id FROM buffered_messages WHERE expires_at <= $1)
			ORDER BY machine_id FOR UPDATE`, now); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `WITH d AS (
				DELETE FROM buffered_messages WHERE expires_at <= $1 RETURNING machine_id, size
			), t AS (SELECT machine_id, count(*) AS n, sum(size) AS b FROM d GROUP BY machine_id),
			u AS (
				UPDATE machine_buffer_usage u SET messages = u.messages - t.n, bytes = u.bytes - t.b
				FROM t WHERE u.machine_id = t.machine_id
			)
			SELECT coalesce(sum(n), 0) FROM t`, now).Scan(&n)
	})
	if err != nil {
		return 0, fmt.Errorf("purge expired messages: %w", err)
	}
	return int(n), nil
}

// BufferStats returns how many messages the buffer holds across every
// machine and when its oldest unexpired one arrived (zero if none). The
// age query scans the buffer, which the per-machine limits keep small;
// the metrics collector calls it once per scrape.
func (s *Store) BufferStats(ctx context.Context, now time.Time) (messages int, oldest time.Time, err error) {
	if err := s.live(); err != nil {
		return 0, time.Time{}, err
	}
	var n int64
	var at *time.Time
	err = s.pool.QueryRow(ctx, `SELECT (SELECT coalesce(sum(messages), 0) FROM machine_buffer_usage),
		(SELECT min(created_at) FROM buffered_messages WHERE expires_at > $1)`, now).Scan(&n, &at)
	if err != nil {
		return 0, time.Time{}, fmt.Errorf("buffer stats: %w", err)
	}
	if at != nil {
		oldest = *at
	}
	return int(n), oldest, nil
}
