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

// BufferStats returns the buffer's depth and oldest unexpired message
// (zero if none) for machines that hold a tunnel (their recorded replica
// refreshed at or after liveSince) and for offline ones. The age query
// scans the buffer, which the per-machine limits keep small; the metrics
// collector calls it once per scrape.
func (s *Store) BufferStats(ctx context.Context, now, liveSince time.Time) (connected, offline store.BufferStat, err error) {
	if err := s.live(); err != nil {
		return connected, offline, err
	}
	rows, err := s.pool.Query(ctx, `SELECT live, coalesce(sum(n), 0), min(at) FROM (
		SELECT coalesce(m.replica <> '' AND m.last_seen >= $2, false) AS live, u.messages AS n, NULL::timestamptz AS at
			FROM machine_buffer_usage u LEFT JOIN machines m ON m.id = u.machine_id
		UNION ALL
		SELECT coalesce(m.replica <> '' AND m.last_seen >= $2, false), 0, b.created_at
			FROM buffered_messages b LEFT JOIN machines m ON m.id = b.machine_id WHERE b.expires_at > $1
	) x GROUP BY live`, now, liveSince)
	if err != nil {
		return connected, offline, fmt.Errorf("buffer stats: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var live bool
		var n int64
		var at *time.Time
		if err := rows.Scan(&live, &n, &at); err != nil {
			return connected, offline, fmt.Errorf("buffer stats: %w", err)
		}
		st := store.BufferStat{Messages: int(n)}
		if at != nil {
			st.Oldest = *at
		}
		if live {
			connected = st
		} else {
			offline = st
		}
	}
	if err := rows.Err(); err != nil {
		return connected, offline, fmt.Errorf("buffer stats: %w", err)
	}
	return connected, offline, nil
}
