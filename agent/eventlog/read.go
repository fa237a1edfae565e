package eventlog

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"strings"
)

// Since calls fn, in Seq order, for every committed event of sessionID with
// Seq > afterSeq, streaming them from a single query. It stops at, and
// returns, the first error from fn.
//
// The Event's Payload is only valid until fn returns: Since hands fn the
// driver's row buffer without copying, so fn must copy Payload to keep it.
// The other fields may be retained.
func (l *Log) Since(ctx context.Context, sessionID string, afterSeq uint64, fn func(Event) error) (err error) {
	if afterSeq >= math.MaxInt64 {
		return nil // seqs are stored as int64; none can be larger
	}
	rows, err := l.sinceStmt.QueryContext(ctx, sessionID, int64(afterSeq))
	return l.scan(rows, err, sessionID, fmt.Sprintf("after %d", afterSeq), fn)
}

// SinceKinds is Since for the events whose Kind is one of kinds only: the
// database skips the others, which are never read (none when kinds is
// empty).
func (l *Log) SinceKinds(ctx context.Context, sessionID string, afterSeq uint64, kinds []string, fn func(Event) error) error {
	if afterSeq >= math.MaxInt64 || len(kinds) == 0 {
		return nil
	}
	q, args := kindsQuery(`SELECT seq, ts, kind, payload FROM events WHERE session_id = ? AND seq > ? AND kind IN (%s) ORDER BY seq`,
		kinds, sessionID, int64(afterSeq))
	rows, err := l.rdb.QueryContext(ctx, q, args...)
	return l.scan(rows, err, sessionID, fmt.Sprintf("after %d", afterSeq), fn)
}

// LatestKinds calls fn for the committed events of sessionID whose Kind is
// one of kinds, newest first, until fn returns an error, which it returns:
// reading a session's latest event of a kind costs one row, not the log.
func (l *Log) LatestKinds(ctx context.Context, sessionID string, kinds []string, fn func(Event) error) error {
	if len(kinds) == 0 {
		return nil
	}
	q, args := kindsQuery(`SELECT seq, ts, kind, payload FROM events WHERE session_id = ? AND kind IN (%s) ORDER BY seq DESC`,
		kinds, sessionID)
	rows, err := l.rdb.QueryContext(ctx, q, args...)
	return l.scan(rows, err, sessionID, "newest first", fn)
}

// kindsQuery fills query's %s with a placeholder per kind and returns it
// with args followed by the kinds.
func kindsQuery(query string, kinds []string, args ...any) (string, []any) {
	for _, k := range kinds {
		args = append(args, k)
	}
	return fmt.Sprintf(query, strings.TrimSuffix(strings.Repeat("?,", len(kinds)), ",")), args
}

// scan hands fn the rows of a query of events of sessionID (what names
// the range in errors), as Since describes, and closes them.
func (l *Log) scan(rows *sql.Rows, err error, sessionID, what string, fn func(Event) error) (rerr error) {
	if err != nil {
		return fmt.Errorf("read events of %s %s: %w", sessionID, what, err)
	}
	defer func() {
		if cerr := rows.Close(); cerr != nil && rerr == nil {
			rerr = fmt.Errorf("read events of %s %s: %w", sessionID, what, cerr)
		}
	}()
	var (
		seq, ts int64
		kind    string
		payload sql.RawBytes
	)
	for rows.Next() {
		if err := rows.Scan(&seq, &ts, &kind, &payload); err != nil {
			return fmt.Errorf("read events of %s %s: %w", sessionID, what, err)
		}
		if err := fn(Event{
			SessionID: sessionID,
			Seq:       uint64(seq),
			Time:      fromUnixNano(ts),
			Kind:      kind,
			Payload:   payload,
		}); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read events of %s %s: %w", sessionID, what, err)
	}
	return nil
}

// LastSeq returns the highest committed Seq of sessionID, or 0 if it has no
// events.
func (l *Log) LastSeq(ctx context.Context, sessionID string) (uint64, error) {
	var seq int64
	if err := l.rdb.QueryRowContext(ctx,
		`SELECT COALESCE(MAX(seq), 0) FROM events WHERE session_id = ?`, sessionID).Scan(&seq); err != nil {
		return 0, fmt.Errorf("read last seq of %s: %w", sessionID, err)
	}
	return uint64(seq), nil
}

// Count returns the number of committed events of sessionID.
func (l *Log) Count(ctx context.Context, sessionID string) (int, error) {
	var n int
	if err := l.rdb.QueryRowContext(ctx,
		`SELECT COUNT(*) FROM events WHERE session_id = ?`, sessionID).Scan(&n); err != nil {
		return 0, fmt.Errorf("count events of %s: %w", sessionID, err)
	}
	return n, nil
}

// DeleteBefore deletes the committed events of sessionID with Seq < seq,
// except those whose Kind is one of keepKinds, and returns how many it
// deleted. It is the storage half of compaction; the caller records the
// compaction point (Session.CompactionSeq). It does not change which Seq
// Append accepts next, even if it deletes a session's newest events.
func (l *Log) DeleteBefore(ctx context.Context, sessionID string, seq uint64, keepKinds ...string) (deleted int, err error) {
	q := `DELETE FROM events WHERE session_id = ? AND seq < ?`
	args := []any{sessionID, int64(seq)}
	if len(keepKinds) > 0 {
		q += ` AND kind NOT IN (?` + strings.Repeat(`, ?`, len(keepKinds)-1) + `)`
		for _, k := range keepKinds {
			args = append(args, k)
		}
	}
	res, err := l.wdb.ExecContext(ctx, q, args...)
	if err != nil {
		return 0, fmt.Errorf("delete events of %s before %d: %w", sessionID, seq, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("delete events of %s before %d: %w", sessionID, seq, err)
	}
	return int(n), nil
}
