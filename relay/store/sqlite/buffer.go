package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

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
	out, err := s.q.Do(ctx, rules.Item{Msg: m, Lim: lim})
	if errors.Is(err, groupcommit.ErrClosed) {
		err = store.ErrClosed
	}
	if err != nil {
		return 0, false, fmt.Errorf("enqueue for machine %q: %w", m.MachineID, err)
	}
	return out.id, out.dup, nil
}

// Pending implements store.Store.
func (s *Store) Pending(ctx context.Context, machineID string, afterID int64, limit int) (_ []store.Message, err error) {
	if err := s.live(); err != nil {
		return nil, err
	}
	if limit <= 0 {
		return nil, nil
	}
	defer func() {
		if err != nil {
			err = fmt.Errorf("pending messages of machine %q: %w", machineID, err)
		}
	}()
	rows, err := s.rdb.QueryContext(ctx, `SELECT id, owner_id, coalesce(idempotency_key, ''), service, method,
			metadata, payload, created_at, expires_at
		FROM buffered_messages
		WHERE machine_id = ? AND id > ? AND expires_at > ?
		ORDER BY id LIMIT ?`, machineID, afterID, unixNano(s.opt.Now()), limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var msgs []store.Message
	for rows.Next() {
		m := store.Message{MachineID: machineID}
		var (
			md               string
			created, expires int64
		)
		if err := rows.Scan(&m.ID, &m.OwnerID, &m.IdempotencyKey, &m.Service, &m.Method,
			&md, &m.Payload, &created, &expires); err != nil {
			return nil, err
		}
		if md != "{}" {
			if err := json.Unmarshal([]byte(md), &m.Metadata); err != nil {
				return nil, fmt.Errorf("message %d metadata: %w", m.ID, err)
			}
		}
		m.CreatedAt, m.ExpiresAt = fromUnixNano(created), fromUnixNano(expires)
		msgs = append(msgs, m)
	}
	return msgs, rows.Err()
}

// idList renders ids as a JSON array for json_each, so that a page of any
// size is one parameter.
func idList(ids []int64) string {
	var b strings.Builder
	b.Grow(len(ids) * 8)
	b.WriteByte('[')
	for i, id := range ids {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatInt(id, 10))
	}
	b.WriteByte(']')
	return b.String()
}

// Ack implements store.Store: one transaction deletes the page and debits
// the machine's usage row.
func (s *Store) Ack(ctx context.Context, machineID string, ids ...int64) (err error) {
	if err := s.live(); err != nil {
		return err
	}
	if len(ids) == 0 {
		return nil
	}
	defer func() {
		if err != nil {
			err = fmt.Errorf("ack %d messages of machine %q: %w", len(ids), machineID, err)
		}
	}()
	tx, err := s.wdb.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, tx.Rollback())
		}
	}()
	rows, err := tx.QueryContext(ctx, `DELETE FROM buffered_messages
		WHERE machine_id = ? AND id IN (SELECT value FROM json_each(?))
		RETURNING machine_id, size`, machineID, idList(ids))
	if err != nil {
		return err
	}
	freed, err := sumDeleted(rows)
	if err != nil {
		return err
	}
	if u, ok := freed[machineID]; ok {
		if err := debitUsage(ctx, tx, machineID, u); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// Counts implements store.Store.
func (s *Store) Counts(ctx context.Context, machineID string) (int, int64, error) {
	if err := s.live(); err != nil {
		return 0, 0, err
	}
	var n, b int64
	err := s.rdb.QueryRowContext(ctx, `SELECT messages, bytes FROM machine_buffer_usage WHERE machine_id = ?`, machineID).Scan(&n, &b)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, fmt.Errorf("buffer counts of machine %q: %w", machineID, err)
	}
	return int(n), b, nil
}

