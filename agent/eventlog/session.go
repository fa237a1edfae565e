package eventlog

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Session is a session's metadata row.
type Session struct {
	ID, Model, WorkingDirectory, WorktreeID, Status string
	// ClaudeStarted is true once the Claude CLI has a transcript for this
	// session, so the next spawn must use --resume.
	ClaudeStarted                       bool
	CreatedAt, UpdatedAt                time.Time
	MessageCount                        uint32
	TotalInputTokens, TotalOutputTokens uint64
	TotalCostUSD                        float64
	LastMessagePreview                  string
	CompactionSeq                       uint64
	Metadata                            map[string]string // stored as JSON
	// Name is the display name a user gave ("" when none).
	Name string
	// CreatedBy is the user who created the session, as the relay named
	// them ("" for local clients).
	CreatedBy string
	// LastStopReason is the stop reason of the last turn that ended.
	LastStopReason string
}

// SessionFilter selects sessions for ListSessions. Empty string fields
// match everything; Limit <= 0 means no limit.
type SessionFilter struct {
	WorkingDirectory, WorktreeID string
	Limit, Offset                int
}

// PutSession inserts or replaces the metadata row of s.ID, synchronously.
func (l *Log) PutSession(ctx context.Context, s Session) error {
	if s.ID == "" {
		return errors.New("put session: empty id")
	}
	meta := []byte("{}")
	if len(s.Metadata) > 0 {
		var err error
		if meta, err = json.Marshal(s.Metadata); err != nil {
			return fmt.Errorf("put session %s: encode metadata: %w", s.ID, err)
		}
	}
	_, err := l.wdb.ExecContext(ctx, `INSERT OR REPLACE INTO sessions (
		id, model, working_directory, worktree_id, status, claude_started,
		created_at, updated_at, message_count, total_input_tokens,
		total_output_tokens, total_cost_usd, last_message_preview,
		compaction_seq, metadata, name, created_by, last_stop_reason
	) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		s.ID, s.Model, s.WorkingDirectory, s.WorktreeID, s.Status, s.ClaudeStarted,
		unixNano(s.CreatedAt), unixNano(s.UpdatedAt), int64(s.MessageCount),
		int64(s.TotalInputTokens), int64(s.TotalOutputTokens), s.TotalCostUSD,
		s.LastMessagePreview, int64(s.CompactionSeq), string(meta),
		s.Name, s.CreatedBy, s.LastStopReason)
	if err != nil {
		return fmt.Errorf("put session %s: %w", s.ID, err)
	}
	return nil
}

// UpdateSession writes every column of s.ID's metadata row but its
// status, which belongs to the events that carry one (Event.Status): a
// write of metadata computed before the latest such event committed cannot
// take its status back. A row that does not exist (the session was
// deleted) is not created.
func (l *Log) UpdateSession(ctx context.Context, s Session) error {
	meta := []byte("{}")
	if len(s.Metadata) > 0 {
		var err error
		if meta, err = json.Marshal(s.Metadata); err != nil {
			return fmt.Errorf("update session %s: encode metadata: %w", s.ID, err)
		}
	}
	_, err := l.wdb.ExecContext(ctx, `UPDATE sessions SET
		model = ?, working_directory = ?, worktree_id = ?, claude_started = ?,
		created_at = ?, updated_at = ?, message_count = ?, total_input_tokens = ?,
		total_output_tokens = ?, total_cost_usd = ?, last_message_preview = ?,
		compaction_seq = ?, metadata = ?, name = ?, created_by = ?, last_stop_reason = ?
		WHERE id = ?`,
		s.Model, s.WorkingDirectory, s.WorktreeID, s.ClaudeStarted,
		unixNano(s.CreatedAt), unixNano(s.UpdatedAt), int64(s.MessageCount),
		int64(s.TotalInputTokens), int64(s.TotalOutputTokens), s.TotalCostUSD,
		s.LastMessagePreview, int64(s.CompactionSeq), string(meta),
		s.Name, s.CreatedBy, s.LastStopReason, s.ID)
	if err != nil {
		return fmt.Errorf("update session %s: %w", s.ID, err)
	}
	return nil
}

const sessionColumns = `id, model, working_directory, worktree_id, status,
	claude_started, created_at, updated_at, message_count, total_input_tokens,
	total_output_tokens, total_cost_usd, last_message_preview, compaction_seq,
	metadata, name, created_by, last_stop_reason`

// scanSession decodes one row of sessionColumns.
func scanSession(scan func(...any) error) (Session, error) {
	var (
		s                                     Session
		created, updated, msgs, in, out, comp int64
		meta                                  string
	)
	if err := scan(&s.ID, &s.Model, &s.WorkingDirectory, &s.WorktreeID, &s.Status,
		&s.ClaudeStarted, &created, &updated, &msgs, &in, &out, &s.TotalCostUSD,
		&s.LastMessagePreview, &comp, &meta, &s.Name, &s.CreatedBy, &s.LastStopReason); err != nil {
		return Session{}, err
	}
	s.CreatedAt, s.UpdatedAt = fromUnixNano(created), fromUnixNano(updated)
	s.MessageCount = uint32(msgs)
	s.TotalInputTokens, s.TotalOutputTokens = uint64(in), uint64(out)
	s.CompactionSeq = uint64(comp)
	if meta != "" && meta != "{}" {
		if err := json.Unmarshal([]byte(meta), &s.Metadata); err != nil {
			return Session{}, fmt.Errorf("decode metadata: %w", err)
		}
	}
	return s, nil
}

// GetSession returns the metadata row of id, or an error wrapping
// ErrNotFound.
func (l *Log) GetSession(ctx context.Context, id string) (Session, error) {
	row := l.rdb.QueryRowContext(ctx, `SELECT `+sessionColumns+` FROM sessions WHERE id = ?`, id)
	s, err := scanSession(row.Scan)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return Session{}, fmt.Errorf("get session %s: %w", id, ErrNotFound)
	case err != nil:
		return Session{}, fmt.Errorf("get session %s: %w", id, err)
	}
	return s, nil
}

// ListSessions returns the sessions matching f, most recently updated
// first, and how many match f regardless of f.Limit and f.Offset.
func (l *Log) ListSessions(ctx context.Context, f SessionFilter) (sessions []Session, total int, err error) {
	where := ` WHERE 1=1`
	var args []any
	if f.WorkingDirectory != "" {
		where += ` AND working_directory = ?`
		args = append(args, f.WorkingDirectory)
	}
	if f.WorktreeID != "" {
		where += ` AND worktree_id = ?`
		args = append(args, f.WorktreeID)
	}
	limit := f.Limit
	if limit <= 0 {
		limit = -1 // SQLite: no limit
	}
	offset := max(f.Offset, 0)

	// One read transaction, so total and the page see the same snapshot.
	tx, err := l.rdb.BeginTx(ctx, nil)
	if err != nil {
		return nil, 0, fmt.Errorf("list sessions: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // read-only; nothing to undo

	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM sessions`+where, args...).Scan(&total); err != nil {
		return nil, 0, fmt.Errorf("list sessions: count: %w", err)
	}
	rows, err := tx.QueryContext(ctx, `SELECT `+sessionColumns+` FROM sessions`+where+
		` ORDER BY updated_at DESC, id LIMIT ? OFFSET ?`, append(args, limit, offset)...)
	if err != nil {
		return nil, 0, fmt.Errorf("list sessions: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		s, err := scanSession(rows.Scan)
		if err != nil {
			return nil, 0, fmt.Errorf("list sessions: %w", err)
		}
		sessions = append(sessions, s)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("list sessions: %w", err)
	}
	return sessions, total, nil
}

// DeleteSession deletes a session: its metadata row, its events and its
// key/value entries, in one transaction. It first waits for everything
// already appended to be committed, so the caller must have stopped
// appending events of sessionID; afterwards Append accepts the id again
// from sequence 1 (an adopted Claude Code session can be adopted again).
// Deleting an unknown session is not an error; found reports whether the
// row existed.
func (l *Log) DeleteSession(ctx context.Context, sessionID string) (found bool, err error) {
	if err := l.Flush(ctx); err != nil {
		return false, fmt.Errorf("delete session %s: %w", sessionID, err)
	}
	if err := l.lock(ctx); err != nil {
		return false, fmt.Errorf("delete session %s: %w", sessionID, err)
	}
	defer l.unlock()
	tx, err := l.wdb.BeginTx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("delete session %s: %w", sessionID, err)
	}
	defer tx.Rollback() //nolint:errcheck // after Commit a no-op
	res, err := tx.ExecContext(ctx, `DELETE FROM sessions WHERE id = ?`, sessionID)
	if err != nil {
		return false, fmt.Errorf("delete session %s: %w", sessionID, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("delete session %s: %w", sessionID, err)
	}
	for _, q := range []string{`DELETE FROM events WHERE session_id = ?`, `DELETE FROM kv WHERE session_id = ?`} {
		if _, err := tx.ExecContext(ctx, q, sessionID); err != nil {
			return false, fmt.Errorf("delete session %s: %w", sessionID, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("delete session %s: %w", sessionID, err)
	}
	delete(l.lastSeq, sessionID)
	return n > 0, nil
}
