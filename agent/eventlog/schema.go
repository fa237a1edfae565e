package eventlog

import (
	"context"
	"database/sql"

	schema "github.com/betcode-dev/betcode/shared/migrate"
)

// migrations are applied in order; schema_version holds how many have been
// applied. Never edit a released entry: append a new one.
//
// The events table is WITHOUT ROWID: its primary key (session_id, seq) is
// the only access path, so a clustered key makes both the append (one B-tree
// instead of table + index) and the range scan of Since (rows stored in key
// order) cheaper. BenchmarkSchema measures it against a rowid table.
var migrations = []string{
	// 1: events, sessions, kv.
	`CREATE TABLE events (
		session_id TEXT    NOT NULL,
		seq        INTEGER NOT NULL,
		ts         INTEGER NOT NULL, -- unix nanoseconds, 0 for the zero time
		kind       TEXT    NOT NULL,
		payload    BLOB,
		PRIMARY KEY (session_id, seq)
	) WITHOUT ROWID;
	CREATE TABLE sessions (
		id                   TEXT    NOT NULL PRIMARY KEY,
		model                TEXT    NOT NULL DEFAULT '',
		working_directory    TEXT    NOT NULL DEFAULT '',
		worktree_id          TEXT    NOT NULL DEFAULT '',
		status               TEXT    NOT NULL DEFAULT '',
		claude_started       INTEGER NOT NULL DEFAULT 0,
		created_at           INTEGER NOT NULL DEFAULT 0,
		updated_at           INTEGER NOT NULL DEFAULT 0,
		message_count        INTEGER NOT NULL DEFAULT 0,
		total_input_tokens   INTEGER NOT NULL DEFAULT 0,
		total_output_tokens  INTEGER NOT NULL DEFAULT 0,
		total_cost_usd       REAL    NOT NULL DEFAULT 0,
		last_message_preview TEXT    NOT NULL DEFAULT '',
		compaction_seq       INTEGER NOT NULL DEFAULT 0,
		metadata             TEXT    NOT NULL DEFAULT '{}'
	);
	CREATE INDEX sessions_updated ON sessions (updated_at DESC, id);
	CREATE INDEX sessions_workdir ON sessions (working_directory, updated_at DESC);
	CREATE INDEX sessions_worktree ON sessions (worktree_id, updated_at DESC);
	CREATE TABLE kv (
		session_id TEXT NOT NULL,
		key        TEXT NOT NULL,
		value      BLOB,
		PRIMARY KEY (session_id, key)
	) WITHOUT ROWID;`,
	// 2: a session's display name, creator and last stop reason (0.4.0).
	`ALTER TABLE sessions ADD COLUMN name             TEXT NOT NULL DEFAULT '';
	ALTER TABLE sessions ADD COLUMN created_by       TEXT NOT NULL DEFAULT '';
	ALTER TABLE sessions ADD COLUMN last_stop_reason TEXT NOT NULL DEFAULT '';`,
}

// migrate brings the schema up to date.
func migrate(ctx context.Context, db *sql.DB) error {
	return schema.Apply(ctx, db, migrations)
}