// PurgeExpired implements store.Store.
func (s *Store) PurgeExpired(ctx context.Context, now time.Time) (_ int, err error) {
	if err := s.live(); err != nil {
		return 0, err
	}
	defer func() {
		if err != nil {
			err = fmt.Errorf("purge expired messages: %w", err)
		}
	}()
	tx, err := s.wdb.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, tx.Rollback())
		}
	}()
	freed, err := deleteExpired(ctx, tx, "", unixNano(now))
	if err != nil {
		return 0, err
	}
	total := 0
	for id, u := range freed {
		total += int(u.Messages)
		if err := debitUsage(ctx, tx, id, u); err != nil {
			return 0, err
		}
	}
	return total, tx.Commit()
}

// debitUsage subtracts freed from machineID's usage row.
func debitUsage(ctx context.Context, tx *sql.Tx, machineID string, freed rules.Usage) error {
	_, err := tx.ExecContext(ctx, `UPDATE machine_buffer_usage SET messages = messages - ?, bytes = bytes - ?
		WHERE machine_id = ?`, freed.Messages, freed.Bytes, machineID)
	return err
}

// deleteExpired deletes the messages that expired at or before now, of
// machineID or (if "") of every machine, and returns what it freed per
// machine. It does not touch machine_buffer_usage.
func deleteExpired(ctx context.Context, tx *sql.Tx, machineID string, now int64) (map[string]rules.Usage, error) {
	// Two statements rather than one with (? = '' OR machine_id = ?), so
	// that a machine's delete can use buffered_messages_machine.
	var (
		rows *sql.Rows
		err  error
	)
	if machineID == "" {
		rows, err = tx.QueryContext(ctx, `DELETE FROM buffered_messages WHERE expires_at <= ?
			RETURNING machine_id, size`, now)
	} else {
		rows, err = tx.QueryContext(ctx, `DELETE FROM buffered_messages WHERE machine_id = ? AND expires_at <= ?
			RETURNING machine_id, size`, machineID, now)
	}
	if err != nil {
		return nil, err
	}
	return sumDeleted(rows)
}

// sumDeleted reads the (machine_id, size) rows returned by a DELETE and
// returns what it freed per machine. It closes rows.
func sumDeleted(rows *sql.Rows) (map[string]rules.Usage, error) {
	defer rows.Close()
	freed := make(map[string]rules.Usage)
	for rows.Next() {
		var (
			id   string
			size int64
		)
		if err := rows.Scan(&id, &size); err != nil {
			return nil, err
		}
		u := freed[id]
		u.Messages++
		u.Bytes += size
		freed[id] = u
	}
	return freed, rows.Err()
}

// BufferStats returns the buffer's depth and oldest unexpired message
// (zero if none) for machines that hold a tunnel (their recorded replica
// refreshed at or after liveSince) and for offline ones.
func (s *Store) BufferStats(ctx context.Context, now, liveSince time.Time) (connected, offline store.BufferStat, err error) {
	if err := s.live(); err != nil {
		return connected, offline, err
	}
	rows, err := s.rdb.QueryContext(ctx, `SELECT live, coalesce(sum(n), 0), min(at) FROM (
		SELECT coalesce(m.replica <> '' AND m.last_seen >= ?2, 0) AS live, u.messages AS n, NULL AS at
			FROM machine_buffer_usage u LEFT JOIN machines m ON m.id = u.machine_id
		UNION ALL
		SELECT coalesce(m.replica <> '' AND m.last_seen >= ?2, 0), 0, b.created_at
			FROM buffered_messages b LEFT JOIN machines m ON m.id = b.machine_id WHERE b.expires_at > ?1
	) GROUP BY live`, unixNano(now), unixNano(liveSince))
	if err != nil {
		return connected, offline, fmt.Errorf("buffer stats: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var live bool
		var n int64
		var at sql.NullInt64
		if err := rows.Scan(&live, &n, &at); err != nil {
			return connected, offline, fmt.Errorf("buffer stats: %w", err)
		}
		st := store.BufferStat{Messages: int(n)}
		if at.Valid {
			st.Oldest = fromUnixNano(at.Int64)
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
