package eventlog

import (
	"context"
	"fmt"
	"strings"
)

// PutKV sets key to value in sessionID's key/value table, synchronously,
// and after every event appended before it is committed: a key that records
// what an event did (an idempotency key, a grant) never outlives a crash
// that lost the event. It is meant for small, rarely written per-session
// state such as permission grants.
func (l *Log) PutKV(ctx context.Context, sessionID, key string, value []byte) error {
	if err := l.Flush(ctx); err != nil {
		return fmt.Errorf("put kv %s/%q: %w", sessionID, key, err)
	}
	if _, err := l.wdb.ExecContext(ctx,
		`INSERT OR REPLACE INTO kv (session_id, key, value) VALUES (?, ?, ?)`,
		sessionID, key, value); err != nil {
		return fmt.Errorf("put kv %s/%q: %w", sessionID, key, err)
	}
	return nil
}

// GetKV returns every key of sessionID that starts with prefix ("" for all)
// and its value. The map is empty, not nil, when nothing matches.
func (l *Log) GetKV(ctx context.Context, sessionID, prefix string) (_ map[string][]byte, err error) {
	// Keys compare bytewise (BINARY collation), so the keys with prefix are
	// one contiguous run starting at prefix; stop at the first that is not.
	rows, err := l.rdb.QueryContext(ctx,
		`SELECT key, value FROM kv WHERE session_id = ? AND key >= ? ORDER BY key`, sessionID, prefix)
	if err != nil {
		return nil, fmt.Errorf("get kv %s/%q: %w", sessionID, prefix, err)
	}
	defer func() {
		if cerr := rows.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("get kv %s/%q: %w", sessionID, prefix, cerr)
		}
	}()
	out := make(map[string][]byte)
	for rows.Next() {
		var (
			k string
			v []byte
		)
		if err := rows.Scan(&k, &v); err != nil {
			return nil, fmt.Errorf("get kv %s/%q: %w", sessionID, prefix, err)
		}
		if !strings.HasPrefix(k, prefix) {
			break
		}
		out[k] = v
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("get kv %s/%q: %w", sessionID, prefix, err)
	}
	return out, nil
}

// DeleteKV removes key from sessionID's key/value table, synchronously;
// a missing key is not an error.
func (l *Log) DeleteKV(ctx context.Context, sessionID, key string) error {
	if _, err := l.wdb.ExecContext(ctx, `DELETE FROM kv WHERE session_id = ? AND key = ?`, sessionID, key); err != nil {
		return fmt.Errorf("delete kv %s/%q: %w", sessionID, key, err)
	}
	return nil
}
